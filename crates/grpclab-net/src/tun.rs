//! A TUN device made inside a network namespace: the kernel hands each IP packet routed to
//! it to the file descriptor, and takes each packet written there as arrived. The device
//! lives as long as that descriptor (it is not made persistent), so a process that ends,
//! however it ends, leaves no device behind.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use crate::NetError;

/// `TUNSETIFF`: `_IOW('T', 202, int)` (linux/if_tun.h).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// IP packets, no packet-information header (linux/if_tun.h).
const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;

/// `struct ifreq` as Linux lays it out (linux/if.h): the name, then a 24-byte union whose
/// first member here is `ifr_flags`.
#[repr(C)]
struct InterfaceRequest {
    name: [u8; 16],
    flags: i16,
    _rest: [u8; 22],
}

/// Makes TUN device `name` inside the network namespace at `netns` (a file under
/// /run/netns) and returns its descriptor. The namespace is entered by a thread of its own
/// that ends at once: the calling thread stays where it was.
pub fn open_in(netns: &Path, name: &str) -> Result<OwnedFd, NetError> {
    if name.len() >= 16 {
        return Err(NetError(format!(
            "interface name '{name}' is longer than 15 bytes"
        )));
    }
    let netns = netns.to_path_buf();
    let name = name.to_owned();
    std::thread::spawn(move || -> Result<OwnedFd, NetError> {
        let namespace = File::open(&netns).map_err(|err| {
            NetError(format!("cannot open network namespace {}: {err}", netns.display()))
        })?;
        // SAFETY: setns takes a descriptor this thread owns (kept open across the call) and a
        // namespace type; it changes only this thread's network namespace.
        if unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(NetError(format!(
                "cannot enter network namespace {}: {}",
                netns.display(),
                std::io::Error::last_os_error()
            )));
        }
        let tun = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .map_err(|err| {
                NetError(format!(
                    "cannot open /dev/net/tun ({err}): this kernel or container offers no TUN devices"
                ))
            })?;
        let mut request = InterfaceRequest {
            name: [0; 16],
            flags: IFF_TUN | IFF_NO_PI,
            _rest: [0; 22],
        };
        request.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`; `request` has its size and
        // layout (40 bytes, linux/if.h) and outlives the call.
        if unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF, &mut request) } != 0 {
            return Err(NetError(format!(
                "cannot make TUN device {name}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(OwnedFd::from(tun))
    })
    .join()
    .map_err(|_| NetError("the thread making a TUN device panicked".to_owned()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_has_the_kernels_layout() {
        assert_eq!(std::mem::size_of::<InterfaceRequest>(), 40);
        assert_eq!(std::mem::offset_of!(InterfaceRequest, flags), 16);
    }
}
