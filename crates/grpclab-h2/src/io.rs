//! Socket reads for the connection loops.

use bytes::BytesMut;
use std::io;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Reads what the socket has into `buf`'s spare capacity; `Ok(0)` is end of stream.
///
/// When a read returns less than the space offered, the socket was drained at that moment:
/// this tells tokio so (by answering its readiness closure with `WouldBlock`), which saves the
/// extra read that would only return EAGAIN before the loop waits again — one syscall per turn
/// of every connection. tokio clears readiness only if no new readiness event arrived since
/// it was observed, so data that arrives right after the read still wakes the loop.
pub(crate) fn read_available(tcp: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    let offered = spare.len();
    let mut got = 0usize;
    let result = tcp.try_io(Interest::READABLE, || {
        let n = socket2::SockRef::from(tcp).recv(spare)?;
        got = n;
        if n > 0 && n < offered {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    let n = match result {
        Ok(n) => n,
        Err(err) if err.kind() == io::ErrorKind::WouldBlock && got > 0 => got,
        Err(err) => return Err(err),
    };
    // SAFETY: `recv` initialized the first `n` bytes of the spare capacity (it returns how
    // many bytes it wrote, at most `offered`), so they may become part of the buffer.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}
