//! What a client may conclude when a response stream closes (SPEC.md §9, §11.4).
//!
//! Two layers:
//!
//! - the regime decision table over four observations (a sentinel seen, a self-delimiting
//!   payload, its integrity, sticky discovery): it says *clean*, *abandoned*, or refuses to guess
//!   with [`StreamCompletionAmbiguousError`] (`regime.rs`);
//! - [`Outcome`] is what a real stream ended as, taken from the decoder's own state
//!   ([`StreamDecoder::outcome`](crate::StreamDecoder::outcome)), so a user never assembles the
//!   four observations by hand and cannot pass a result that says more than the decoder saw. The
//!   clean and truncated cases go through that table; decoding errors become their own
//!   non-clean verdicts ([`Verdict`], `verdict.rs`, with the one table of verdict kinds).
//!
//! Only a decoder that saw the STREAM_END sentinel and then the end of its input, with nothing in
//! between, gives [`Verdict::Clean`] in Regime A; only a decoder that expects a request key and
//! saw the end of its input right after the stream's verified final response gives it in Regime
//! B ([`Outcome::sentinel_seen`] `false`, SPEC.md §7 row 4). Every other way of obtaining an
//! outcome ([`Outcome::from_error`], [`Outcome::unframed_close`], [`Outcome::mapping_violation`])
//! is never clean.
//!
//! ```
//! use bytes::BytesMut;
//! use mcp_framing::{outcome::Verdict, StreamDecoder, StreamEncoder, StreamHead};
//!
//! let mut enc = StreamEncoder::new(StreamHead::for_request(None));
//! let mut wire = BytesMut::new();
//! enc.message(b"{}", &mut wire)?; // the body closes here, before the sentinel
//!
//! let mut decoder = StreamDecoder::new();
//! while let Ok(Some(_event)) = decoder.decode_eof(&mut wire) {} // use the events
//! let outcome = decoder.outcome();
//! assert!(matches!(outcome.verdict, Verdict::Abandoned { .. }));
//! assert_eq!(outcome.received.messages, 1); // the verified message is still usable
//! # Ok::<(), mcp_framing::EncodeError>(())
//! ```

// The decision function of the problem statement (observations in, a completion or the
// ambiguous-completion error out; the outcomes', tested beside it in `tests.rs`) and the table of
// verdict kinds (the CLI's too, through `internals::outcome`). A user reads an [`Outcome`].
below_the_api! {
    pub(crate) mod regime;
    pub(crate) mod verdict;
}

pub(crate) use regime::{Completion, Observations, classify};
pub use regime::{DiscoveryMode, Regime, StreamCompletionAmbiguousError};
pub use verdict::Verdict;

use crate::error::{DecodeError, Progress, Truncation};
use crate::frame::{Abort, StreamHead};
use crate::mapping::MappingViolation;

/// How a response stream ended, with what was received and who sent it.
///
/// Take it from the decoder once the input ended with
/// [`StreamDecoder::outcome`](crate::StreamDecoder::outcome) (the HTTP adapter
/// [`VerifiedResponse`](crate::http::VerifiedResponse) does), or build it for a decode error
/// alone ([`Outcome::from_error`]), for an unframed body closed under an accept-ambiguity policy
/// ([`Outcome::unframed_close`]), or for a response that broke the contract at the HTTP mapping
/// level ([`Outcome::mapping_violation`]).
///
/// # Examples
///
/// ```
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// let mut wire = bytes::BytesMut::new();
/// enc.message(b"{}", &mut wire)?;
/// enc.end(&mut wire)?;
///
/// let mut decoder = StreamDecoder::new();
/// while let Some(_event) = decoder.decode_eof(&mut wire).unwrap() {}
/// let outcome = decoder.outcome();
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
    /// Whether a clean verdict rests on the STREAM_END sentinel (SPEC.md §7 row 2, Regime A).
    /// `false` for a final response delivered when the input ended before its sentinel (§7 row
    /// 4: [`Verdict::Clean`] in Regime B, the missing sentinel recorded here), and for every
    /// verdict that is not clean, also one found after the sentinel (`TrailingData`): there the
    /// sentinel decided nothing.
    pub sentinel_seen: bool,
    /// What had been received: frames, bytes, last sequence number, verified messages and the
    /// bytes of a message left open.
    pub received: Progress,
    /// The stream head (request key echo and the server's attempt id), if it arrived.
    pub head: Option<StreamHead>,
}

impl Outcome {
    /// A framed stream decided by the decision table: the payload is self-delimiting, the
    /// sentinel was seen (and then the end of input) or not, and without it the integrity check
    /// passed (the final response verified, then the end of input, SPEC.md §7.1) or not (the
    /// stream-level check, STREAM_END's message count, never arrived).
    fn framed(
        sentinel_seen: bool,
        integrity_ok: bool,
        at: Option<Truncation>,
        received: Progress,
        head: Option<StreamHead>,
    ) -> Self {
        let obs = Observations {
            sentinel_seen,
            self_delimiting: true,
            integrity_ok,
            sticky_discovery: false,
        };
        let (verdict, regime) = match classify(&obs) {
            Ok(Completion::Clean(regime)) => (Verdict::Clean, regime),
            Ok(Completion::Abandoned(regime)) => (Verdict::Abandoned { at }, regime),
            // Unreachable for a self-delimiting payload; fail closed anyway.
            Err(err) => (Verdict::Ambiguous(err), Regime::C),
        };
        Self {
            sentinel_seen: sentinel_seen && verdict == Verdict::Clean,
            verdict,
            regime,
            received,
            head,
        }
    }

    /// A stream whose decoder saw STREAM_END and then the end of its input.
    pub(crate) fn clean(received: Progress, head: Option<StreamHead>) -> Self {
        Self::framed(true, true, None, received, head)
    }

    /// A stream whose decoder saw the end of its input right after the verified final response,
    /// before the sentinel (SPEC.md §7 row 4): clean in Regime B, the sentinel not seen.
    pub(crate) fn delivered(received: Progress, head: Option<StreamHead>) -> Self {
        Self::framed(false, true, None, received, head)
    }

    /// A stream that stopped before its sentinel: truncated at `at` when the decoder saw the end
    /// of input, `None` when the transport failed or reading stopped before it.
    pub(crate) fn abandoned(
        at: Option<Truncation>,
        received: Progress,
        head: Option<StreamHead>,
    ) -> Self {
        Self::framed(false, false, at, received, head)
    }

    /// A stream the server aborted (Regime A: the ABORT frame is as authoritative as the
    /// sentinel).
    pub(crate) fn aborted(abort: Abort, received: Progress, head: Option<StreamHead>) -> Self {
        Self {
            verdict: Verdict::Aborted(abort),
            regime: Regime::A,
            sentinel_seen: false,
            received,
            head,
        }
    }

    /// The outcome of a decode error, when the decoder is gone: never clean.
    ///
    /// | error | verdict |
    /// |---|---|
    /// | `Truncated` | `Abandoned { at }` (through [`classify`]: framed, integrity not established) |
    /// | `PeerAbort` | `Aborted` |
    /// | `RequestKeyMismatch` | `CrossWired` |
    /// | `ForeignFrame` | `Spliced` |
    /// | `BadMagic` or `UnsupportedVersion` at offset 0, `FrameTooLarge`, `MessageTooLarge` | `ContractViolation` |
    /// | any other | `Corrupt` |
    ///
    /// The received counts come from a `Truncated` error's progress and are zero otherwise, and
    /// the head is unknown: take the outcome from the decoder
    /// ([`StreamDecoder::outcome`](crate::StreamDecoder::outcome)) when it is at hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{outcome::{Outcome, Verdict}, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.push(b"{\"partial", &mut wire)?;
    /// let err = StreamDecoder::new().decode_all(&wire).unwrap_err();
    /// let outcome = Outcome::from_error(&err);
    /// assert!(matches!(outcome.verdict, Verdict::Abandoned { at: Some(_) }));
    /// assert_eq!(outcome.received.open_message_bytes, 9);
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    // Hidden: the decoders and clients build outcomes (`StreamDecoder::outcome`, `BodyError::outcome`); the tests call it directly.
    #[doc(hidden)]
    #[must_use]
    pub fn from_error(err: &DecodeError) -> Self {
        let received = match err {
            DecodeError::Truncated { progress, .. } => *progress,
            _ => Progress::default(),
        };
        Self::of_error(err, received, None)
    }

    /// The outcome of a decode error with what the decoder had received.
    pub(crate) fn of_error(
        err: &DecodeError,
        received: Progress,
        head: Option<StreamHead>,
    ) -> Self {
        match Verdict::of_error(err) {
            Verdict::Abandoned { at } => Self::abandoned(at, received, head),
            Verdict::Aborted(abort) => Self::aborted(abort, received, head),
            verdict => Self {
                verdict,
                regime: Regime::B,
                sentinel_seen: false,
                received,
                head,
            },
        }
    }

    /// The outcome of an **unframed** response body that closed: Regime C, always
    /// [`Verdict::Ambiguous`] (through [`classify`]), whatever the transport said. This is what
    /// every close raises under an accept-ambiguity policy
    /// (the clients raise it).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::outcome::{DiscoveryMode, Outcome, Verdict};
    /// let outcome = Outcome::unframed_close(DiscoveryMode::Stateless, 1234);
    /// assert!(matches!(outcome.verdict, Verdict::Ambiguous(_)));
    /// assert_eq!(outcome.received.bytes, 1234);
    /// ```
    // Hidden: the clients build it for an unframed close under `accept_ambiguity`; the tests call it directly.
    #[doc(hidden)]
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
            sentinel_seen: false,
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
    /// use mcp_framing::{mapping::MappingViolation, outcome::{Outcome, Regime}};
    /// let outcome = Outcome::mapping_violation(MappingViolation::NotFramed { content_type: None });
    /// assert!(!outcome.is_clean());
    /// assert_eq!(outcome.regime, Regime::B);
    /// assert_eq!(outcome.verdict.name(), "contract_violation"); // never retried
    /// ```
    // Hidden: the HTTP binding builds it; the tests call it directly.
    #[doc(hidden)]
    #[must_use]
    pub fn mapping_violation(cause: MappingViolation) -> Self {
        Self {
            verdict: Verdict::MappingViolation(cause),
            regime: Regime::B,
            sentinel_seen: false,
            received: Progress::default(),
            head: None,
        }
    }

    /// Whether the response is complete (the only verdict under which it may be used as such):
    /// [`Verdict::Clean`], with the sentinel (Regime A) or, for a final response delivered
    /// without it, in Regime B ([`sentinel_seen`](Self::sentinel_seen) `false`, SPEC.md §7 row
    /// 4). Neither is retried.
    ///
    /// # Examples
    ///
    /// A stream cut after its verified final response, read by a decoder that expects the
    /// request's key:
    ///
    /// ```
    /// use mcp_framing::{outcome::Regime, RequestKey, StreamDecoder, StreamEncoder, StreamHead};
    ///
    /// let key = RequestKey::random();
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    /// let mut wire = bytes::BytesMut::new();
    /// enc.message(br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#, &mut wire)?;
    /// // A proxy cut the body here, before STREAM_END.
    ///
    /// let mut decoder = StreamDecoder::builder().expect_request_key(key).build();
    /// while let Some(_event) = decoder.decode_eof(&mut wire).unwrap() {}
    /// let outcome = decoder.outcome();
    /// assert!(outcome.is_clean());
    /// assert_eq!((outcome.regime, outcome.sentinel_seen), (Regime::B, false));
    /// # Ok::<(), mcp_framing::EncodeError>(())
    /// ```
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.verdict == Verdict::Clean
    }
}

#[cfg(test)]
mod tests;
