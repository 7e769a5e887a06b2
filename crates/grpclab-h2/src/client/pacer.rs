//! The timer of paced stream messages (`--stream-interval`), with microsecond resolution.
//!
//! tokio's timer fires on the first tick of its 1 ms wheel at or after a deadline, and the
//! runtime parks with millisecond timeouts: a message due in 500 µs went out ~1.6 ms after
//! the one before, a 2 ms interval became ~3.1 ms (ghz, on Go's timers: 1.15 ms and 2.2 ms).
//! A timerfd on `CLOCK_MONOTONIC` — the clock `std::time::Instant` reads on Linux — is a file
//! descriptor tokio's reactor watches like a socket, so the connection's task wakes within
//! microseconds of the instant asked for. It costs a `timerfd_settime` per new instant and a
//! `read` per expiry, so only connections whose streams have an interval create one.

use std::io;
use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;

/// nix's timerfd, as tokio's reactor takes a descriptor (nix lends it as `AsFd` only).
#[derive(Debug)]
struct Timer(TimerFd);

impl std::os::fd::AsRawFd for Timer {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsFd::as_fd(&self.0).as_raw_fd()
    }
}

/// A one-shot timer for one instant at a time.
#[derive(Debug)]
pub struct Pacer {
    fd: AsyncFd<Timer>,
    /// The instant it is armed for, until it fires.
    armed: Option<Instant>,
}

impl Pacer {
    /// A disarmed timer, registered with the current tokio runtime's reactor.
    pub fn new() -> io::Result<Pacer> {
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        // SAFETY: `Timer::as_raw_fd` is the descriptor `TimerFd::as_fd` lends, which std's
        // `AsFd` contract keeps open for as long as the `TimerFd` lives. The `AsyncFd` owns the
        // `Timer` for its whole life (no `into_inner` here) and nothing replaces the `TimerFd`
        // in it, so the descriptor stays open and the same until the `AsyncFd` is dropped —
        // `register`'s contract.
        let fd =
            unsafe { AsyncFd::register_with_interest(Timer(timer), tokio::io::Interest::READABLE) }
                .map_err(io::Error::from)?;
        Ok(Pacer { fd, armed: None })
    }

    /// Arms the timer for `at`, or disarms it (`None`). Asking again for the instant it is
    /// armed for costs nothing.
    pub fn set(&mut self, at: Option<Instant>) -> io::Result<()> {
        if at == self.armed {
            return Ok(());
        }
        match at {
            Some(at) => {
                // A zero expiry would disarm a timerfd: an instant already past fires at once.
                let delay = at
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_nanos(1));
                self.fd
                    .get_ref()
                    .0
                    .set(
                        Expiration::OneShot(TimeSpec::from_duration(delay)),
                        TimerSetTimeFlags::empty(),
                    )
                    .map_err(io::Error::from)?;
            }
            None => self.fd.get_ref().0.unset().map_err(io::Error::from)?,
        }
        self.armed = at;
        Ok(())
    }

    /// Whether the timer is armed.
    pub fn is_armed(&self) -> bool {
        self.armed.is_some()
    }

    /// Waits until the armed instant has passed (forever when disarmed); the timer is then
    /// disarmed.
    pub async fn fired(&mut self) -> io::Result<()> {
        if self.armed.is_none() {
            return std::future::pending().await;
        }
        loop {
            let mut ready = self.fd.readable().await?;
            // Reading the expiry count clears the readiness; before expiry it would block.
            match ready.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from)) {
                Ok(result) => {
                    result?;
                    self.armed = None;
                    return Ok(());
                }
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_once_per_instant_and_not_when_disarmed() {
        let mut pacer = Pacer::new().unwrap();
        let at = Instant::now() + Duration::from_micros(300);
        pacer.set(Some(at)).unwrap();
        assert!(pacer.is_armed());
        pacer.fired().await.unwrap();
        assert!(Instant::now() >= at, "fired before its instant");
        assert!(!pacer.is_armed());
        // A past instant fires at once (a zero expiry would have disarmed the timerfd).
        pacer
            .set(Some(Instant::now() - Duration::from_millis(1)))
            .unwrap();
        pacer.fired().await.unwrap();
        // Disarmed, it never fires.
        pacer
            .set(Some(Instant::now() + Duration::from_millis(1)))
            .unwrap();
        pacer.set(None).unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(20), pacer.fired()).await;
        assert!(waited.is_err(), "a disarmed timer fired");
    }
}
