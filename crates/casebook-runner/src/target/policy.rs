//! How hard to try one call of an agent: the per-call timeout, which failures are retried, and
//! how long to wait between attempts (exponential backoff with seeded jitter, or the server's
//! `Retry-After`).

use std::time::Duration;

use crate::protocol::AgentRequest;
use crate::record::Failure;

/// The timeout and retries of each call of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPolicy {
    /// How long one attempt may take; past it the call fails with `timeout` (not retried: a
    /// slow agent is likely to be slow again, and retrying would multiply the wait).
    pub timeout: Duration,
    /// Attempts after the first, on connection errors and HTTP 408, 429 and 5xx.
    pub retries: u32,
    /// The wait before the first retry; it doubles with each further one.
    pub backoff: Duration,
    /// The longest wait between attempts, whatever the backoff or `Retry-After` say.
    pub max_wait: Duration,
    /// Seeds the jitter added to backoff waits, so that a run's waits are reproducible.
    pub jitter_seed: u64,
}

impl Default for CallPolicy {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            retries: 2,
            backoff: Duration::from_millis(500),
            max_wait: Duration::from_secs(60),
            jitter_seed: 0,
        }
    }
}

/// Whether and when a failed attempt may be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    Never,
    Backoff,
    /// After what the server's `Retry-After` asked for.
    After(Duration),
}

/// One attempt's failure.
#[derive(Debug)]
pub(crate) struct AttemptError {
    pub failure: Failure,
    pub retry: Retry,
}

impl AttemptError {
    pub fn fatal(kind: &str, message: impl Into<String>) -> Self {
        Self { failure: Failure::new(kind, message), retry: Retry::Never }
    }

    pub fn transient(kind: &str, message: impl Into<String>) -> Self {
        Self { failure: Failure::new(kind, message), retry: Retry::Backoff }
    }
}

impl CallPolicy {
    /// The wait before retry number `attempt + 1` (0-based `attempt`); `salt` makes different
    /// requests jitter differently under one seed.
    pub(crate) fn wait(&self, attempt: u32, retry: Retry, salt: u64) -> Duration {
        let wait = match retry {
            Retry::After(wait) => wait,
            Retry::Never | Retry::Backoff => {
                let base = self.backoff.saturating_mul(2u32.saturating_pow(attempt));
                // Up to a tenth more, so that many runs failing together do not retry together.
                let fraction = (mix(self.jitter_seed ^ mix(salt ^ u64::from(attempt))) % 1000) as f64 / 10_000.0;
                base.saturating_add(base.mul_f64(fraction))
            }
        };
        wait.min(self.max_wait)
    }
}

/// A salt that differs between the requests of an experiment: case, run and turn.
pub(crate) fn request_salt(request: &AgentRequest) -> u64 {
    // FNV-1a: stable across builds and platforms, unlike the standard hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = request.case_id.bytes().chain(request.run.to_le_bytes()).chain((request.turn as u64).to_le_bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A `Retry-After` value (RFC 9110 §10.2.3): seconds, or an HTTP date, which is read against
/// `now`. A date in the past means no wait; anything unreadable is `None`.
pub(crate) fn parse_retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(value).ok()?;
    let millis = when.as_millisecond().saturating_sub(now.as_millisecond());
    Some(Duration::from_millis(u64::try_from(millis).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_a_little_seeded_jitter() {
        let policy = CallPolicy { backoff: Duration::from_millis(100), ..CallPolicy::default() };
        for attempt in 0..4 {
            let base = Duration::from_millis(100 * 2u64.pow(attempt));
            let wait = policy.wait(attempt, Retry::Backoff, 7);
            assert!(wait >= base && wait < base + base / 10, "{attempt}: {wait:?}");
            assert_eq!(wait, policy.wait(attempt, Retry::Backoff, 7), "the same seed gives the same wait");
        }
        let other = CallPolicy { jitter_seed: 1, ..policy };
        assert!((0..8).any(|salt| policy.wait(0, Retry::Backoff, salt) != other.wait(0, Retry::Backoff, salt)));
        assert_eq!(policy.wait(30, Retry::Backoff, 0), Duration::from_secs(60), "capped");
    }

    #[test]
    fn retry_after_wins_over_backoff_but_is_capped() {
        let policy = CallPolicy::default();
        assert_eq!(policy.wait(3, Retry::After(Duration::from_secs(1)), 0), Duration::from_secs(1));
        assert_eq!(policy.wait(0, Retry::After(Duration::from_secs(3600)), 0), Duration::from_secs(60));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now: jiff::Timestamp = "2015-10-21T07:28:00Z".parse().unwrap();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
