//! Telemetry: a `tracing` event per outcome and counters a user can read or export.
//!
//! [`FramingMetrics::record`] emits one event with target `mcp_framing` (`WARN` for every outcome
//! that is not clean, `DEBUG` for a clean one) with the structured fields `outcome`, `regime`,
//! `frames`, `bytes`, `messages`, `message_bytes`, `last_sequence`, `request_key`, `attempt_id`,
//! `endpoint`, `attempt` and `detail`, and bumps the outcome's counter. `request_key` is the key's
//! fingerprint ([`RequestKey::fingerprint`](crate::RequestKey::fingerprint)), never the key: with
//! deduplication a key can replay a stored result, and logs travel further than requests. Record every attempt,
//! the failed ones before retrying: a truncation then shows in dashboards even when the retry
//! succeeds. The crate installs no subscriber; any `tracing` subscriber receives the events.
//!
//! ```
//! use mcp_framing::{AttemptContext, FramingMetrics, Outcome, StreamDecoder};
//!
//! let metrics = FramingMetrics::new(); // or FramingMetrics::global()
//! let outcome = Outcome::from_eof(&StreamDecoder::new().decode_all(b"").map(|_| None));
//! metrics.record(&outcome, &AttemptContext::default().endpoint("https://mcp.example.com/mcp"));
//! let snapshot = metrics.snapshot();
//! assert_eq!((snapshot.abandoned, snapshot.clean), (1, 0));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::RequestKey;
use crate::outcome::{Outcome, Verdict};
use crate::retry::RetryDecision;

/// Who the outcome belongs to, for the telemetry event. The attempt id comes from the outcome's
/// stream head.
///
/// # Examples
///
/// ```
/// use mcp_framing::{AttemptContext, RequestKey};
/// let key = RequestKey::random();
/// let ctx = AttemptContext::default().request_key(key).endpoint("https://a.example/mcp").attempt(2);
/// assert_eq!(ctx.attempt, 2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptContext<'a> {
    /// The request key the request carried (else the one the stream head echoed is used).
    pub request_key: Option<RequestKey>,
    /// The endpoint the attempt was sent to, if known.
    pub endpoint: Option<&'a str>,
    /// Which attempt of the logical request this was (1 for the first).
    pub attempt: u32,
}

impl<'a> AttemptContext<'a> {
    /// Sets the request key.
    ///
    /// # Examples
    ///
    /// See [`AttemptContext`].
    #[must_use]
    pub fn request_key(mut self, key: RequestKey) -> Self {
        self.request_key = Some(key);
        self
    }

    /// Sets the endpoint.
    ///
    /// # Examples
    ///
    /// See [`AttemptContext`].
    #[must_use]
    pub fn endpoint(mut self, endpoint: &'a str) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    /// Sets the attempt number (1 for the first).
    ///
    /// # Examples
    ///
    /// See [`AttemptContext`].
    #[must_use]
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }
}

const OUTCOMES: usize = 8;

/// Counters of stream outcomes and retry decisions: atomics, cheap to bump from any thread.
///
/// Read them with [`snapshot`](Self::snapshot) and export the [`MetricsSnapshot`] (it is
/// `serde::Serialize`, and [`MetricsSnapshot::iter`] yields `(name, value)` pairs for a
/// Prometheus or OpenTelemetry exporter).
///
/// # Examples
///
/// ```
/// use mcp_framing::{AttemptContext, DiscoveryMode, FramingMetrics, Outcome, RetryPolicy, RequestTraits};
///
/// let metrics = FramingMetrics::new();
/// let outcome = Outcome::unframed_close(DiscoveryMode::Stateless, 512);
/// metrics.record(&outcome, &AttemptContext::default());
/// metrics.record_decision(&RetryPolicy::default().decide(&outcome, &RequestTraits::default()));
/// let s = metrics.snapshot();
/// assert_eq!((s.ambiguous, s.surfaced, s.incomplete_bytes), (1, 1, 512));
/// ```
#[derive(Debug, Default)]
pub struct FramingMetrics {
    outcomes: [AtomicU64; OUTCOMES],
    retried: AtomicU64,
    not_retried: AtomicU64,
    surfaced: AtomicU64,
    incomplete_bytes: AtomicU64,
}

static GLOBAL: FramingMetrics = FramingMetrics::new();

impl FramingMetrics {
    /// Counters at zero.
    ///
    /// # Examples
    ///
    /// See [`FramingMetrics`].
    #[must_use]
    pub const fn new() -> Self {
        Self {
            outcomes: [const { AtomicU64::new(0) }; OUTCOMES],
            retried: AtomicU64::new(0),
            not_retried: AtomicU64::new(0),
            surfaced: AtomicU64::new(0),
            incomplete_bytes: AtomicU64::new(0),
        }
    }

    /// The process-wide counters, for code that has no place to keep its own.
    ///
    /// # Examples
    ///
    /// ```
    /// let before = mcp_framing::FramingMetrics::global().snapshot();
    /// # let _ = before;
    /// ```
    #[must_use]
    pub fn global() -> &'static Self {
        &GLOBAL
    }

    /// Emits the outcome's `tracing` event and bumps its counter (and `incomplete_bytes` by the
    /// bytes received, for an outcome that is not clean).
    ///
    /// # Examples
    ///
    /// See [`FramingMetrics`].
    pub fn record(&self, outcome: &Outcome, ctx: &AttemptContext<'_>) {
        self.outcomes[slot(&outcome.verdict)].fetch_add(1, Ordering::Relaxed);
        if !outcome.is_clean() {
            self.incomplete_bytes
                .fetch_add(outcome.received.bytes, Ordering::Relaxed);
        }
        emit(outcome, ctx);
    }

    /// Counts a retry decision (`retried`, `not_retried` or `surfaced`).
    ///
    /// # Examples
    ///
    /// See [`FramingMetrics`].
    pub fn record_decision(&self, decision: &RetryDecision) {
        let counter = match decision {
            RetryDecision::Retry(_) => &self.retried,
            RetryDecision::DoNotRetry(_) => &self.not_retried,
            RetryDecision::SurfaceToCaller(_) => &self.surfaced,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values.
    ///
    /// # Examples
    ///
    /// See [`FramingMetrics`].
    #[must_use]
    pub fn snapshot(&self) -> MetricsSnapshot {
        let outcome = |i: usize| self.outcomes[i].load(Ordering::Relaxed);
        MetricsSnapshot {
            clean: outcome(0),
            abandoned: outcome(1),
            aborted: outcome(2),
            corrupt: outcome(3),
            spliced: outcome(4),
            cross_wired: outcome(5),
            contract_violation: outcome(6),
            ambiguous: outcome(7),
            retried: self.retried.load(Ordering::Relaxed),
            not_retried: self.not_retried.load(Ordering::Relaxed),
            surfaced: self.surfaced.load(Ordering::Relaxed),
            incomplete_bytes: self.incomplete_bytes.load(Ordering::Relaxed),
        }
    }
}

fn slot(verdict: &Verdict) -> usize {
    match verdict {
        Verdict::Clean => 0,
        Verdict::Abandoned { .. } => 1,
        Verdict::Aborted(_) => 2,
        Verdict::Corrupt(_) => 3,
        Verdict::Spliced(_) => 4,
        Verdict::CrossWired { .. } => 5,
        Verdict::ContractViolation(_) | Verdict::MappingViolation(_) => 6,
        Verdict::Ambiguous(_) => 7,
    }
}

fn emit(outcome: &Outcome, ctx: &AttemptContext<'_>) {
    let request_key = ctx
        .request_key
        .or_else(|| outcome.head.and_then(|head| head.request_key));
    let attempt_id = outcome.head.map(|head| head.attempt_id);
    macro_rules! event {
        ($level:expr, $message:literal) => {
            tracing::event!(
                target: "mcp_framing",
                $level,
                outcome = outcome.verdict.name(),
                regime = %outcome.regime,
                frames = outcome.received.frames,
                bytes = outcome.received.bytes,
                messages = outcome.received.messages,
                message_bytes = outcome.received.open_message_bytes,
                last_sequence = outcome.received.last_sequence,
                request_key = request_key.map(|key| tracing::field::display(key.fingerprint())),
                attempt_id = attempt_id.map(tracing::field::display),
                endpoint = ctx.endpoint,
                attempt = ctx.attempt,
                detail = %outcome.verdict,
                $message
            )
        };
    }
    if outcome.is_clean() {
        event!(tracing::Level::DEBUG, "framed stream complete");
    } else {
        event!(
            tracing::Level::WARN,
            "response stream did not complete cleanly"
        );
    }
}

/// The counters of a [`FramingMetrics`] at one moment.
///
/// # Examples
///
/// ```
/// use mcp_framing::FramingMetrics;
/// let snapshot = FramingMetrics::new().snapshot();
/// assert!(snapshot.iter().all(|(_, value)| value == 0));
/// assert_eq!(serde_json::to_value(snapshot).unwrap()["abandoned"], 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Streams that completed.
    pub clean: u64,
    /// Streams abandoned before their sentinel (truncated, transport failed).
    pub abandoned: u64,
    /// Streams the server aborted.
    pub aborted: u64,
    /// Streams with damaged bytes or broken framing rules.
    pub corrupt: u64,
    /// Streams with another attempt's frames spliced in.
    pub spliced: u64,
    /// Streams answering another request.
    pub cross_wired: u64,
    /// Streams breaking the negotiated contract (e.g. unframed where framing was promised).
    pub contract_violation: u64,
    /// Unframed closes in Regime C.
    pub ambiguous: u64,
    /// Retry decisions: retry.
    pub retried: u64,
    /// Retry decisions: do not retry.
    pub not_retried: u64,
    /// Retry decisions: surface to the caller.
    pub surfaced: u64,
    /// Bytes received by streams that did not complete.
    pub incomplete_bytes: u64,
}

impl MetricsSnapshot {
    /// `(name, value)` pairs, names as the field names (e.g. to export as
    /// `mcp_framing_streams_total{outcome="abandoned"}`).
    ///
    /// # Examples
    ///
    /// See [`MetricsSnapshot`].
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("clean", self.clean),
            ("abandoned", self.abandoned),
            ("aborted", self.aborted),
            ("corrupt", self.corrupt),
            ("spliced", self.spliced),
            ("cross_wired", self.cross_wired),
            ("contract_violation", self.contract_violation),
            ("ambiguous", self.ambiguous),
            ("retried", self.retried),
            ("not_retried", self.not_retried),
            ("surfaced", self.surfaced),
            ("incomplete_bytes", self.incomplete_bytes),
        ]
        .into_iter()
    }
}
