//! How many descriptors a process may hold (RLIMIT_NOFILE), which caps the connections one
//! `serve` or one `load` can keep: every connection is a socket. The soft limit is raised to
//! the hard one at start (a shell's default soft limit is often 1,024 while the hard one
//! allows far more), and a run asking for more connections than fit is told so in one line
//! before anything starts, instead of failing mid-run with "Too many open files".

use crate::InputError;
use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Descriptors a process keeps besides its connections: standard streams, the runtime's epoll
/// and event descriptors, timers, the listening socket, result files, a metrics endpoint.
pub const RESERVED: u64 = 100;

/// The descriptor limit in force: soft (what `open` and `accept` are held to) and hard (how
/// far an unprivileged process may raise the soft one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The limit in force.
    pub soft: u64,
    /// The ceiling the soft limit may be raised to.
    pub hard: u64,
}

impl OpenFilesLimit {
    /// The limit in force now; `None` where the system does not say.
    pub fn current() -> Option<OpenFilesLimit> {
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
        Some(OpenFilesLimit { soft, hard })
    }

    /// Raises the soft limit to the hard one, as far as the kernel allows, and returns the
    /// limit then in force (unchanged when it cannot be raised).
    pub fn raise_to_hard() -> Option<OpenFilesLimit> {
        let limit = OpenFilesLimit::current()?;
        if limit.soft < limit.hard
            && setrlimit(Resource::RLIMIT_NOFILE, limit.hard, limit.hard).is_err()
        {
            // An unlimited hard limit is above the kernel's fs.nr_open: stay where we are.
            return Some(limit);
        }
        OpenFilesLimit::current()
    }

    /// How many connections fit beside [`RESERVED`] descriptors.
    pub fn connections(self) -> u64 {
        self.soft.saturating_sub(RESERVED)
    }

    /// `Ok` when `wanted` connections (as `flag` asks) fit; else the one line saying what the
    /// limit is and what to do.
    pub fn check(self, wanted: usize, flag: &str) -> Result<(), InputError> {
        let fit = self.connections();
        if wanted as u64 <= fit {
            return Ok(());
        }
        Err(InputError(format!(
            "{flag} {wanted} needs {wanted} sockets, but this process may hold {} descriptors (RLIMIT_NOFILE; hard limit {}): at most {fit} connections fit; use fewer, split the run over several processes (load --shard), or raise the hard limit (ulimit -Hn, as root)",
            self.soft, self.hard
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_fit_beside_the_reserved_descriptors() {
        let limit = OpenFilesLimit {
            soft: 1_024,
            hard: 4_096,
        };
        assert_eq!(limit.connections(), 924);
        assert!(limit.check(924, "--connections").is_ok());
        let refused = limit.check(925, "--connections").unwrap_err().0;
        assert!(
            refused.starts_with("--connections 925 needs 925 sockets"),
            "{refused}"
        );
        assert!(
            refused.contains("1024 descriptors") && refused.contains("hard limit 4096"),
            "{refused}"
        );
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let raised = OpenFilesLimit::raise_to_hard().expect("Linux says");
        let now = OpenFilesLimit::current().unwrap();
        assert_eq!(raised, now);
        assert!(now.soft == now.hard || now.hard == nix::sys::resource::RLIM_INFINITY);
    }
}
