//! The counters both clients keep: per response stream ([`ClientStats`]) and per logical call
//! ([`RetryStats`]). The attempt engine updates them; clones of a client share them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the response streams a client received (shared by its clones): one count per
/// attempt that got a response.
///
/// # Examples
///
/// ```
/// # use mcp_framing::client::*;
/// let client = RetryingClient::new(reqwest::Client::new(),
///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
/// assert_eq!(client.response_stats().abandoned(), 0);
/// ```
#[derive(Debug, Default)]
pub struct ClientStats {
    verified_messages: AtomicU64,
    complete: AtomicU64,
    abandoned: AtomicU64,
    failed: AtomicU64,
}

impl ClientStats {
    /// Messages verified and handed on.
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn verified_messages(&self) -> u64 {
        self.verified_messages.load(Ordering::Relaxed)
    }

    /// Responses that ended complete.
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn complete(&self) -> u64 {
        self.complete.load(Ordering::Relaxed)
    }

    /// Responses cut before their end (truncated, the body failed, or the idle timeout ran out).
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Responses that failed otherwise (aborted by the server, corrupt, unframed, or carrying a
    /// verified message that cannot be delivered unchanged).
    ///
    /// # Examples
    ///
    /// See [`ClientStats`].
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub(crate) fn verified_message(&self) {
        bump(&self.verified_messages);
    }

    pub(crate) fn completed(&self) {
        bump(&self.complete);
    }

    pub(crate) fn ended(&self, abandoned: bool) {
        bump(if abandoned {
            &self.abandoned
        } else {
            &self.failed
        });
    }
}

/// Counters of the logical calls a client made (shared by its clones).
///
/// # Examples
///
/// ```
/// # use mcp_framing::client::*;
/// let client = RetryingClient::new(reqwest::Client::new(),
///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
/// assert_eq!(client.stats().snapshot().attempts, 0);
/// ```
#[derive(Debug, Default)]
pub struct RetryStats {
    calls: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    refusals_retried: AtomicU64,
    gave_up: AtomicU64,
}

/// A copy of the [`RetryStats`] counters.
///
/// # Examples
///
/// ```
/// # use mcp_framing::client::*;
/// let client = RetryingClient::new(reqwest::Client::new(),
///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
/// let none = client.stats().snapshot(); // no call yet
/// assert_eq!((none.calls, none.attempts, none.retries, none.refusals_retried, none.gave_up), (0, 0, 0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetrySnapshot {
    /// Logical calls started.
    pub calls: u64,
    /// Attempts sent (the first ones and the retries).
    pub attempts: u64,
    /// Retries sent.
    pub retries: u64,
    /// Retries after a retryable deduplication refusal (`in_progress`, `store_unavailable`).
    pub refusals_retried: u64,
    /// Calls that ended in an error after their last attempt.
    pub gave_up: u64,
}

impl RetryStats {
    /// The current counts.
    ///
    /// # Examples
    ///
    /// ```
    /// # use mcp_framing::client::*;
    /// let client = RetryingClient::new(reqwest::Client::new(),
    ///     DiscoveringResolver::new(reqwest::Client::new(), ["http://127.0.0.1:1/mcp"]));
    /// let snapshot = client.stats().snapshot();
    /// assert_eq!((snapshot.calls, snapshot.retries), (0, 0));
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> RetrySnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RetrySnapshot {
            calls: get(&self.calls),
            attempts: get(&self.attempts),
            retries: get(&self.retries),
            refusals_retried: get(&self.refusals_retried),
            gave_up: get(&self.gave_up),
        }
    }

    pub(crate) fn call(&self) {
        bump(&self.calls);
    }

    pub(crate) fn attempt(&self) {
        bump(&self.attempts);
    }

    pub(crate) fn retry(&self) {
        bump(&self.retries);
    }

    pub(crate) fn refusal_retried(&self) {
        bump(&self.refusals_retried);
    }

    pub(crate) fn gave_up(&self) {
        bump(&self.gave_up);
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
