//! How many attempts, and how long between them (SPEC.md §17.13).

use std::time::Duration;

/// Bounded attempts with exponential backoff and full jitter: before retry `n` (1 for the
/// second attempt) the client sleeps a uniformly random time in
/// `[0, min(max_backoff, initial_backoff * 2^(n-1))]`, and at least the `retryAfterMs` a
/// retryable refusal asked for (SPEC.md §17.9). Full jitter spreads the retries of many clients
/// cut at once (a proxy restart) instead of synchronising them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use mcp_framing::client::{DiscoveringResolver, RetrySchedule, RetryingClient};
///
/// // Five attempts in all; retry n waits at most 50 ms * 2^(n-1), never more than 1 s.
/// let schedule = RetrySchedule::default()
///     .max_attempts(5)
///     .initial_backoff(Duration::from_millis(50))
///     .max_backoff(Duration::from_secs(1));
/// assert_ne!(schedule, RetrySchedule::default());
/// let http = reqwest::Client::new();
/// let resolver = DiscoveringResolver::new(http.clone(), ["http://127.0.0.1:1/mcp"]);
/// let client = RetryingClient::new(http, resolver).schedule(schedule);
/// # let _ = client;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrySchedule {
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
}

impl Default for RetrySchedule {
    /// 4 attempts, backoff from 100 ms up to 2 s.
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetrySchedule {
    /// Attempts in all, the first included (default 4; at least 1, which disables retries).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::RetrySchedule;
    ///
    /// let no_retries = RetrySchedule::default().max_attempts(1);
    /// assert_ne!(no_retries, RetrySchedule::default()); // 4 by default
    /// // At least the first attempt is always made:
    /// assert_eq!(RetrySchedule::default().max_attempts(0), no_retries);
    /// ```
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The backoff ceiling of the first retry (default 100 ms), doubled for each later one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::client::RetrySchedule;
    ///
    /// // The default waits up to 100 ms before the first retry, 200 ms before the second, ...
    /// assert_eq!(RetrySchedule::default().initial_backoff(Duration::from_millis(100)), RetrySchedule::default());
    /// let patient = RetrySchedule::default().initial_backoff(Duration::from_millis(500));
    /// assert_ne!(patient, RetrySchedule::default());
    /// ```
    #[must_use]
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// The largest backoff ceiling (default 2 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::client::RetrySchedule;
    /// let capped = RetrySchedule::default().max_backoff(Duration::from_millis(10));
    /// assert_ne!(capped, RetrySchedule::default());
    /// ```
    #[must_use]
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// The number of attempts.
    ///
    /// # Examples
    ///
    /// See [`RetrySchedule`].
    // Hidden: the engine reads the schedule; the tests check it.
    #[doc(hidden)]
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The pause before retry `retry` (1 for the second attempt), at least `floor`.
    ///
    /// # Panics
    ///
    /// If the operating system has no random source.
    ///
    /// # Examples
    ///
    /// See [`RetrySchedule`].
    // Hidden: the engine reads the schedule; the tests check it.
    #[doc(hidden)]
    #[must_use]
    pub fn delay(&self, retry: u32, floor: Duration) -> Duration {
        let doubling = 2u32.saturating_pow(retry.saturating_sub(1));
        let ceiling = self
            .initial_backoff
            .saturating_mul(doubling)
            .min(self.max_backoff);
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).expect("the operating system has no random source");
        let fraction = u64::from_be_bytes(random) as f64 / u64::MAX as f64;
        ceiling.mul_f64(fraction).max(floor)
    }
}
