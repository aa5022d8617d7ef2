//! Running the decoder over an input and turning its end state into a verdict and exit status.

use std::fmt;
use std::io;

use bytes::BytesMut;
use clap::ValueEnum;
use mcp_framing::frame::MAGIC;
use mcp_framing::sse::{SseError, SseFrameDecoder, event_data_limit};
use mcp_framing::sse_compat::{CompatDecoder, CompatError};
use mcp_framing::{
    DecodeError, Event, MappingViolation, MessageSummary, Outcome as Classification, Progress,
    StreamDecoder, StreamHead, Truncation, Verdict, VerifiedMessage,
};
use serde_json::{Value, json};

use crate::input::hex;

/// How a stream is carried (SPEC.md §15, §16, §18).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mapping {
    /// The frames are the bytes (`application/vnd.mcp-framing`, a pipe, a file).
    Binary,
    /// `text/event-stream`: `mcp-frame` events carrying base64 of whole frames.
    Sse,
    /// `text/event-stream`: the messages as plain `message` events, the frames in
    /// `:mcp-framing` comment records (the compatible mapping).
    Compat,
}

impl Mapping {
    /// The name used on the command line and in JSON output.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Binary => "binary",
            Self::Sse => "sse",
            Self::Compat => "compat",
        }
    }
}

/// Why a stream is not clean: the frame decoder's verdict or the SSE layer's.
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    Decode(DecodeError),
    Sse(SseError),
    Compat(CompatError),
}

/// The body decoder of an SSE mapping: body bytes in, frame bytes out.
#[derive(Debug)]
pub(crate) enum EventDecoder {
    Sse(SseFrameDecoder),
    Compat(CompatDecoder),
}

impl EventDecoder {
    /// The body decoder of `mapping`; `None` for the binary mapping. The event bound is
    /// `max_event_data` if given, otherwise it follows the limits in force of `decoder`
    /// (SPEC.md §15: one frame of the max frame payload; §18.7: one message).
    pub(crate) fn new(
        mapping: Mapping,
        max_event_data: Option<usize>,
        decoder: &StreamDecoder,
    ) -> Option<Self> {
        match mapping {
            Mapping::Binary => None,
            Mapping::Sse => Some(Self::Sse(SseFrameDecoder::with_max_event_data(
                max_event_data.unwrap_or_else(|| event_data_limit(decoder.max_frame_payload())),
            ))),
            Mapping::Compat => Some(Self::Compat(CompatDecoder::with_max_event_data(
                max_event_data.unwrap_or_else(|| {
                    mcp_framing::sse_compat::event_data_limit(decoder.max_message_size())
                }),
            ))),
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8], frames: &mut BytesMut) -> Result<(), Failure> {
        match self {
            Self::Sse(decoder) => decoder.feed(bytes, frames).map_err(Failure::Sse),
            Self::Compat(decoder) => decoder.feed(bytes, frames).map_err(Failure::Compat),
        }
    }

    pub(crate) fn finish(&mut self) {
        match self {
            Self::Sse(decoder) => {
                decoder.finish();
            }
            Self::Compat(decoder) => {
                decoder.finish();
            }
        }
    }

    /// What the body carried so far, for `inspect`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Sse(decoder) => format!("{} mcp-frame events", decoder.frame_events()),
            Self::Compat(decoder) => format!(
                "{} framing records, {} message events",
                decoder.records(),
                decoder.message_events()
            ),
        }
    }
}

impl Failure {
    /// The error kind as named in SPEC.md and the manifest.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Decode(err) => err.kind(),
            Self::Sse(SseError::UnexpectedEvent { .. }) => "UnexpectedEvent",
            Self::Sse(SseError::InvalidBase64 { .. }) => "InvalidBase64",
            Self::Sse(SseError::EventTooLarge { .. }) => "EventTooLarge",
            Self::Sse(_) => "SseError",
            Self::Compat(err) => err.kind(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decode(err) => err.fmt(f),
            Self::Sse(err) => err.fmt(f),
            Self::Compat(err) => err.fmt(f),
        }
    }
}

/// What the verdict means for the caller; each has its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// STREAM_END arrived and every message verified.
    Clean,
    /// The input ended before the sentinel (`Truncated`, SPEC.md §7).
    Abandoned,
    /// The bytes break the format: checksums, lengths, digests, sequence (splices included),
    /// frame order, trailing bytes.
    Corrupt,
    /// The peer sent ABORT (`PeerAbort`).
    Aborted,
    /// Not what was agreed: not a framed stream at all, a version this tool does not implement,
    /// frames or messages over the limits, a response to another request, or a broken SSE
    /// mapping.
    Contract,
}

impl Status {
    /// The library's classification (`Outcome`, SPEC.md §11.4) decides; this only picks the
    /// exit status for it, so the tool and a client using the crate always agree.
    fn of(failure: Option<&Failure>) -> Self {
        let outcome = match failure {
            None => return Self::Clean,
            Some(Failure::Decode(err)) => Classification::from_eof(&Err(err.clone())),
            Some(Failure::Sse(err)) => {
                Classification::mapping_violation(MappingViolation::Sse(err.clone()))
            }
            Some(Failure::Compat(err)) => {
                Classification::mapping_violation(MappingViolation::Compat(err.clone()))
            }
        };
        match outcome.verdict {
            Verdict::Clean => Self::Clean,
            Verdict::Abandoned { .. } => Self::Abandoned,
            Verdict::Aborted(_) => Self::Aborted,
            Verdict::CrossWired { .. }
            | Verdict::ContractViolation(_)
            | Verdict::MappingViolation(_)
            | Verdict::Ambiguous(_) => Self::Contract,
            _ => Self::Corrupt,
        }
    }

    /// The documented exit status (README, `--help`).
    pub(crate) const fn exit_code(self) -> u8 {
        match self {
            Self::Clean => 0,
            Self::Abandoned => 3,
            Self::Corrupt => 4,
            Self::Aborted => 5,
            Self::Contract => 6,
        }
    }

    const fn name(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Abandoned => "abandoned",
            Self::Corrupt => "corrupt",
            Self::Aborted => "aborted",
            Self::Contract => "contract-violation",
        }
    }
}

/// The end state of one decoded input.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// `None`: clean.
    pub(crate) failure: Option<Failure>,
    pub(crate) head: Option<StreamHead>,
    pub(crate) messages: Vec<MessageSummary>,
    pub(crate) progress: Progress,
    /// Bytes read from the input (reading stops at the first error).
    pub(crate) input_bytes: u64,
    /// The first input bytes (to tell an unframed input from a truncated stream).
    first_bytes: Vec<u8>,
    pub(crate) mapping: Mapping,
}

/// Feeds a decoder in pieces as they are read and collects what it reports.
pub(crate) struct Session {
    decoder: StreamDecoder,
    events: Option<EventDecoder>,
    /// Frame bytes not yet decoded.
    buf: BytesMut,
    failure: Option<Failure>,
    messages: Vec<MessageSummary>,
    input_bytes: u64,
    first_bytes: Vec<u8>,
    mapping: Mapping,
}

/// Called with each message once it is verified.
pub(crate) type OnMessage<'a> = &'a mut dyn FnMut(&VerifiedMessage) -> io::Result<()>;

/// How many leading input bytes are kept for hints.
const FIRST_BYTES: usize = 8;

impl Session {
    pub(crate) fn new(
        decoder: StreamDecoder,
        mapping: Mapping,
        max_event_data: Option<usize>,
    ) -> Self {
        Self {
            events: EventDecoder::new(mapping, max_event_data, &decoder),
            decoder,
            buf: BytesMut::new(),
            failure: None,
            messages: Vec::new(),
            input_bytes: 0,
            first_bytes: Vec::new(),
            mapping,
        }
    }

    /// Why the stream failed, if it did.
    pub(crate) fn failure(&self) -> Option<&Failure> {
        self.failure.as_ref()
    }

    /// Feeds the next input bytes; ignored once the stream failed.
    ///
    /// # Errors
    ///
    /// Only what `on_message` returns (writing a message out failed).
    pub(crate) fn feed(&mut self, bytes: &[u8], on_message: OnMessage<'_>) -> io::Result<()> {
        if self.failure.is_some() {
            return Ok(());
        }
        self.input_bytes += bytes.len() as u64;
        let want = FIRST_BYTES.saturating_sub(self.first_bytes.len());
        self.first_bytes
            .extend_from_slice(&bytes[..want.min(bytes.len())]);
        let Some(mut events) = self.events.take() else {
            self.buf.extend_from_slice(bytes);
            return self.drain(on_message);
        };
        let result = self.feed_events(&mut events, bytes, on_message);
        self.events = Some(events);
        result
    }

    /// One line at a time: the frames handed over before a failing line are decoded first
    /// (SPEC.md §15, §18.5 "errors come in body order"), whatever the reads.
    fn feed_events(
        &mut self,
        events: &mut EventDecoder,
        bytes: &[u8],
        on_message: OnMessage<'_>,
    ) -> io::Result<()> {
        for line in lines(bytes) {
            let result = events.feed(line, &mut self.buf);
            self.drain(on_message)?;
            if self.failure.is_some() {
                break;
            }
            if let Err(failure) = result {
                self.failure = Some(failure);
                break;
            }
        }
        Ok(())
    }

    /// Ends the stream with `failure` (an error found outside this session, e.g. by the SSE
    /// pass of `inspect`), unless it already failed.
    pub(crate) fn fail(&mut self, failure: Failure) {
        self.failure.get_or_insert(failure);
    }

    /// Decodes the frame bytes buffered so far.
    fn drain(&mut self, on_message: OnMessage<'_>) -> io::Result<()> {
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(event)) => self.event(event, on_message)?,
                Ok(None) => return Ok(()),
                Err(err) => {
                    self.failure = Some(Failure::Decode(err));
                    return Ok(());
                }
            }
        }
    }

    fn event(&mut self, event: Event, on_message: OnMessage<'_>) -> io::Result<()> {
        if let Event::Message(message) = event {
            self.messages.push(message.summary());
            on_message(&message)?;
        }
        Ok(())
    }

    /// The input ended: the verdict (SPEC.md §7; an SSE event left open is discarded, §15).
    ///
    /// # Errors
    ///
    /// Only what `on_message` returns.
    pub(crate) fn finish(mut self, on_message: OnMessage<'_>) -> io::Result<Outcome> {
        if let Some(events) = &mut self.events {
            events.finish();
        }
        while self.failure.is_none() {
            match self.decoder.decode_eof(&mut self.buf) {
                Ok(Some(event)) => self.event(event, on_message)?,
                Ok(None) => break,
                Err(err) => self.failure = Some(Failure::Decode(err)),
            }
        }
        Ok(Outcome {
            head: self.decoder.head(),
            progress: self.decoder.progress(),
            failure: self.failure,
            messages: self.messages,
            input_bytes: self.input_bytes,
            first_bytes: self.first_bytes,
            mapping: self.mapping,
        })
    }
}

/// `bytes` cut after each line end (CR or LF), the last piece possibly without one.
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split_inclusive(|&b| b == b'\n' || b == b'\r')
}

/// Reads `input` to its end (or to the first error) in 64 KiB reads, decoding as bytes arrive.
///
/// # Errors
///
/// Reading failed, or `on_message` failed.
pub(crate) fn decode_reader(
    mut input: impl io::Read,
    mut session: Session,
    on_message: OnMessage<'_>,
) -> Result<Outcome, ReadOrWrite> {
    let mut chunk = vec![0u8; 64 * 1024];
    while session.failure().is_none() {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadOrWrite::Read(e)),
        };
        session
            .feed(&chunk[..n], on_message)
            .map_err(ReadOrWrite::Write)?;
    }
    session.finish(on_message).map_err(ReadOrWrite::Write)
}

/// Which side of [`decode_reader`] failed.
#[derive(Debug)]
pub(crate) enum ReadOrWrite {
    Read(io::Error),
    Write(io::Error),
}

fn truncation_name(at: &Truncation) -> &'static str {
    match at {
        Truncation::NoFrame => "NoFrame",
        Truncation::InHeader { .. } => "InHeader",
        Truncation::InPayload { .. } => "InPayload",
        Truncation::InMessage { .. } => "InMessage",
        Truncation::BetweenMessages { .. } => "BetweenMessages",
        _ => "Other",
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Whether `bytes` start like an SSE body (a field or a comment), for a hint.
fn looks_like_sse(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    [&b"event:"[..], b"data:", b"id:", b"retry:", b":"]
        .iter()
        .any(|field| bytes.starts_with(field))
}

impl Outcome {
    /// The status; an input that ended before one header and does not start like the magic is
    /// "not a framed stream at all" (a contract violation), although the decoder, which checks
    /// the magic once 20 bytes are there (SPEC.md §2), reports it as truncated.
    pub(crate) fn status(&self) -> Status {
        if self.not_framed() {
            Status::Contract
        } else {
            Status::of(self.failure.as_ref())
        }
    }

    fn not_framed(&self) -> bool {
        let start = &self.first_bytes[..self.first_bytes.len().min(2)];
        self.mapping == Mapping::Binary
            && matches!(
                self.failure,
                Some(Failure::Decode(DecodeError::Truncated { .. }))
            )
            && !start.is_empty()
            && !MAGIC.starts_with(start)
    }

    /// A hint for a body given with the wrong `--mapping`.
    fn mapping_hint(&self) -> &'static str {
        let unframed = self.not_framed()
            || matches!(
                self.failure,
                Some(Failure::Decode(DecodeError::BadMagic { offset: 0, .. }))
            );
        let start = self.first_bytes.strip_prefix(b"\xef\xbb\xbf");
        let start = start.unwrap_or(&self.first_bytes);
        if self.mapping != Mapping::Binary || !unframed || !looks_like_sse(start) {
            ""
        } else if b":mcp-framing ".starts_with(start) || start.starts_with(b":mcp-fr") {
            " (this looks like the compatible SSE mapping: try --mapping compat)"
        } else {
            " (this looks like an SSE body: try --mapping sse or --mapping compat)"
        }
    }

    /// The verdict in one line (for stderr).
    pub(crate) fn line(&self) -> String {
        let status = self.status();
        let verified = plural(self.messages.len() as u64, "message");
        let body = match &self.failure {
            None => format!(
                "{verified} verified, {}, {}",
                plural(self.progress.frames, "frame"),
                plural(self.input_bytes, "byte")
            ),
            Some(Failure::Decode(DecodeError::PeerAbort(abort))) => {
                format!("the peer aborted the stream ({abort}); {verified} verified before")
            }
            Some(Failure::Decode(DecodeError::Truncated { at, .. })) if self.not_framed() => {
                format!(
                    "not an mcp-framing stream: the input starts with {}, not the magic 9f 4d \
                     (the decoder reports: stream truncated {at})",
                    hex(&self.first_bytes[..self.first_bytes.len().min(2)])
                )
            }
            Some(Failure::Decode(DecodeError::Truncated { at, progress })) => format!(
                "stream truncated {at}: {}, {} received; {verified} verified before",
                plural(progress.frames, "frame"),
                plural(progress.bytes, "byte"),
            ),
            Some(failure) => format!("{failure} ({}); {verified} verified before", failure.kind()),
        };
        format!("{}: {body}{}", status.name(), self.mapping_hint())
    }

    /// The verdict for machines; `verdict`, `error`, `truncation` and `abort` use the names of
    /// `tests/vectors/manifest.json`.
    pub(crate) fn to_json(&self) -> Value {
        let status = self.status();
        let (verdict, truncation, abort) = match &self.failure {
            None => ("clean", Value::Null, Value::Null),
            Some(Failure::Decode(DecodeError::PeerAbort(a))) => (
                "aborted",
                Value::Null,
                json!({"code": u16::from(a.code), "reason": a.reason}),
            ),
            Some(Failure::Decode(DecodeError::Truncated { at, .. })) => {
                ("error", json!(truncation_name(at)), Value::Null)
            }
            Some(_) => ("error", Value::Null, Value::Null),
        };
        json!({
            "status": status.name(),
            "exit_code": status.exit_code(),
            "verdict": verdict,
            "error": self.failure.as_ref().map(Failure::kind),
            "truncation": truncation,
            "abort": abort,
            "detail": self.failure.as_ref().map(ToString::to_string),
            "mapping": self.mapping.name(),
            "messages": self.messages.iter().map(|m| json!({
                "index": m.index,
                "len": m.len,
                "sha256": hex(&m.sha256),
            })).collect::<Vec<_>>(),
            "request_key": self.head.and_then(|h| h.request_key).map(|k| k.to_string()),
            "attempt_id": self.head.map(|h| h.attempt_id.to_string()),
            "frames": self.progress.frames,
            "input_bytes": self.input_bytes,
            "last_sequence": self.progress.last_sequence,
        })
    }
}
