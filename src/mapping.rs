//! The transport mappings of a framed stream (SPEC.md §15, §16), and how a response can break
//! them: the vocabulary the HTTP adapters, the SSE decoder and the CLI share. Pure data, no I/O
//! and no optional dependency, so that an [`Outcome`](crate::Outcome) can name a mapping
//! violation whatever features are enabled.

/// Media type of the binary mapping (SPEC.md §16).
pub const MEDIA_TYPE: &str = "application/vnd.mcp-framing";
/// Media type of the SSE mapping (SPEC.md §15).
pub const EVENT_STREAM: &str = "text/event-stream";
/// The SSE event name that carries frames (SPEC.md §15).
pub const FRAME_EVENT: &str = "mcp-frame";

/// How a framed stream travels in an HTTP body.
///
/// # Examples
///
/// ```
/// use mcp_framing::Mapping;
/// assert_eq!(Mapping::from_content_type(Some("text/event-stream; charset=utf-8")), Some(Mapping::Sse));
/// assert_eq!(Mapping::from_content_type(Some("application/json")), None);
/// assert_eq!(Mapping::Binary.content_type(), "application/vnd.mcp-framing");
/// assert_eq!("sse".parse::<Mapping>(), Ok(Mapping::Sse));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mapping {
    /// The frames are the body (`application/vnd.mcp-framing`, SPEC.md §16).
    Binary,
    /// The frames travel base64-encoded in `mcp-frame` SSE events (SPEC.md §15).
    Sse,
}

impl Mapping {
    /// Every mapping.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::Mapping::ALL.len(), 2);
    /// ```
    pub const ALL: [Self; 2] = [Self::Binary, Self::Sse];

    /// The response `Content-Type` of this mapping.
    ///
    /// # Examples
    ///
    /// See [`Mapping`].
    #[must_use]
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Binary => MEDIA_TYPE,
            Self::Sse => EVENT_STREAM,
        }
    }

    /// The mapping's short name (`binary`, `sse`), as the contract's `transports` list and the
    /// `mcp-frame --mapping` option write it.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::Mapping::Binary.name(), "binary");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Binary => "binary",
            Self::Sse => "sse",
        }
    }

    /// The mapping a response `Content-Type` announces, if it is one of ours. Anything else
    /// (e.g. `application/json`) is not a framed body. A client decides with
    /// `http::Mapping::from_response_headers` (feature `http`), which also requires the
    /// `Mcp-Framing` response header (SPEC.md §16).
    ///
    /// # Examples
    ///
    /// See [`Mapping`].
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
/// assert!("json".parse::<mcp_framing::Mapping>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown mapping: expected binary or sse")]
pub struct UnknownMapping(());

/// How a response broke the framing contract at the HTTP mapping level, outside the frames
/// (SPEC.md §15, §16): the cause of a [`Verdict::MappingViolation`](crate::Verdict::MappingViolation).
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
    #[error("SSE mapping: {0}")]
    Sse(SseError),
}

/// Errors of the SSE mapping (SPEC.md §15), as [`SseFrameDecoder`](crate::sse::SseFrameDecoder)
/// reports them (feature `sse`).
///
/// # Examples
///
/// ```
/// use mcp_framing::{MappingViolation, Outcome};
/// use mcp_framing::mapping::SseError;
///
/// let err = SseError::UnexpectedEvent { name: "message".into() };
/// assert_eq!(err.kind(), "UnexpectedEvent");
/// let outcome = Outcome::mapping_violation(MappingViolation::Sse(err));
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
