//! The verdict on a closed stream, and the one table of verdict kinds (SPEC.md §11.4).

use std::fmt;

use super::regime::StreamCompletionAmbiguousError;
use crate::error::{DecodeError, Truncation};
use crate::frame::Abort;
use crate::ids::RequestKey;
use crate::mapping::MappingViolation;

/// The verdict on a closed stream. Only [`Verdict::Clean`] means the response is complete.
///
/// # Examples
///
/// ```
/// use mcp_framing::{DecodeError, StreamDecoder, outcome::Verdict};
///
/// // A plain JSON body where a framed stream was expected:
/// let mut decoder = StreamDecoder::new();
/// let mut input = bytes::BytesMut::from(&br#"{"jsonrpc":"2.0","id":1,"result":{}}"#[..]);
/// assert!(decoder.decode(&mut input).is_err());
/// let outcome = decoder.outcome();
/// assert!(matches!(outcome.verdict, Verdict::ContractViolation(DecodeError::BadMagic { .. })));
/// assert_eq!(outcome.verdict.name(), "contract_violation");
/// assert!(!outcome.is_clean()); // only `Verdict::Clean` is a complete response
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
    /// use mcp_framing::{StreamDecoder, http::VerifiedResponse, mapping::MappingViolation, outcome::Verdict};
    ///
    /// // A backend that ignored the opt-in answered plain JSON:
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("content-type", http::HeaderValue::from_static("application/json"));
    /// let body = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    /// let err = VerifiedResponse::from_headers(body, &headers, StreamDecoder::new()).unwrap_err();
    /// let outcome = err.outcome().unwrap();
    /// assert!(matches!(outcome.verdict, Verdict::MappingViolation(MappingViolation::NotFramed { .. })));
    /// assert_eq!(outcome.verdict.name(), "contract_violation");
    /// ```
    MappingViolation(MappingViolation),
}

impl Verdict {
    /// Which of the eight kinds this verdict is ([`Verdict::MappingViolation`] is a
    /// [`VerdictKind::ContractViolation`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{internals::outcome::VerdictKind, outcome::Verdict};
    /// assert_eq!(Verdict::Clean.kind(), VerdictKind::Clean);
    /// assert_eq!(Verdict::Abandoned { at: None }.kind(), VerdictKind::Abandoned);
    /// ```
    // Hidden: the kind is what `name` spells (the CLI's exit statuses and the tests match on
    // it through `internals::outcome::VerdictKind`); users match the verdict itself.
    #[doc(hidden)]
    #[must_use]
    pub fn kind(&self) -> VerdictKind {
        match self {
            Self::Clean => VerdictKind::Clean,
            Self::Abandoned { .. } => VerdictKind::Abandoned,
            Self::Aborted(_) => VerdictKind::Aborted,
            Self::Corrupt(_) => VerdictKind::Corrupt,
            Self::Spliced(_) => VerdictKind::Spliced,
            Self::CrossWired { .. } => VerdictKind::CrossWired,
            Self::ContractViolation(_) | Self::MappingViolation(_) => {
                VerdictKind::ContractViolation
            }
            Self::Ambiguous(_) => VerdictKind::Ambiguous,
        }
    }

    /// The kind's stable snake_case name (`clean`, `abandoned`, `aborted`, `corrupt`, `spliced`,
    /// `cross_wired`, `contract_violation`, `ambiguous`; [`Verdict::MappingViolation`] is a
    /// `contract_violation`): the `outcome` label of telemetry events and counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{Abort, AbortCode, outcome::Verdict};
    ///
    /// assert_eq!(Verdict::Clean.name(), "clean");
    /// assert_eq!(Verdict::Aborted(Abort::new(AbortCode::Cancelled, "")).name(), "aborted");
    /// // The telemetry label of a stream cut between messages:
    /// assert_eq!(Verdict::Abandoned { at: None }.name(), "abandoned");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The verdict of a decode error (SPEC.md §11.4): an error is never clean.
    pub(crate) fn of_error(err: &DecodeError) -> Self {
        match err {
            DecodeError::Truncated { at, .. } => Self::Abandoned { at: Some(*at) },
            DecodeError::PeerAbort(abort) => Self::Aborted(abort.clone()),
            DecodeError::RequestKeyMismatch { expected, found } => Self::CrossWired {
                expected: *expected,
                found: *found,
            },
            DecodeError::ForeignFrame { .. } => Self::Spliced(err.clone()),
            // Framing was promised, yet the body is not framed (JSON or SSE text at byte 0,
            // SPEC.md §2), or speaks a version that was not negotiated.
            DecodeError::BadMagic { offset: 0, .. }
            | DecodeError::UnsupportedVersion { offset: 0, .. }
            // Headers passed their CRC, so these lengths and counts are what the server sent:
            // over the limits the contract negotiated (§6) or the receiver's per-stream bounds
            // (§6.1).
            | DecodeError::FrameTooLarge { .. }
            | DecodeError::MessageTooLarge { .. }
            | DecodeError::StreamTooLarge { .. }
            | DecodeError::TooManyMessages { .. }
            | DecodeError::TooManyKeepAlives { .. }
            | DecodeError::TooManyIgnorableFrames { .. } => Self::ContractViolation(err.clone()),
            _ => Self::Corrupt(err.clone()),
        }
    }
}

/// The eight kinds of [`Verdict`], in one table: their names (the `outcome` label of every
/// telemetry event and counter, [`crate::telemetry`]) and the `mcp-frame` exit statuses come
/// from here.
///
/// # Examples
///
/// ```
/// use mcp_framing::{internals::outcome::VerdictKind, outcome::Verdict};
/// assert_eq!(Verdict::Clean.kind(), VerdictKind::Clean);
/// assert_eq!(VerdictKind::CrossWired.to_string(), "cross_wired");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VerdictKind {
    /// [`Verdict::Clean`].
    Clean,
    /// [`Verdict::Abandoned`].
    Abandoned,
    /// [`Verdict::Aborted`].
    Aborted,
    /// [`Verdict::Corrupt`].
    Corrupt,
    /// [`Verdict::Spliced`].
    Spliced,
    /// [`Verdict::CrossWired`].
    CrossWired,
    /// [`Verdict::ContractViolation`] and [`Verdict::MappingViolation`].
    ContractViolation,
    /// [`Verdict::Ambiguous`].
    Ambiguous,
}

impl VerdictKind {
    /// The stable snake_case name: `clean`, `abandoned`, `aborted`, `corrupt`, `spliced`,
    /// `cross_wired`, `contract_violation`, `ambiguous`.
    #[must_use]
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Abandoned => "abandoned",
            Self::Aborted => "aborted",
            Self::Corrupt => "corrupt",
            Self::Spliced => "spliced",
            Self::CrossWired => "cross_wired",
            Self::ContractViolation => "contract_violation",
            Self::Ambiguous => "ambiguous",
        }
    }
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for VerdictKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
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
