//! The transport mappings of a framed stream (SPEC.md §15, §16, §18), and how a response can
//! break them: the vocabulary the HTTP adapters, the SSE decoders and the CLI share. Pure data,
//! no I/O and no optional dependency, so that an [`Outcome`](crate::outcome::Outcome) can name a mapping
//! violation whatever features are enabled.

/// Media type of the binary mapping (SPEC.md §16).
// Hidden: a wire name the CLI, the tests and the fuzz targets spell; users name a mapping by `Mapping` (`content_type()`, `name()`).
#[doc(hidden)]
pub const MEDIA_TYPE: &str = "application/vnd.mcp-framing";
/// Media type of the SSE mapping (SPEC.md §15).
// Hidden: a wire name the CLI, the tests and the fuzz targets spell; users name a mapping by `Mapping` (`content_type()`, `name()`).
#[doc(hidden)]
pub const EVENT_STREAM: &str = "text/event-stream";
/// The SSE event name that carries frames (SPEC.md §15).
// Hidden: a wire name the CLI, the tests and the fuzz targets spell; users name a mapping by `Mapping` (`content_type()`, `name()`).
#[doc(hidden)]
pub const FRAME_EVENT: &str = "mcp-frame";

/// How a framed stream travels in an HTTP body.
///
/// # Examples
///
/// ```
/// use mcp_framing::mapping::Mapping;
/// assert_eq!(Mapping::from_content_type(Some("text/event-stream; charset=utf-8")), Some(Mapping::Sse));
/// assert_eq!(Mapping::from_content_type(Some("application/json")), None);
/// assert_eq!(Mapping::Binary.content_type(), "application/vnd.mcp-framing");
/// assert_eq!("sse".parse::<Mapping>(), Ok(Mapping::Sse));
/// assert_eq!(Mapping::Compat.content_type(), "text/event-stream");
/// assert_eq!(Mapping::Compat.name(), "compat");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mapping {
    /// The frames are the body (`application/vnd.mcp-framing`, SPEC.md §16).
    Binary,
    /// The frames travel base64-encoded in `mcp-frame` SSE events (SPEC.md §15).
    Sse,
    /// Every message a plain MCP `message` event, the frames in `:mcp-framing` comment records
    /// (SPEC.md §18): what stock clients read unchanged.
    Compat,
}

impl Mapping {
    /// Every mapping.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::mapping::Mapping::ALL.len(), 3);
    /// ```
    // Hidden: every mapping, for the tests' and the benches' loops.
    #[doc(hidden)]
    pub const ALL: [Self; 3] = [Self::Binary, Self::Sse, Self::Compat];

    /// The response `Content-Type` of this mapping.
    ///
    /// # Examples
    ///
    /// See [`Mapping`].
    // Hidden: `http::response_headers` writes it; the layers, the CLI and the tests call it.
    #[doc(hidden)]
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Binary => MEDIA_TYPE,
            Self::Sse | Self::Compat => EVENT_STREAM,
        }
    }

    /// The mapping's short name (`binary`, `sse`, `compat`): its token in the contract's
    /// `transports` list (SPEC.md §8), in the `mapping` parameter of the `Mcp-Framing` response
    /// header and the `Mcp-Framing-Mapping` request header (SPEC.md §18.1, §18.8), and in the
    /// `mcp-frame --mapping` option.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::mapping::Mapping::Binary.name(), "binary");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Binary => "binary",
            Self::Sse => "sse",
            Self::Compat => "compat",
        }
    }

    /// The mapping a response `Content-Type` announces, if it is one of ours: `text/event-stream`
    /// is [`Sse`](Self::Sse) unless the `Mcp-Framing` response header names the compatible
    /// mapping. Anything else (e.g. `application/json`) is not a framed body. A client decides with
    /// `http::Mapping::from_response_headers` (feature `http`), which also requires the
    /// `Mcp-Framing` response header (SPEC.md §16).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::mapping::Mapping;
    ///
    /// assert_eq!(Mapping::from_content_type(Some("application/vnd.mcp-framing")), Some(Mapping::Binary));
    /// // Parameters and case do not matter; SSE is the SSE mapping unless a header says otherwise:
    /// assert_eq!(Mapping::from_content_type(Some("Text/Event-Stream; charset=utf-8")), Some(Mapping::Sse));
    /// assert_eq!(Mapping::from_content_type(Some("application/json")), None); // a plain MCP body
    /// assert_eq!(Mapping::from_content_type(None), None);
    /// ```
    #[must_use]
    pub fn from_content_type(content_type: Option<&str>) -> Option<Self> {
        let essence = content_type?.split(';').next()?.trim();
        if essence.eq_ignore_ascii_case(MEDIA_TYPE) {
            Some(Self::Binary)
        } else if essence.eq_ignore_ascii_case(EVENT_STREAM) {
            Some(Self::Sse)
        } else {
            None
        }
    }
}

impl std::str::FromStr for Mapping {
    type Err = UnknownMapping;

    /// Parses a mapping's [`name`](Mapping::name).
    fn from_str(name: &str) -> Result<Self, UnknownMapping> {
        Self::ALL
            .into_iter()
            .find(|mapping| mapping.name() == name)
            .ok_or(UnknownMapping(()))
    }
}

/// A string that is not the name of a [`Mapping`].
///
/// # Examples
///
/// ```
/// assert!("json".parse::<mcp_framing::mapping::Mapping>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown mapping: expected binary, sse or compat")]
pub struct UnknownMapping(());

/// How a response broke the framing contract at the HTTP mapping level, outside the frames
/// (SPEC.md §15, §16): the cause of a [`Verdict::MappingViolation`](crate::outcome::Verdict::MappingViolation).
///
/// # Examples
///
/// ```
/// use mcp_framing::mapping::MappingViolation;
/// let cause = MappingViolation::NotFramed { content_type: Some("application/json".into()) };
/// assert!(cause.to_string().starts_with(
///     "response is not framed (content-type \"application/json\") although framing was requested: \
///      the server does not frame its responses"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingViolation {
    /// Framing was requested but the response is in neither mapping's content type (a backend
    /// that ignored the opt-in answered `application/json` or plain SSE). The message says what
    /// to do: put a framing layer in front of the server, or connect without mcp-framing.
    #[error("{}", NotFramedText(content_type.as_deref()))]
    NotFramed {
        /// The response's content type.
        content_type: Option<String>,
    },
    /// The SSE mapping is broken: an event other than `mcp-frame` carried data, an event's
    /// base64 is invalid, or a line or event passed the size limit (SPEC.md §15).
    #[error("SSE mapping: {0}")]
    Sse(SseError),
    /// The compatible SSE mapping is broken: a framing record is invalid, a message event is
    /// not announced by a record (the comments were stripped), an event is missing or has
    /// another length than its DATA frames, or an event of another type carried data
    /// (SPEC.md §18.5).
    #[error("compatible SSE mapping: {0}")]
    Compat(CompatError),
}

/// What to do about a response that is not framed, in the words every client of this
/// repository (Rust, Python, TypeScript) uses: at the handshake this is what a server without
/// framing, or a gateway that re-encodes responses, looks like to a client that opted in.
pub(crate) const NOT_FRAMED_HINT: &str = "the server does not frame its responses, or a proxy or \
     gateway on the way removed the framing: put a framing layer in front of the server \
     (mcp-frame proxy, or FramingLayer in a Rust server), or connect without mcp-framing (the \
     SDK's stock transport)";

/// The message of a response that is not framed (SPEC.md §16): its content type and
/// [`NOT_FRAMED_HINT`].
pub(crate) struct NotFramedText<'a>(pub(crate) Option<&'a str>);

impl std::fmt::Display for NotFramedText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("response is not framed (")?;
        match self.0 {
            Some(content_type) => write!(f, "content-type {content_type:?}")?,
            None => f.write_str("no content-type")?,
        }
        write!(f, ") although framing was requested: {NOT_FRAMED_HINT}")
    }
}

/// Errors of the SSE mapping (SPEC.md §15), as [`SseFrameDecoder`](crate::sse::SseFrameDecoder)
/// reports them (feature `sse`).
///
/// # Examples
///
/// ```
/// use mcp_framing::{BodyDecoder, BodyError, StreamDecoder, outcome::Verdict};
/// use mcp_framing::mapping::{Mapping, MappingViolation, SseError};
///
/// // A server that ignored the opt-in and answered plain MCP SSE:
/// let mut decoder = BodyDecoder::new(Mapping::Sse, StreamDecoder::new());
/// decoder.feed(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
/// let Err(BodyError::Sse(err)) = decoder.next_event() else { panic!("not an SSE mapping error") };
/// assert_eq!(err, SseError::UnexpectedEvent { name: "message".into() });
/// let outcome = decoder.outcome();
/// assert!(matches!(outcome.verdict, Verdict::MappingViolation(MappingViolation::Sse(_))));
/// assert_eq!(outcome.verdict.name(), "contract_violation");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// An event carried data under another name than [`FRAME_EVENT`]: the body is not (only) a
    /// framed stream, e.g. a server that ignored the opt-in and answered plain MCP SSE.
    #[error("unexpected SSE event {name:?} in a framed stream (expected {FRAME_EVENT:?})")]
    UnexpectedEvent {
        /// The event name (`message` when the event had none).
        name: String,
    },
    /// An `mcp-frame` event's data is not valid padded standard base64.
    #[error("SSE event {event} carries invalid base64")]
    InvalidBase64 {
        /// Index of the event in the body (0-based, counting dispatched events).
        event: u64,
    },
    /// An event's data grew past the limit before the event ended.
    #[error("SSE event data exceeds {max} bytes")]
    EventTooLarge {
        /// The configured limit.
        max: usize,
    },
    /// More than `max` lines in a row carried no data: `:` comments (keep-alives), blank lines,
    /// or the other fields of events without data. A peer holding the body open with nothing
    /// (SPEC.md §15).
    #[error("more than {max} SSE lines in a row carry no data")]
    TooManyComments {
        /// The configured limit.
        max: u32,
    },
}

impl SseError {
    /// The error kind as named in SPEC.md §15 and in the conformance manifest (the variant
    /// name).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::mapping::SseError;
    /// assert_eq!(SseError::InvalidBase64 { event: 3 }.kind(), "InvalidBase64");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnexpectedEvent { .. } => "UnexpectedEvent",
            Self::InvalidBase64 { .. } => "InvalidBase64",
            Self::EventTooLarge { .. } => "EventTooLarge",
            Self::TooManyComments { .. } => "TooManyComments",
        }
    }
}

/// Errors of the compatible SSE mapping (receiver side, SPEC.md §18.5).
///
/// Every one is a contract violation of the mapping (SPEC.md §11.4), reported after the frame
/// bytes that precede it in the body were handed over, so that an error in those frames, which
/// comes first in the body, is the verdict.
///
/// # Examples
///
/// ```
/// use mcp_framing::{BodyDecoder, BodyError, StreamDecoder, outcome::Verdict};
/// use mcp_framing::mapping::{CompatError, Mapping, MappingViolation};
///
/// // A plain MCP stream whose framing comments a gateway stripped:
/// let mut decoder = BodyDecoder::new(Mapping::Compat, StreamDecoder::new());
/// decoder.feed(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
/// let Err(BodyError::Compat(err)) = decoder.next_event() else { panic!("not a compat mapping error") };
/// assert_eq!(err, CompatError::UnframedEvent { event: 0 });
/// let outcome = decoder.outcome();
/// assert!(matches!(outcome.verdict, Verdict::MappingViolation(MappingViolation::Compat(_))));
/// assert_eq!(outcome.verdict.name(), "contract_violation");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompatError {
    /// A comment line starting with `mcp-framing` that is not a valid record: not `mcp-framing`,
    /// a space and canonical padded base64 of at least one byte, or whose bytes are not whole
    /// frames (a header that fails its checks, a frame cut by the record's end).
    #[error("invalid framing record {record}")]
    InvalidRecord {
        /// Index of the record in the body (0-based, counting record lines).
        record: u64,
    },
    /// A `message` event that no record announced (no DATA frame was waiting for it): the
    /// framing comments were stripped or never sent, a record was dropped, or the event is a
    /// duplicate. Nothing in it is delivered.
    #[error("SSE message event {event} is not announced by a framing record")]
    UnframedEvent {
        /// Index of the event among the body's message events (0-based).
        event: u64,
    },
    /// A record arrived while a DATA frame of the previous record still waited for its message
    /// event: the event was dropped (or a record inserted).
    #[error("framing record {record} arrived while a message event was awaited")]
    EventMissing {
        /// Index of the record in the body (0-based).
        record: u64,
    },
    /// A DATA frame of a message whose event was already received (no MESSAGE_END or ABORT
    /// since): the message would span two events, and a stock client would read two messages
    /// where the frames verify one. Each message travels in exactly one event.
    #[error("framing record {record} continues a message whose event was already received")]
    SplitMessage {
        /// Index of the record in the body (0-based).
        record: u64,
    },
    /// A message event's data is not exactly as long as the DATA frames it fills declare.
    #[error("SSE message event carries {carried} bytes, its DATA frames declare {declared}")]
    EventLengthMismatch {
        /// Total payload length of the DATA headers the event fills.
        declared: u64,
        /// Length of the event's data.
        carried: u64,
    },
    /// The SSE layer failed: an event of another type carrying data
    /// ([`SseError::UnexpectedEvent`]), an event or line over the bound
    /// ([`SseError::EventTooLarge`]), or too many lines in a row without data
    /// ([`SseError::TooManyComments`]).
    #[error(transparent)]
    Sse(SseError),
}

impl CompatError {
    /// A stable name for telemetry and the conformance manifest (SPEC.md §14, §18).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::mapping::{CompatError, SseError};
    /// assert_eq!(CompatError::Sse(SseError::EventTooLarge { max: 4 }).kind(), "EventTooLarge");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidRecord { .. } => "InvalidRecord",
            Self::UnframedEvent { .. } => "UnframedEvent",
            Self::EventMissing { .. } => "EventMissing",
            Self::SplitMessage { .. } => "SplitMessage",
            Self::EventLengthMismatch { .. } => "EventLengthMismatch",
            Self::Sse(err) => err.kind(),
        }
    }
}
