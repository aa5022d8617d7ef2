//! What a client may conclude when a response stream closes (SPEC.md §9, §11.4).
//!
//! Two layers:
//!
//! - [`classify`] is the regime decision table over four observations ([`Observations`]): it says
//!   *clean*, *abandoned*, or refuses to guess with [`StreamCompletionAmbiguousError`];
//! - [`Outcome`] is what a real stream ended as, built from the decoder's own end-of-stream result
//!   ([`Outcome::from_decoder`], [`Outcome::from_eof`]), so a user never assembles the four
//!   observations by hand. The clean and truncated cases go through [`classify`]; decoding errors
//!   become their own non-clean verdicts ([`Verdict`]).
//!
//! ```
//! use bytes::BytesMut;
//! use mcp_framing::{Outcome, StreamDecoder, StreamEncoder, StreamHead, Verdict};
//!
//! let mut enc = StreamEncoder::new(StreamHead::for_request(None));
//! let mut wire = BytesMut::new();
//! enc.message(b"{}", &mut wire)?; // the body closes here, before the sentinel
//!
//! let mut decoder = StreamDecoder::new();
//! let last = loop {
//!     match decoder.decode_eof(&mut wire) {
//!         Ok(Some(_event)) => continue, // use the events
//!         end => break end,
//!     }
//! };
//! let outcome = Outcome::from_decoder(&decoder, &last);
//! assert!(matches!(outcome.verdict, Verdict::Abandoned { .. }));
//! assert_eq!(outcome.received.messages, 1); // the verified message is still usable
//! # Ok::<(), mcp_framing::EncodeError>(())
//! ```

use std::fmt;

use crate::decoder::StreamDecoder;
use crate::error::{DecodeError, Progress, Truncation};
use crate::event::{Abort, Event, StreamHead};
use crate::ids::RequestKey;

/// The four observations a closed stream is classified from (SPEC.md §11.4).
///
/// # Examples
///
/// ```
/// use mcp_framing::{classify, Completion, Observations, Regime};
///
/// let obs = Observations { sentinel_seen: true, ..Observations::default() };
/// assert_eq!(classify(&obs), Ok(Completion::Clean(Regime::A)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Observations {
    /// A terminal sentinel (STREAM_END) was received.
    pub sentinel_seen: bool,
    /// The payload is self-delimiting: lengths and checksums say where it ends (a framed stream).
    pub self_delimiting: bool,
    /// The payload's integrity check passed. For a framed stream: every frame and message
    /// checked out *and* the stream-level check (STREAM_END's message count) passed, so a stream
    /// cut between two verified messages does not pass.
    pub integrity_ok: bool,
    /// Discovery is sticky (retries reach the instance that served the earlier attempt), rather
    /// than re-resolved per request.
    pub sticky_discovery: bool,
}

/// Which rule decided a stream's completion (SPEC.md §9).
///
/// # Examples
///
/// ```
/// use mcp_framing::Regime;
/// assert_eq!(Regime::B.to_string(), "B");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Regime {
    /// A terminal sentinel decided: it was seen.
    A,
    /// The self-delimiting payload decided: lengths and checksums.
    B,
    /// Nothing could decide: a clean end and an abandoned one look the same.
    C,
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
        })
    }
}

/// What [`classify`] concluded when it could conclude something.
///
/// # Examples
///
/// ```
/// use mcp_framing::{Completion, Regime};
/// assert!(Completion::Clean(Regime::A).is_clean());
/// assert_eq!(Completion::Abandoned(Regime::B).regime(), Regime::B);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Completion {
    /// The stream is complete.
    Clean(Regime),
    /// The stream was abandoned before it completed.
    Abandoned(Regime),
}

impl Completion {
    /// Whether the stream is complete.
    ///
    /// # Examples
    ///
    /// See [`Completion`].
    #[must_use]
    pub fn is_clean(self) -> bool {
        matches!(self, Self::Clean(_))
    }

    /// The regime whose rule decided.
    ///
    /// # Examples
    ///
    /// See [`Completion`].
    #[must_use]
    pub fn regime(self) -> Regime {
        match self {
            Self::Clean(regime) | Self::Abandoned(regime) => regime,
        }
    }
}

/// How the client resolves the server it sends a request to.
///
/// # Examples
///
/// ```
/// use mcp_framing::DiscoveryMode;
/// assert_eq!(DiscoveryMode::Stateless.to_string(), "stateless per-request discovery");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiscoveryMode {
    /// Resolved once and pinned (e.g. a 2025-* session): a retry reaches the same instance.
    Sticky,
    /// Re-resolved per request (e.g. 2026-07-28 `server/discover` behind an autoscaler): a retry
    /// may reach another instance.
    Stateless,
}

impl fmt::Display for DiscoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sticky => "sticky discovery",
            Self::Stateless => "stateless per-request discovery",
        })
    }
}

/// A stream closed in Regime C: nothing can tell a clean end from an abandoned one.
///
/// A distinct type, **not retryable by default** ([`is_retryable`](Self::is_retryable) is
/// `false`), and deliberately not convertible into `std::io::Error` or any transient network
/// error. Its message names the ambiguity and which discovery case it was.
///
/// # Examples
///
/// ```
/// use mcp_framing::{classify, DiscoveryMode, Observations};
///
/// let err = classify(&Observations::default()).unwrap_err();
/// assert_eq!(err.discovery, DiscoveryMode::Stateless);
/// assert!(!err.is_retryable());
/// assert!(err.to_string().starts_with("stream completion is ambiguous"));
/// assert!(err.to_string().contains("stateless per-request discovery"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error(
    "stream completion is ambiguous: no terminal sentinel was mandated and the payload is not \
     self-delimiting, so a clean end and an abandoned stream are indistinguishable; {}",
    ambiguity_case(*discovery)
)]
#[non_exhaustive]
pub struct StreamCompletionAmbiguousError {
    /// Which discovery case it was.
    pub discovery: DiscoveryMode,
}

fn ambiguity_case(discovery: DiscoveryMode) -> &'static str {
    match discovery {
        DiscoveryMode::Sticky => {
            "with sticky discovery the earlier instance might be probed, but the stream contract \
             does not guarantee resumability, so the outcome is not guessed"
        }
        DiscoveryMode::Stateless => {
            "with stateless per-request discovery a retry may reach another instance and would \
             hide whether this attempt completed, so the outcome is not guessed"
        }
    }
}

impl StreamCompletionAmbiguousError {
    /// The error for a close under the given discovery mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DiscoveryMode, StreamCompletionAmbiguousError};
    /// let err = StreamCompletionAmbiguousError::new(DiscoveryMode::Sticky);
    /// assert!(err.to_string().contains("sticky discovery"));
    /// ```
    #[must_use]
    pub fn new(discovery: DiscoveryMode) -> Self {
        Self { discovery }
    }

    /// Always `false`: an ambiguous close is never retried by default (see `retry`).
    ///
    /// # Examples
    ///
    /// See [`StreamCompletionAmbiguousError`].
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The regime decision table (SPEC.md §11.4), exactly:
///
/// | sentinel seen | self-delimiting | integrity ok | sticky | result |
/// |---|---|---|---|---|
/// | yes | any | any | any | `Clean(A)`: the sentinel is authoritative |
/// | no | yes | yes | any | `Clean(B)` |
/// | no | yes | no | any | `Abandoned(B)` |
/// | no | no | any | any | `Err(StreamCompletionAmbiguousError)`, naming sticky or stateless |
///
/// In Regime C the error is raised whether or not discovery is sticky: a sticky resolver might
/// let one probe the earlier attempt, but the stream contract does not guarantee resumability.
///
/// # Errors
///
/// [`StreamCompletionAmbiguousError`] when neither a sentinel nor a self-delimiting payload can
/// decide (Regime C).
///
/// # Examples
///
/// ```
/// use mcp_framing::{classify, Completion, DiscoveryMode, Observations, Regime};
///
/// let cut = Observations { self_delimiting: true, ..Observations::default() };
/// assert_eq!(classify(&cut), Ok(Completion::Abandoned(Regime::B)));
///
/// let unframed = Observations { sticky_discovery: true, integrity_ok: true, ..Observations::default() };
/// assert_eq!(classify(&unframed).unwrap_err().discovery, DiscoveryMode::Sticky);
/// ```
pub fn classify(obs: &Observations) -> Result<Completion, StreamCompletionAmbiguousError> {
    if obs.sentinel_seen {
        Ok(Completion::Clean(Regime::A))
    } else if obs.self_delimiting {
        Ok(if obs.integrity_ok {
            Completion::Clean(Regime::B)
        } else {
            Completion::Abandoned(Regime::B)
        })
    } else {
        Err(StreamCompletionAmbiguousError::new(
            if obs.sticky_discovery {
                DiscoveryMode::Sticky
            } else {
                DiscoveryMode::Stateless
            },
        ))
    }
}

/// How a response stream ended, with what was received and who sent it.
///
/// Build it from the decoder's final result with [`Outcome::from_decoder`] (or
/// [`Outcome::from_eof`] when the decoder is gone), or, for an unframed body closed under an
/// accept-ambiguity policy, with [`Outcome::unframed_close`], or, for a response that broke the
/// contract at the HTTP mapping level, with [`Outcome::mapping_violation`].
///
/// # Examples
///
/// ```
/// use mcp_framing::{Outcome, StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"{}", &mut wire)?;
/// enc.end(&mut wire)?;
///
/// let mut decoder = StreamDecoder::new();
/// let last = loop {
///     match decoder.decode_eof(&mut wire) {
///         Ok(Some(_)) => continue,
///         end => break end,
///     }
/// };
/// let outcome = Outcome::from_decoder(&decoder, &last);
/// assert!(outcome.is_clean());
/// assert_eq!((outcome.received.frames, outcome.received.messages), (4, 1));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// The verdict.
    pub verdict: Verdict,
    /// The regime whose rule decided (A: the sentinel, B: the framing's checks, C: nothing).
    pub regime: Regime,
    /// What had been received: frames, bytes, last sequence number, verified messages and the
    /// bytes of a message left open.
    pub received: Progress,
    /// The stream head (request key echo and the server's attempt id), if it arrived.
    pub head: Option<StreamHead>,
}

/// The verdict on a closed stream. Only [`Verdict::Clean`] means the response is complete.
///
/// # Examples
///
/// ```
/// use mcp_framing::{DecodeError, Outcome, Verdict};
///
/// let outcome = Outcome::from_eof(&Err(DecodeError::BadMagic { found: *b"{\"", offset: 0 }));
/// assert!(matches!(outcome.verdict, Verdict::ContractViolation(_)));
/// assert_eq!(outcome.verdict.name(), "contract_violation");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The sentinel arrived after verified messages: the response is complete.
    Clean,
    /// The stream stopped before its sentinel (a truncation, a transport error, or the reader
    /// stopped early). Messages verified before that are still valid.
    Abandoned {
        /// Where the stream stopped, when the decoder saw the end of input; `None` when the
        /// transport failed or reading stopped before the end.
        at: Option<Truncation>,
    },
    /// The server sent ABORT: it gave up deliberately.
    Aborted(Abort),
    /// The bytes were damaged or the framing rules broken (checksums, lengths, digests, dropped,
    /// duplicated or unexpected frames, bytes after the end).
    Corrupt(DecodeError),
    /// A frame of another attempt's stream was spliced in (`ForeignFrame`).
    Spliced(DecodeError),
    /// The stream answers another request: its head echoed another request key, or none.
    CrossWired {
        /// The key this request carried.
        expected: RequestKey,
        /// The key the stream head echoed (`None`: it carried none).
        found: Option<RequestKey>,
    },
    /// The server broke the negotiated contract: unframed bytes where framing was promised
    /// (`BadMagic` at offset 0), a version not negotiated, or a frame or message over the
    /// negotiated limits.
    ContractViolation(DecodeError),
    /// Regime C: completion cannot be decided.
    Ambiguous(StreamCompletionAmbiguousError),
    /// The server broke the negotiated contract at the HTTP mapping level, outside the frames
    /// (SPEC.md §15, §16): the response is not in a framed mapping, or its SSE mapping is broken
    /// (an unframed event, invalid base64, an oversized line or event). A contract violation like
    /// [`Verdict::ContractViolation`]: the same [`name`](Self::name) (`contract_violation`) and
    /// the same retry decision (not retried).
    ///
    /// ```
    /// use mcp_framing::{MappingViolation, Outcome, Verdict};
    /// let outcome = Outcome::mapping_violation(MappingViolation::NotFramed {
    ///     content_type: Some("application/json".into()),
    /// });
    /// assert!(matches!(outcome.verdict, Verdict::MappingViolation(MappingViolation::NotFramed { .. })));
    /// assert_eq!(outcome.verdict.name(), "contract_violation");
    /// ```
    MappingViolation(MappingViolation),
}

/// How a response broke the framing contract at the HTTP mapping level, outside the frames
/// (SPEC.md §15, §16): the cause of a [`Verdict::MappingViolation`].
///
/// # Examples
///
/// ```
/// use mcp_framing::MappingViolation;
/// let cause = MappingViolation::NotFramed { content_type: Some("application/json".into()) };
/// assert_eq!(cause.to_string(), "response is not framed (content-type Some(\"application/json\"))");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingViolation {
    /// Framing was requested but the response is in neither mapping's content type (a backend
    /// that ignored the opt-in answered `application/json` or plain SSE).
    #[error("response is not framed (content-type {content_type:?})")]
    NotFramed {
        /// The response's content type.
        content_type: Option<String>,
    },
    /// The SSE mapping is broken: an event other than `mcp-frame` carried data, an event's
    /// base64 is invalid, or a line or event passed the size limit (SPEC.md §15).
    #[cfg(feature = "sse")]
    #[error("SSE mapping: {0}")]
    Sse(crate::sse::SseError),
    /// The compatible SSE mapping is broken: a framing record is invalid, a message event is
    /// not announced by a record (the comments were stripped), an event is missing or has
    /// another length than its DATA frames, or an event of another type carried data
    /// (SPEC.md §18.5).
    #[cfg(feature = "sse")]
    #[error("compatible SSE mapping: {0}")]
    Compat(crate::sse_compat::CompatError),
}

impl Verdict {
    /// A stable snake_case name, used as the `outcome` field of telemetry events and in
    /// metrics: `clean`, `abandoned`, `aborted`, `corrupt`, `spliced`, `cross_wired`,
    /// `contract_violation` (also for [`Verdict::MappingViolation`]), `ambiguous`.
    ///
    /// # Examples
    ///
    /// See [`Verdict`].
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Abandoned { .. } => "abandoned",
            Self::Aborted(_) => "aborted",
            Self::Corrupt(_) => "corrupt",
            Self::Spliced(_) => "spliced",
            Self::CrossWired { .. } => "cross_wired",
            Self::ContractViolation(_) | Self::MappingViolation(_) => "contract_violation",
            Self::Ambiguous(_) => "ambiguous",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Clean => f.write_str("complete"),
            Self::Abandoned { at: Some(at) } => write!(f, "abandoned: truncated {at}"),
            Self::Abandoned { at: None } => f.write_str("abandoned before the sentinel"),
            Self::Aborted(abort) => write!(f, "aborted by the server: {abort}"),
            Self::Corrupt(err) => write!(f, "corrupt: {err}"),
            Self::Spliced(err) => write!(f, "spliced: {err}"),
            Self::CrossWired { .. } => {
                f.write_str("cross-wired: the response is for another request")
            }
            Self::ContractViolation(err) => write!(f, "framing contract violated: {err}"),
            Self::MappingViolation(cause) => write!(f, "framing contract violated: {cause}"),
            Self::Ambiguous(err) => err.fmt(f),
        }
    }
}

impl Outcome {
    /// Classifies the final result of [`StreamDecoder::decode_eof`] (or of [`decode`] when it
    /// failed), using the decoder's progress and head for what was received.
    ///
    /// | final result | verdict |
    /// |---|---|
    /// | `Ok(None)`, `Ok(Some(Event::End(_)))` | `Clean` (through [`classify`]: sentinel seen) |
    /// | `Err(Truncated)` | `Abandoned { at }` (through [`classify`]: framed, integrity not ok) |
    /// | `Ok(Some(Event::Aborted(_)))`, `Err(PeerAbort)` | `Aborted` |
    /// | `Err(RequestKeyMismatch)` | `CrossWired` |
    /// | `Err(ForeignFrame)` | `Spliced` |
    /// | `Err(BadMagic)` or `Err(UnsupportedVersion)` at offset 0, `Err(FrameTooLarge)`, `Err(MessageTooLarge)` | `ContractViolation` |
    /// | any other `Err` | `Corrupt` |
    /// | `Ok(Some(_))` another event: the caller stopped reading | `Abandoned { at: None }` |
    ///
    /// [`decode`]: StreamDecoder::decode
    ///
    /// # Examples
    ///
    /// See [`Outcome`].
    #[must_use]
    pub fn from_decoder(
        decoder: &StreamDecoder,
        last: &Result<Option<Event>, DecodeError>,
    ) -> Self {
        let mut outcome = Self::from_eof(last);
        if !matches!(last, Err(DecodeError::Truncated { .. })) {
            outcome.received = decoder.progress();
        }
        outcome.head = decoder.head();
        outcome
    }

    /// Like [`from_decoder`](Self::from_decoder) when only the final result is at hand: the
    /// received counts come from a `Truncated` error's progress, and are zero otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Outcome, StreamDecoder, StreamEncoder, StreamHead, Verdict};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"{\"partial", &mut wire)?;
    /// let outcome = Outcome::from_eof(&StreamDecoder::new().decode_all(&wire).map(|_| None));
    /// assert!(matches!(outcome.verdict, Verdict::Abandoned { at: Some(_) }));
    /// assert_eq!(outcome.received.open_message_bytes, 9);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn from_eof(last: &Result<Option<Event>, DecodeError>) -> Self {
        // The framed cases go through the decision table: the payload is self-delimiting, the
        // sentinel was seen or not, and without it the stream-level integrity check (STREAM_END's
        // message count) did not pass.
        let framed = |sentinel_seen: bool, at: Option<Truncation>| {
            let obs = Observations {
                sentinel_seen,
                self_delimiting: true,
                integrity_ok: sentinel_seen,
                sticky_discovery: false,
            };
            match classify(&obs) {
                Ok(Completion::Clean(regime)) => (Verdict::Clean, regime),
                Ok(Completion::Abandoned(regime)) => (Verdict::Abandoned { at }, regime),
                // Unreachable for a self-delimiting payload; fail closed anyway.
                Err(err) => (Verdict::Ambiguous(err), Regime::C),
            }
        };
        let ((verdict, regime), received) = match last {
            Ok(None) => (framed(true, None), Progress::default()),
            Ok(Some(Event::End(summary))) => (
                framed(true, None),
                Progress {
                    frames: summary.frames,
                    bytes: summary.bytes,
                    messages: summary.messages,
                    ..Progress::default()
                },
            ),
            Ok(Some(Event::Aborted(abort))) | Err(DecodeError::PeerAbort(abort)) => (
                (Verdict::Aborted(abort.clone()), Regime::A),
                Progress::default(),
            ),
            Ok(Some(_)) => (framed(false, None), Progress::default()),
            Err(DecodeError::Truncated { at, progress }) => (framed(false, Some(*at)), *progress),
            Err(err) => ((error_verdict(err), Regime::B), Progress::default()),
        };
        Self {
            verdict,
            regime,
            received,
            head: None,
        }
    }

    /// The outcome of a stream whose transport failed (an I/O error) before the end of input:
    /// abandoned, with what the decoder had received.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Outcome, StreamDecoder, Verdict};
    /// let outcome = Outcome::transport_failed(&StreamDecoder::new());
    /// assert_eq!(outcome.verdict, Verdict::Abandoned { at: None });
    /// ```
    #[must_use]
    pub fn transport_failed(decoder: &StreamDecoder) -> Self {
        let mut outcome = Self::from_eof(&Ok(Some(Event::KeepAlive)));
        outcome.received = decoder.progress();
        outcome.head = decoder.head();
        outcome
    }

    /// The outcome of an **unframed** response body that closed: Regime C, always
    /// [`Verdict::Ambiguous`] (through [`classify`]), whatever the transport said. This is what
    /// every close raises under an accept-ambiguity policy
    /// ([`ClientPolicy::unframed_close`](crate::ClientPolicy::unframed_close)).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DiscoveryMode, Outcome, Verdict};
    /// let outcome = Outcome::unframed_close(DiscoveryMode::Stateless, 1234);
    /// assert!(matches!(outcome.verdict, Verdict::Ambiguous(_)));
    /// assert_eq!(outcome.received.bytes, 1234);
    /// ```
    #[must_use]
    pub fn unframed_close(discovery: DiscoveryMode, bytes_received: u64) -> Self {
        let obs = Observations {
            sentinel_seen: false,
            self_delimiting: false,
            integrity_ok: false,
            sticky_discovery: discovery == DiscoveryMode::Sticky,
        };
        let verdict = match classify(&obs) {
            Err(err) => Verdict::Ambiguous(err),
            // Unreachable by the table (no sentinel, not self-delimiting); fail closed anyway.
            Ok(_) => Verdict::Ambiguous(StreamCompletionAmbiguousError::new(discovery)),
        };
        Self {
            verdict,
            regime: Regime::C,
            received: Progress {
                bytes: bytes_received,
                ..Progress::default()
            },
            head: None,
        }
    }

    /// The outcome of a response that broke the framing contract at the HTTP mapping level
    /// (SPEC.md §15, §16): [`Verdict::MappingViolation`], decided by the framing's own rules
    /// (Regime B), with nothing received. Set [`received`](Self::received) and
    /// [`head`](Self::head) from the decoder when frames came before the violation (as
    /// [`VerifiedResponse`](crate::http::VerifiedResponse) does).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{MappingViolation, Outcome, Regime, RequestTraits, RetryDecision, RetryPolicy, RetryReason};
    /// let outcome = Outcome::mapping_violation(MappingViolation::NotFramed { content_type: None });
    /// assert!(!outcome.is_clean());
    /// assert_eq!(outcome.regime, Regime::B);
    /// assert_eq!(
    ///     RetryPolicy::default().decide(&outcome, &RequestTraits::idempotent()),
    ///     RetryDecision::DoNotRetry(RetryReason::ContractViolation),
    /// );
    /// ```
    #[must_use]
    pub fn mapping_violation(cause: MappingViolation) -> Self {
        Self {
            verdict: Verdict::MappingViolation(cause),
            regime: Regime::B,
            received: Progress::default(),
            head: None,
        }
    }

    /// Like [`from_decoder`](Self::from_decoder) for the final result of a `FramedRead` (feature
    /// `codec`): an I/O error is [`transport_failed`](Self::transport_failed).
    ///
    /// # Examples
    ///
    /// ```
    /// use futures::TryStreamExt;
    /// use mcp_framing::{Outcome, StreamDecoder, StreamEncoder, StreamHead, Verdict};
    /// use tokio_util::codec::FramedRead;
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut body = bytes::BytesMut::new();
    /// enc.message(b"{}", &mut body)?;
    /// # tokio_test::block_on(async {
    /// let mut frames = FramedRead::new(&body[..], StreamDecoder::new());
    /// let last = loop {
    ///     match frames.try_next().await {
    ///         Ok(Some(_event)) => continue,
    ///         end => break end,
    ///     }
    /// };
    /// let outcome = Outcome::from_codec(frames.decoder(), &last);
    /// assert!(matches!(outcome.verdict, Verdict::Abandoned { at: Some(_) }));
    /// # });
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[cfg(feature = "codec")]
    #[must_use]
    pub fn from_codec(
        decoder: &StreamDecoder,
        last: &Result<Option<Event>, crate::CodecError>,
    ) -> Self {
        match last {
            Ok(event) => Self::from_decoder(decoder, &Ok(event.clone())),
            Err(crate::CodecError::Decode(err)) => Self::from_decoder(decoder, &Err(err.clone())),
            Err(_) => Self::transport_failed(decoder),
        }
    }

    /// Whether the response is complete (the only verdict under which it may be used as such).
    ///
    /// # Examples
    ///
    /// See [`Outcome`].
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.verdict == Verdict::Clean
    }
}

fn error_verdict(err: &DecodeError) -> Verdict {
    match err {
        DecodeError::RequestKeyMismatch { expected, found } => Verdict::CrossWired {
            expected: *expected,
            found: *found,
        },
        DecodeError::ForeignFrame { .. } => Verdict::Spliced(err.clone()),
        // Framing was promised, yet the body is not framed (JSON or SSE text at byte 0, SPEC.md
        // §2), or speaks a version that was not negotiated.
        DecodeError::BadMagic { offset: 0, .. }
        | DecodeError::UnsupportedVersion { offset: 0, .. }
        // Headers passed their CRC, so these lengths are what the server sent: over the limits
        // the contract negotiated.
        | DecodeError::FrameTooLarge { .. }
        | DecodeError::MessageTooLarge { .. } => Verdict::ContractViolation(err.clone()),
        _ => Verdict::Corrupt(err.clone()),
    }
}
