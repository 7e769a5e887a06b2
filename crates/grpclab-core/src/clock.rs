//! The wall clock as message stamps carry it: nanoseconds since the Unix epoch. A server
//! stamps a reply as it produces it (the streaming echo's `EchoReply.sent_unix_nanos`) and the
//! client reads the stamp against its own clock as the reply arrives, so each message of a
//! stream has a latency — meaningful when both clocks are one (the same machine) or synced.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in nanoseconds since the Unix epoch (0 for a clock set before 1970, which no stamp
/// can be compared with anyway).
pub fn unix_nanos_now() -> u64 {
    unix_nanos(SystemTime::now())
}

/// `time` in nanoseconds since the Unix epoch (0 before it; saturating past the year 2554).
pub fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stamps_count_from_the_epoch() {
        assert_eq!(unix_nanos(UNIX_EPOCH), 0);
        assert_eq!(unix_nanos(UNIX_EPOCH + Duration::from_nanos(1_500)), 1_500);
        assert_eq!(unix_nanos(UNIX_EPOCH - Duration::from_secs(1)), 0);
        // After 2020-01-01: the clock is the wall clock.
        assert!(unix_nanos_now() > 1_577_836_800_000_000_000);
    }
}
