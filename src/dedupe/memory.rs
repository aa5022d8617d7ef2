//! The embedded store: one process, bounded in records and bytes (SPEC.md §17.12).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::fingerprint::Fingerprint;
use super::scope::StoreKey;
use super::store::{
    ClaimOutcome, ClaimRequest, Completed, DedupeStore, FencingToken, LeaseExpiry, StoreError,
    StoreFuture,
};
use super::telemetry;

/// Default bound on records: 100,000 (at the default 24 h window, about 1.2 keyed calls a
/// second kept for the whole window).
pub(crate) const DEFAULT_MAX_ENTRIES: usize = 100_000;

/// Default bound on bytes: 256 MiB of records (stored results and per-record overhead).
pub(crate) const DEFAULT_MAX_BYTES: usize = 256 * 1024 * 1024;

/// Bytes a record costs besides its stored result: the key and fingerprint digests, the state,
/// two index entries and the map slot, rounded up. Counting it keeps the byte bound honest for
/// stores full of small results.
pub(crate) const RECORD_OVERHEAD: usize = 192;

/// An in-process [`DedupeStore`]: the embedded default, for one instance, tests and demos.
///
/// Bounded in records ([`max_entries`](Self::max_entries)) and bytes
/// ([`max_bytes`](Self::max_bytes)); records expire after their retention. When a new claim
/// or a stored result needs room, it is made in this order:
///
/// 1. records past their retention (expired: nothing is lost);
/// 2. claims whose lease expired (their holder stopped without completing: the same as an
///    expired lease, except that under [`LeaseExpiry::Refuse`] the "outcome unknown" answer is
///    lost and a later attempt executes);
/// 3. completed records, the one closest to its expiry first. **An evicted completed record
///    ends exactly-once for its key**: a retry after the eviction executes again. The
///    `mcp_framing.dedupe.evictions` metric counts them; size the bounds for the window times
///    the rate of keyed calls.
///
/// A claim in flight (live lease) is never evicted: with nothing else to evict, a claim is
/// refused with [`StoreError::Full`] (fail closed), and a result that finds no room is recorded
/// as "completed, not stored", so a retry still never executes a second time.
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
///
/// let store = MemoryStore::new().max_entries(10_000).max_bytes(64 << 20);
/// let dedup = Deduplicator::new(store);
/// # let _ = dedup;
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    max_entries: usize,
    max_bytes: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    records: HashMap<StoreKey, Record>,
    /// Completed and abandoned records, by expiry.
    done: BTreeSet<(Instant, u64, StoreKey)>,
    /// Claims in flight, by lease deadline.
    leases: BTreeSet<(Instant, u64, StoreKey)>,
    bytes: usize,
    seq: u64,
    expired: u64,
    evicted: u64,
}

#[derive(Debug)]
struct Record {
    fingerprint: Fingerprint,
    expires: Instant,
    /// Tie-breaker in the indexes (insertion order).
    seq: u64,
    state: RecordState,
    /// The token that completed the record (a repeated completion with it is answered `true`).
    completed_by: Option<FencingToken>,
}

#[derive(Debug)]
enum RecordState {
    InFlight {
        token: FencingToken,
        generation: u64,
        lease_until: Instant,
    },
    Completed(Completed),
    Abandoned,
}

impl Record {
    fn bytes(&self) -> usize {
        RECORD_OVERHEAD
            + match &self.state {
                RecordState::Completed(done) => done.stored_bytes(),
                _ => 0,
            }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store with `DEFAULT_MAX_ENTRIES` and `DEFAULT_MAX_BYTES`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// // One instance's store: retries that come back to this instance are replayed.
    /// let dedup = Deduplicator::new(MemoryStore::new());
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(attempt(&mut service, key, "t").await, "execute");
    /// assert_eq!(attempt(&mut service, key, "t").await, "replay");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
            state: Mutex::default(),
        }
    }

    /// Sets the bound on records (default `DEFAULT_MAX_ENTRIES`; at least 1).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let dedup = Deduplicator::new(MemoryStore::new().max_entries(1));
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
    /// let (a, b) = (RequestKey::random(), RequestKey::random());
    /// assert_eq!(attempt(&mut service, a, "t").await, "execute");
    /// assert_eq!(attempt(&mut service, b, "t").await, "execute"); // made room by evicting `a`'s record
    /// assert_eq!(attempt(&mut service, b, "t").await, "replay");
    /// // The evicted record ended exactly-once for its key: `a`'s retry executes again.
    /// assert_eq!(attempt(&mut service, a, "t").await, "execute");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn max_entries(mut self, max: usize) -> Self {
        self.max_entries = max.max(1);
        self
    }

    /// Sets the bound on bytes, stored results plus `RECORD_OVERHEAD` per record (default
    /// `DEFAULT_MAX_BYTES`). Set the deduplicator's
    /// [`max_result_bytes`](super::Deduplicator::max_result_bytes) well below it.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// // Room for two results of 400 KiB, not three.
    /// let dedup = Deduplicator::new(MemoryStore::new().max_bytes(1 << 20));
    /// let report = format!(r#""{}""#, "x".repeat(400 << 10));
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new(&report));
    /// let keys = [RequestKey::random(), RequestKey::random(), RequestKey::random()];
    /// for key in keys {
    ///     assert_eq!(attempt(&mut service, key, "render_report").await, "execute");
    /// }
    /// assert_eq!(attempt(&mut service, keys[2], "render_report").await, "replay");
    /// // The third made room by evicting the oldest record: its retry executes again.
    /// assert_eq!(attempt(&mut service, keys[0], "render_report").await, "execute");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn max_bytes(mut self, max: usize) -> Self {
        self.max_bytes = max.max(RECORD_OVERHEAD);
        self
    }

    /// Records held now.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::dedupe::MemoryStore::new().len(), 0);
    /// ```
    // Hidden: occupancy, for the tests; the store bounds itself (`max_entries`, `max_bytes`).
    #[doc(hidden)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// Whether the store holds no record.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(mcp_framing::dedupe::MemoryStore::new().is_empty());
    /// ```
    // Hidden: occupancy for the tests; evictions are the `mcp_framing.dedupe.evictions` metric.
    #[doc(hidden)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lock().records.is_empty()
    }

    /// Bytes held now (stored results plus `RECORD_OVERHEAD` per record).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::dedupe::MemoryStore::new().bytes(), 0);
    /// ```
    // Hidden: occupancy, for the tests; the store bounds itself (`max_entries`, `max_bytes`).
    #[doc(hidden)]
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Records removed because their retention passed.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::dedupe::MemoryStore::new().expired(), 0);
    /// ```
    // Hidden: for the tests; a record that expired is its retention passing, nothing to act on.
    #[doc(hidden)]
    #[must_use]
    pub fn expired(&self) -> u64 {
        self.lock().expired
    }

    /// Records evicted before their retention passed to make room (completed records and
    /// expired claims): each is a key whose retry would execute again.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::dedupe::MemoryStore::new().evicted(), 0);
    /// ```
    // Hidden: for the tests; operators read the `mcp_framing.dedupe.evictions` metric.
    #[doc(hidden)]
    #[must_use]
    pub fn evicted(&self) -> u64 {
        self.lock().evicted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a record half written (every mutation
        // below completes or does not start), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn claim_now(
        &self,
        key: &StoreKey,
        request: &ClaimRequest,
    ) -> Result<ClaimOutcome, StoreError> {
        let now = Instant::now();
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.records.get(key).is_some_and(|r| r.expires <= now) {
            state.remove(key);
            state.expired += 1;
        }
        let Some(record) = state.records.get_mut(key) else {
            state.make_room(RECORD_OVERHEAD, true, now, self.max_entries, self.max_bytes)?;
            let seq = state.next_seq();
            let lease_until = now + request.lease;
            state.records.insert(
                *key,
                Record {
                    fingerprint: request.fingerprint,
                    expires: now + request.retention,
                    seq,
                    state: RecordState::InFlight {
                        token: request.token,
                        generation: 1,
                        lease_until,
                    },
                    completed_by: None,
                },
            );
            state.leases.insert((lease_until, seq, *key));
            state.bytes += RECORD_OVERHEAD;
            return Ok(ClaimOutcome::Claimed { generation: 1 });
        };
        if record.fingerprint != request.fingerprint {
            return Ok(ClaimOutcome::Conflict {
                stored: record.fingerprint,
            });
        }
        let seq = record.seq;
        match &mut record.state {
            RecordState::Completed(done) => Ok(ClaimOutcome::Completed(done.clone())),
            RecordState::Abandoned => Ok(ClaimOutcome::Abandoned),
            RecordState::InFlight { lease_until, .. } if *lease_until > now => {
                Ok(ClaimOutcome::InFlight {
                    lease_remaining: *lease_until - now,
                })
            }
            RecordState::InFlight {
                token,
                generation,
                lease_until,
            } => {
                let old = (*lease_until, seq, *key);
                match request.on_expired_lease {
                    LeaseExpiry::Reexecute => {
                        *token = request.token;
                        *generation += 1;
                        *lease_until = now + request.lease;
                        let (new, generation) = ((*lease_until, seq, *key), *generation);
                        record.expires = now + request.retention;
                        state.leases.remove(&old);
                        state.leases.insert(new);
                        Ok(ClaimOutcome::Claimed { generation })
                    }
                    _ => {
                        record.state = RecordState::Abandoned;
                        let expires = record.expires;
                        state.leases.remove(&old);
                        state.done.insert((expires, seq, *key));
                        Ok(ClaimOutcome::Abandoned)
                    }
                }
            }
        }
    }

    fn renew_now(&self, key: &StoreKey, token: FencingToken, lease: Duration) -> bool {
        let now = Instant::now();
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(record) = state.records.get_mut(key) else {
            return false;
        };
        let seq = record.seq;
        match &mut record.state {
            RecordState::InFlight {
                token: held,
                lease_until,
                ..
            } if *held == token => {
                let old = (*lease_until, seq, *key);
                *lease_until = now + lease;
                let new = (*lease_until, seq, *key);
                state.leases.remove(&old);
                state.leases.insert(new);
                true
            }
            _ => false,
        }
    }

    fn complete_now(
        &self,
        key: &StoreKey,
        token: FencingToken,
        outcome: &Completed,
        retention: Duration,
    ) -> bool {
        let now = Instant::now();
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(record) = state.records.get(key) else {
            return false;
        };
        let (seq, lease_until) = match record.state {
            RecordState::InFlight {
                token: held,
                lease_until,
                ..
            } if held == token => (record.seq, lease_until),
            // Completed with this token already: a repeated completion (its answer was lost).
            RecordState::Completed(_) => return record.completed_by == Some(token),
            _ => return false,
        };
        // Take the claim out of the indexes while room is made, so that it cannot evict itself.
        state.leases.remove(&(lease_until, seq, *key));
        let extra = outcome.stored_bytes();
        let outcome = if state
            .make_room(extra, false, now, self.max_entries, self.max_bytes)
            .is_ok()
        {
            outcome.clone()
        } else {
            // No room for the result: the call still completed, and a retry must not run it again.
            Completed::NotStored { size: extra as u64 }
        };
        state.bytes += outcome.stored_bytes();
        let expires = now + retention;
        let record = state
            .records
            .get_mut(key)
            .expect("the claim is still there");
        record.state = RecordState::Completed(outcome);
        record.completed_by = Some(token);
        record.expires = expires;
        state.done.insert((expires, seq, *key));
        true
    }

    fn release_now(&self, key: &StoreKey, token: FencingToken) -> bool {
        let mut state = self.lock();
        let held = state.records.get(key).is_some_and(
            |r| matches!(r.state, RecordState::InFlight { token: held, .. } if held == token),
        );
        if held {
            state.remove(key);
        }
        held
    }
}

impl State {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn remove(&mut self, key: &StoreKey) {
        if let Some(record) = self.records.remove(key) {
            self.bytes -= record.bytes();
            match record.state {
                RecordState::InFlight { lease_until, .. } => {
                    self.leases.remove(&(lease_until, record.seq, *key));
                }
                _ => {
                    self.done.remove(&(record.expires, record.seq, *key));
                }
            }
        }
    }

    /// Makes room for `bytes` more (and one more record if `new_record`), in the order of the
    /// type's docs; never evicts a live claim.
    fn make_room(
        &mut self,
        bytes: usize,
        new_record: bool,
        now: Instant,
        max_entries: usize,
        max_bytes: usize,
    ) -> Result<(), StoreError> {
        if bytes + RECORD_OVERHEAD > max_bytes && !new_record {
            // Larger than the whole store: no eviction can help.
            return Err(StoreError::Full {
                entries: self.records.len(),
                bytes: self.bytes,
            });
        }
        loop {
            let entries = self.records.len() + usize::from(new_record);
            if entries <= max_entries && self.bytes + bytes <= max_bytes {
                return Ok(());
            }
            let victim = match (self.done.first(), self.leases.first()) {
                (Some(&(expires, _, key)), _) if expires <= now => {
                    self.expired += 1;
                    key
                }
                (_, Some(&(lease_until, _, key))) if lease_until <= now => {
                    self.evicted += 1;
                    telemetry::evicted("expired_claim");
                    key
                }
                (Some(&(_, _, key)), _) => {
                    self.evicted += 1;
                    telemetry::evicted("completed");
                    key
                }
                (None, _) => {
                    return Err(StoreError::Full {
                        entries: self.records.len(),
                        bytes: self.bytes,
                    });
                }
            };
            self.remove(&victim);
        }
    }
}

impl DedupeStore for MemoryStore {
    fn claim<'a>(
        &'a self,
        key: &'a StoreKey,
        request: &'a ClaimRequest,
    ) -> StoreFuture<'a, Result<ClaimOutcome, StoreError>> {
        Box::pin(std::future::ready(self.claim_now(key, request)))
    }

    fn renew<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        lease: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::ready(Ok(self.renew_now(key, token, lease))))
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        outcome: &'a Completed,
        retention: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::ready(Ok(
            self.complete_now(key, token, outcome, retention)
        )))
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::ready(Ok(self.release_now(key, token))))
    }
}

#[cfg(test)]
mod tests;
