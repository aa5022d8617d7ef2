//! The storage interface of the deduplication engine (SPEC.md §17.4), and what it stores.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

use super::fingerprint::Fingerprint;
use super::scope::{StoreKey, hex};

/// A boxed, `Send` future: what [`DedupeStore`] methods return, so that a store is usable as
/// `Arc<dyn DedupeStore>`.
pub(crate) type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The identity of one claim on a key: the current holder's token is kept in the record, and
/// renewal, completion and release are accepted only with it (compare-and-set), so a holder
/// whose lease expired and was taken over can no longer write (SPEC.md §17.5). 128 random bits
/// per claim, so tokens never repeat, even across records that expired and were claimed again.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FencingToken(u128);

impl FencingToken {
    /// Draws a token from the operating system's CSPRNG.
    ///
    /// # Panics
    ///
    /// If the operating system has no random source, which no supported platform does.
    // The engine mints a token per claim; a store only compares and keeps them.
    #[must_use]
    pub(crate) fn random() -> Self {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the operating system has no random source");
        Self(u128::from_be_bytes(bytes))
    }

    /// Wraps a token a test reads back from a store.
    #[cfg(test)]
    pub(crate) const fn from_u128(token: u128) -> Self {
        Self(token)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0.to_be_bytes()))
    }
}

impl fmt::Debug for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FencingToken({self})")
    }
}

/// What happens to a claim whose lease expired without a completion (its holder died, hung, or
/// was cancelled mid-execution) when the key is claimed again (SPEC.md §17.5).
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::LeaseExpiry;
/// assert_eq!(LeaseExpiry::default(), LeaseExpiry::Reexecute);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseExpiry {
    /// The key is free again: the next attempt executes (with a new fencing token and the next
    /// generation). At least once after a crash: if the first holder's side effect happened
    /// before it died, it happens again. The default, as in AWS Lambda Powertools.
    #[default]
    Reexecute,
    /// The record becomes "outcome unknown" for the rest of the window, and every later attempt
    /// gets the refusal "outcome unknown" (`outcome_unknown`), a final error: at most
    /// once; the caller decides (check the effect, retry with a new key).
    Refuse,
}

/// What a [`DedupeStore::claim`] is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The fingerprint of this attempt's parameters.
    pub fingerprint: Fingerprint,
    /// The token this attempt will hold if it wins the claim.
    pub token: FencingToken,
    /// How long the claim stays valid without a renewal.
    pub lease: Duration,
    /// How long the record lives (reset at completion).
    pub retention: Duration,
    /// What to do with an earlier claim whose lease expired.
    pub on_expired_lease: LeaseExpiry,
}

/// A final result as stored: the `result` or `error` member of the final JSON-RPC response, as
/// JSON text, without the `jsonrpc` and `id` members (a replay answers under the retry's id).
#[derive(Clone, PartialEq, Eq)]
pub enum StoredResponse {
    /// The `result` member (success).
    Result(Bytes),
    /// The `error` member (a JSON-RPC error is a final result too, and is replayed).
    Error(Bytes),
}

impl StoredResponse {
    /// The JSON text of the member.
    #[must_use]
    pub fn json(&self) -> &Bytes {
        match self {
            Self::Result(json) | Self::Error(json) => json,
        }
    }

    /// Length of the member's JSON text in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.json().len()
    }

    /// Whether the member's text is empty (never, for a member read from a response).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.json().is_empty()
    }

    /// Whether this is an `error` member.
    #[must_use]
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error(_))
    }

    /// The whole JSON-RPC response under `id` (the retry's own id, SPEC.md §17.6), built from
    /// the stored text without re-parsing it.
    // Hidden: the layer answers a replay with it; a store keeps the bytes (`json`).
    #[doc(hidden)]
    #[must_use]
    pub fn to_response(&self, id: &serde_json::Value) -> String {
        let (member, json) = match self {
            Self::Result(json) => ("result", json),
            Self::Error(json) => ("error", json),
        };
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"{member}":{}}}"#,
            String::from_utf8_lossy(json)
        )
    }
}

impl fmt::Debug for StoredResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.is_error() { "Error" } else { "Result" };
        write!(f, "{name}({} bytes)", self.len())
    }
}

/// What a completed record holds (SPEC.md §17.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completed {
    /// The final response's member, replayed to every retry.
    Stored(StoredResponse),
    /// The call completed, but its result was larger than the bound and was not kept: a retry
    /// gets the refusal "result not stored" (`result_not_stored`), never a second
    /// execution.
    NotStored {
        /// The size of the member that was not stored, in bytes.
        size: u64,
    },
}

impl Completed {
    /// Bytes of stored response text.
    #[must_use]
    pub fn stored_bytes(&self) -> usize {
        match self {
            Self::Stored(response) => response.len(),
            Self::NotStored { .. } => 0,
        }
    }
}

/// What a [`DedupeStore::claim`] found (SPEC.md §17.4).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimOutcome {
    /// This attempt holds the key with the request's token; execute it. `generation` counts the
    /// claims on the record: 1 for the first, 2 after one expired lease was taken over, ...
    Claimed {
        /// Which claim on this record this is (1 for the first).
        generation: u64,
    },
    /// The record's fingerprint differs from the request's: nothing was changed.
    Conflict {
        /// The fingerprint in the record.
        stored: Fingerprint,
    },
    /// Another attempt holds a live lease on the key.
    InFlight {
        /// Time left on its lease.
        lease_remaining: Duration,
    },
    /// The key completed: its outcome.
    Completed(Completed),
    /// An earlier claim's lease expired without a completion and the request asked for
    /// [`LeaseExpiry::Refuse`]: the outcome of that execution is unknown.
    Abandoned,
}

/// Why a store could not answer. Every variant is retryable from the client's point of view
/// (the store may be back): a keyed call whose store cannot be reached is refused, never
/// executed unprotected, unless fail-open was configured (SPEC.md §17.8).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use mcp_framing::dedupe::StoreError;
/// let err = StoreError::Timeout { after: Duration::from_secs(2) };
/// assert_eq!(err.to_string(), "the deduplication store did not answer within 2s");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store did not answer in time.
    #[error("the deduplication store did not answer within {after:?}")]
    Timeout {
        /// The time allowed.
        after: Duration,
    },
    /// The store is full of records it may not evict (claims in flight).
    #[error("the deduplication store is full: {entries} records, {bytes} bytes, all in flight")]
    Full {
        /// Records held.
        entries: usize,
        /// Bytes held.
        bytes: usize,
    },
    /// A record could not be read back (written by something else, or by another version).
    #[error("a deduplication record is malformed: {reason}")]
    Corrupt {
        /// What was wrong.
        reason: String,
    },
    /// The write reached the store's primary but fewer replicas than required acknowledged it
    /// within the time allowed (`RedisStore`'s `wait_for_replicas`, Redis `WAIT`): a failover now
    /// could lose it (SPEC.md §17.12).
    #[error(
        "{acknowledged} of {required} replicas acknowledged the deduplication record within {within:?}"
    )]
    NotReplicated {
        /// Replicas that acknowledged the write.
        acknowledged: u64,
        /// Replicas required.
        required: u64,
        /// The time allowed.
        within: Duration,
    },
    /// A claim the store made was gone when it was confirmed to the replicas
    /// (`RedisStore`'s `wait_for_replicas`): lost in a failover to a replica that had not
    /// received it, or removed. The call does not execute (SPEC.md §17.12.1).
    #[error("the deduplication claim was gone before its replicas acknowledged it")]
    ClaimLost,
    /// The Redis (or Valkey) server failed or could not be reached.
    #[cfg(feature = "redis")]
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

impl StoreError {
    /// A stable snake_case name for telemetry: `timeout`, `full`, `corrupt`, `not_replicated`,
    /// `claim_lost`, `redis`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::StoreError;
    /// assert_eq!(StoreError::Timeout { after: Duration::from_secs(2) }.kind(), "timeout");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "timeout",
            Self::Full { .. } => "full",
            Self::Corrupt { .. } => "corrupt",
            Self::NotReplicated { .. } => "not_replicated",
            Self::ClaimLost => "claim_lost",
            #[cfg(feature = "redis")]
            Self::Redis(_) => "redis",
        }
    }
}

/// A store of deduplication records, visible to every backend that shares it (SPEC.md §17.4).
///
/// Every operation is atomic on one record. Implementations: [`MemoryStore`](super::MemoryStore)
/// (one process) and `RedisStore` (feature `redis`, a fleet). The methods return boxed futures
/// so that a store is usable as `Arc<dyn DedupeStore>`.
///
/// A user picks one of the two stores and passes it to
/// [`Deduplicator::new`](super::Deduplicator::new); the methods and the types they exchange
/// (claims, fencing tokens, stored responses) are the engine's claim protocol, which changes with
/// the engine: they are the crate's own, hidden, and only the crate's stores implement them.
///
/// Contract for an implementation:
/// - `claim`: if no record exists (or it expired), create an in-flight record with the request's
///   fingerprint and token, a lease of `lease` and a lifetime of `retention`, and answer
///   `Claimed { generation: 1 }`. Otherwise, a different fingerprint is `Conflict` (nothing
///   changes); a live in-flight lease is `InFlight`; a completed record is `Completed`; an
///   in-flight record whose lease expired is taken over (new token, generation + 1, `Claimed`)
///   with [`LeaseExpiry::Reexecute`], or turned into an abandoned record (`Abandoned`, also for
///   every later claim) with [`LeaseExpiry::Refuse`].
/// - `renew`, `complete`, `release`: only if the record is in flight **with this token** (else
///   `Ok(false)`, nothing changes): extend the lease / store the outcome and reset the lifetime to
///   `retention` / delete the record. An expired lease that nobody took over is still this
///   token's: no other attempt executed.
/// - `complete` is idempotent for its token: repeated on a record this token completed, it
///   answers `Ok(true)` and changes nothing, so that a completion whose answer was lost (a
///   timeout, a broken connection) can be tried again (the engine does, while the lease holds).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use mcp_framing::dedupe::{DedupeStore, MemoryStore};
/// let store: Arc<dyn DedupeStore> = Arc::new(MemoryStore::new());
/// # let _ = store;
/// ```
pub trait DedupeStore: fmt::Debug + Send + Sync + 'static {
    /// Claims `key` for one attempt, or reports what holds it.
    #[doc(hidden)] // the claim protocol (see the trait docs)
    fn claim<'a>(
        &'a self,
        key: &'a StoreKey,
        request: &'a ClaimRequest,
    ) -> StoreFuture<'a, Result<ClaimOutcome, StoreError>>;

    /// Extends the lease of the claim held with `token` to `lease` from now.
    #[doc(hidden)] // the claim protocol (see the trait docs)
    fn renew<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        lease: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;

    /// Records the outcome of the claim held with `token`, kept for `retention` from now.
    #[doc(hidden)] // the claim protocol (see the trait docs)
    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        outcome: &'a Completed,
        retention: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;

    /// Deletes the claim held with `token` (nothing was executed).
    #[doc(hidden)] // the claim protocol (see the trait docs)
    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::{ClaimOutcome, Completed, FencingToken, StoredResponse};

    #[test]
    fn fencing_tokens_never_repeat_and_show_as_32_hex_digits() {
        let token = FencingToken::random();
        assert_ne!(token, FencingToken::random());
        assert_eq!(token.to_string().len(), 32);
    }

    #[test]
    fn a_stored_member_answers_under_the_retrys_id_without_being_parsed_again() {
        let stored = StoredResponse::Result(r#"{"content":[]}"#.into());
        assert_eq!(
            stored.to_response(&serde_json::json!(9)),
            r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]}}"#
        );
        assert_eq!((stored.len(), stored.is_empty(), stored.is_error()), (14, false, false));
        let error = StoredResponse::Error("{}".into());
        assert_eq!(&error.json()[..], b"{}");
        assert!(error.is_error());
        assert_eq!(
            error.to_response(&serde_json::json!("r-2")),
            r#"{"jsonrpc":"2.0","id":"r-2","error":{}}"#
        );
        assert_eq!(format!("{error:?}"), "Error(2 bytes)");
    }

    #[test]
    fn a_completion_not_stored_holds_no_bytes_of_response() {
        let done = Completed::Stored(StoredResponse::Result("{}".into()));
        assert_eq!(done.stored_bytes(), 2);
        assert_eq!(Completed::NotStored { size: 10_000_000 }.stored_bytes(), 0);
        assert_ne!(
            ClaimOutcome::Completed(done),
            ClaimOutcome::Claimed { generation: 1 }
        );
    }
}
