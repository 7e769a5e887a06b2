//! gRPC's retry and hedging policies, as a service config's `retryPolicy` and
//! `hedgingPolicy` state them (gRFC A6), applied per method: a retried call that ends with a
//! retryable status is sent again after a random backoff; a hedged call sends another
//! attempt each `hedging_delay` until one answers. Either way up to `max_attempts` attempts
//! in all, never past the call's deadline. The call is what the run counts (one ticket, one
//! result: the attempt it committed to, its latency from its first send); its attempts are
//! counted apart, so the extra load a policy puts on a server (the amplification, attempts
//! per call) is reported beside it.

use grpclab_core::Code;
use std::time::Duration;

/// One method's retry policy.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (2 to 5: gRPC caps larger values at 5).
    pub max_attempts: u32,
    /// The first retry's backoff bound.
    pub initial_backoff: Duration,
    /// No backoff bound grows past this.
    pub max_backoff: Duration,
    /// Each later retry's bound is the last one's times this (at least 1).
    pub backoff_multiplier: f64,
    /// The statuses that are retried (never OK).
    pub retryable: Vec<Code>,
}

impl RetryPolicy {
    /// Whether the policy is one gRPC accepts: 2 to 5 attempts, backoffs above 0, a
    /// multiplier above 0, at least one retryable status and never OK. `Err` names the field.
    pub fn check(&self) -> Result<(), String> {
        check_attempts(self.max_attempts)?;
        if self.initial_backoff.is_zero() || self.max_backoff.is_zero() {
            return Err("initialBackoff and maxBackoff must be above 0, e.g. \"0.01s\"".to_owned());
        }
        if !(self.backoff_multiplier > 0.0 && self.backoff_multiplier.is_finite()) {
            return Err(format!(
                "backoffMultiplier is {}; give a number above 0, e.g. 2",
                self.backoff_multiplier
            ));
        }
        if self.retryable.contains(&Code::Ok) {
            return Err("retryableStatusCodes cannot hold OK".to_owned());
        }
        if self.retryable.is_empty() {
            return Err(
                "retryableStatusCodes is empty; name at least one status, e.g. [\"UNAVAILABLE\"]"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Whether a call that ended with `code` after `attempts` attempts is sent again.
    pub fn retries(&self, code: Code, attempts: u32) -> bool {
        attempts < self.max_attempts && self.retryable.contains(&code)
    }

    /// How long to wait before retry number `retry` (1: the first retry): as gRFC A6 draws
    /// it, `random` (in [0, 1)) times min(initial × multiplier^(retry − 1), max).
    pub fn backoff(&self, retry: u32, random: f64) -> Duration {
        let exponent = retry.saturating_sub(1).min(64) as i32;
        let bound = self.initial_backoff.as_secs_f64() * self.backoff_multiplier.powi(exponent);
        let bound = bound.min(self.max_backoff.as_secs_f64());
        Duration::from_secs_f64((bound * random.clamp(0.0, 1.0)).max(0.0))
    }
}

/// One method's hedging policy: the call's first attempt at once, another each
/// `hedging_delay` while none has answered, the next at once when one ends with a non-fatal
/// status. The first attempt that ends OK or with a fatal status is the call's; the others
/// still running are cancelled (RST_STREAM CANCEL).
#[derive(Debug, Clone, PartialEq)]
pub struct HedgingPolicy {
    /// Attempts in all, the first included (2 to 5: gRPC caps larger values at 5).
    pub max_attempts: u32,
    /// The wait before each next attempt while none has answered (0: all at once).
    pub hedging_delay: Duration,
    /// Statuses after which the call goes on with its next attempt (never OK); any other
    /// status ends the call.
    pub non_fatal: Vec<Code>,
}

impl HedgingPolicy {
    /// Whether the policy is one gRPC accepts: 2 to 5 attempts, no non-fatal OK. `Err`
    /// names the field.
    pub fn check(&self) -> Result<(), String> {
        check_attempts(self.max_attempts)?;
        if self.non_fatal.contains(&Code::Ok) {
            return Err("nonFatalStatusCodes cannot hold OK".to_owned());
        }
        Ok(())
    }

    /// Whether an attempt that ended with `code` lets the call go on to its next attempt.
    pub fn non_fatal(&self, code: Code) -> bool {
        self.non_fatal.contains(&code)
    }
}

/// Attempts in all as a service config gives them: at least 2; more than 5 is 5 (gRPC caps
/// it). `Err` says what to give.
pub fn max_attempts(given: i64) -> Result<u32, String> {
    if given >= 2 {
        return Ok(given.min(5) as u32);
    }
    Err(format!(
        "maxAttempts is {given}; give 2 to 5 (attempts in all, the first included; gRPC caps more at 5)"
    ))
}

/// Attempts in all, as the engine takes them: 2 to 5.
fn check_attempts(attempts: u32) -> Result<(), String> {
    match max_attempts(i64::from(attempts)) {
        Ok(capped) if capped == attempts => Ok(()),
        Ok(_) => Err(format!("maxAttempts is {attempts}; give 2 to 5")),
        Err(reason) => Err(reason),
    }
}

/// A small generator of the backoffs' random shares (xorshift64*): each connection its own,
/// seeded apart, no locking.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A generator seeded with `seed` (any value; 0 is replaced).
    pub fn new(seed: u64) -> Jitter {
        Jitter(seed.max(1))
    }

    /// The next share, in [0, 1).
    pub fn share(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(25),
            backoff_multiplier: 2.0,
            retryable: vec![Code::Unavailable],
        }
    }

    #[test]
    fn only_retryable_statuses_within_the_attempts_are_retried() {
        let policy = policy();
        assert!(policy.retries(Code::Unavailable, 1));
        assert!(policy.retries(Code::Unavailable, 2));
        assert!(
            !policy.retries(Code::Unavailable, 3),
            "three attempts in all"
        );
        assert!(!policy.retries(Code::Internal, 1));
    }

    #[test]
    fn backoffs_grow_by_the_multiplier_up_to_the_maximum() {
        let policy = policy();
        let almost_one = 1.0 - f64::EPSILON;
        assert_eq!(policy.backoff(1, 0.5), Duration::from_millis(5));
        assert!(policy.backoff(2, almost_one) <= Duration::from_millis(20));
        assert!(policy.backoff(2, almost_one) > Duration::from_millis(19));
        assert!(
            policy.backoff(3, almost_one) <= Duration::from_millis(25),
            "capped"
        );
        assert_eq!(policy.backoff(9, 0.0), Duration::ZERO);
    }

    #[test]
    fn jitter_stays_in_its_range_and_spreads() {
        let mut jitter = Jitter::new(7);
        let draws: Vec<f64> = (0..10_000).map(|_| jitter.share()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((0.45..0.55).contains(&mean), "{mean}");
    }
}
