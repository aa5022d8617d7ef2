//! Running the decoder over an input and turning its end state into a verdict and exit status.

use std::io;

use bytes::BytesMut;
use mcp_framing::frame::MAGIC;
use mcp_framing::{
    DecodeError, Event, MessageSummary, Progress, StreamDecoder, StreamHead, Truncation,
    VerifiedMessage,
};
use serde_json::{Value, json};

use crate::input::hex;

/// What the verdict means for the caller; each has its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// STREAM_END arrived and every message verified.
    Clean,
    /// The input ended before the sentinel (`Truncated`, SPEC.md §7).
    Abandoned,
    /// The bytes break the format: checksums, lengths, digests, sequence, frame order, trailing
    /// bytes.
    Corrupt,
    /// The peer sent ABORT (`PeerAbort`).
    Aborted,
    /// Not what was agreed: not a framed stream at all, a version this tool does not implement,
    /// or a response to another request.
    Contract,
}

impl Status {
    fn of(error: Option<&DecodeError>) -> Self {
        match error {
            None => Self::Clean,
            Some(DecodeError::Truncated { .. }) => Self::Abandoned,
            Some(DecodeError::PeerAbort(_)) => Self::Aborted,
            Some(
                DecodeError::BadMagic { offset: 0, .. }
                | DecodeError::UnsupportedVersion { offset: 0, .. }
                | DecodeError::RequestKeyMismatch { .. },
            ) => Self::Contract,
            Some(_) => Self::Corrupt,
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
    pub(crate) error: Option<DecodeError>,
    pub(crate) head: Option<StreamHead>,
    pub(crate) messages: Vec<MessageSummary>,
    pub(crate) progress: Progress,
    /// Bytes read from the input (reading stops at the first error).
    pub(crate) input_bytes: u64,
    /// The first two input bytes (to tell a short unframed input from a truncated stream).
    first_bytes: Vec<u8>,
}

/// Feeds a decoder in pieces as they are read and collects what it reports.
pub(crate) struct Session {
    decoder: StreamDecoder,
    buf: BytesMut,
    error: Option<DecodeError>,
    messages: Vec<MessageSummary>,
    input_bytes: u64,
    first_bytes: Vec<u8>,
}

/// Called with each message once it is verified.
pub(crate) type OnMessage<'a> = &'a mut dyn FnMut(&VerifiedMessage) -> io::Result<()>;

impl Session {
    pub(crate) fn new(decoder: StreamDecoder) -> Self {
        Self {
            decoder,
            buf: BytesMut::new(),
            error: None,
            messages: Vec::new(),
            input_bytes: 0,
            first_bytes: Vec::new(),
        }
    }

    /// The error the decoder stopped with, if any.
    pub(crate) fn error(&self) -> Option<&DecodeError> {
        self.error.as_ref()
    }

    /// Feeds the next input bytes; ignored once the decoder failed.
    ///
    /// # Errors
    ///
    /// Only what `on_message` returns (writing a message out failed).
    pub(crate) fn feed(&mut self, bytes: &[u8], on_message: OnMessage<'_>) -> io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        self.input_bytes += bytes.len() as u64;
        let want = 2usize.saturating_sub(self.first_bytes.len());
        self.first_bytes
            .extend_from_slice(&bytes[..want.min(bytes.len())]);
        self.buf.extend_from_slice(bytes);
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(event)) => self.event(event, on_message)?,
                Ok(None) => return Ok(()),
                Err(err) => {
                    self.error = Some(err);
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

    /// The input ended: the verdict (SPEC.md §7).
    ///
    /// # Errors
    ///
    /// Only what `on_message` returns.
    pub(crate) fn finish(mut self, on_message: OnMessage<'_>) -> io::Result<Outcome> {
        while self.error.is_none() {
            match self.decoder.decode_eof(&mut self.buf) {
                Ok(Some(event)) => self.event(event, on_message)?,
                Ok(None) => break,
                Err(err) => self.error = Some(err),
            }
        }
        Ok(Outcome {
            head: self.decoder.head(),
            progress: self.decoder.progress(),
            error: self.error,
            messages: self.messages,
            input_bytes: self.input_bytes,
            first_bytes: self.first_bytes,
        })
    }
}

/// Reads `input` to its end (or to the first error) in 64 KiB reads, decoding as bytes arrive.
///
/// # Errors
///
/// Reading failed, or `on_message` failed.
pub(crate) fn decode_reader(
    mut input: impl io::Read,
    decoder: StreamDecoder,
    on_message: OnMessage<'_>,
) -> Result<Outcome, ReadOrWrite> {
    let mut session = Session::new(decoder);
    let mut chunk = vec![0u8; 64 * 1024];
    while session.error().is_none() {
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

impl Outcome {
    /// The status; an input that ended before one header and does not start like the magic is
    /// "not a framed stream at all" (a contract violation), although the decoder, which checks
    /// the magic once 20 bytes are there (SPEC.md §2), reports it as truncated.
    pub(crate) fn status(&self) -> Status {
        if self.not_framed() {
            Status::Contract
        } else {
            Status::of(self.error.as_ref())
        }
    }

    fn not_framed(&self) -> bool {
        matches!(self.error, Some(DecodeError::Truncated { .. }))
            && !self.first_bytes.is_empty()
            && !MAGIC.starts_with(&self.first_bytes)
    }

    /// The verdict in one line (for stderr).
    pub(crate) fn line(&self) -> String {
        let status = self.status();
        let verified = plural(self.messages.len() as u64, "message");
        let body = match &self.error {
            None => format!(
                "{verified} verified, {}, {}",
                plural(self.progress.frames, "frame"),
                plural(self.input_bytes, "byte")
            ),
            Some(DecodeError::PeerAbort(abort)) => {
                format!("the peer aborted the stream ({abort}); {verified} verified before")
            }
            Some(DecodeError::Truncated { at, .. }) if self.not_framed() => format!(
                "not an mcp-framing stream: the input starts with {}, not the magic 9f 4d \
                 (the decoder reports: stream truncated {at})",
                hex(&self.first_bytes)
            ),
            Some(DecodeError::Truncated { at, progress }) => format!(
                "stream truncated {at}: {}, {} received; {verified} verified before",
                plural(progress.frames, "frame"),
                plural(progress.bytes, "byte"),
            ),
            Some(err) => format!("{} ({}); {verified} verified before", err, err.kind()),
        };
        format!("{}: {body}", status.name())
    }

    /// The verdict for machines; `verdict`, `error`, `truncation` and `abort` use the names of
    /// `tests/vectors/manifest.json`.
    pub(crate) fn to_json(&self) -> Value {
        let status = self.status();
        let (verdict, error, truncation, abort) = match &self.error {
            None => ("clean", Value::Null, Value::Null, Value::Null),
            Some(DecodeError::PeerAbort(a)) => (
                "aborted",
                json!("PeerAbort"),
                Value::Null,
                json!({"code": u16::from(a.code), "reason": a.reason}),
            ),
            Some(err @ DecodeError::Truncated { at, .. }) => (
                "error",
                json!(err.kind()),
                json!(truncation_name(at)),
                Value::Null,
            ),
            Some(err) => ("error", json!(err.kind()), Value::Null, Value::Null),
        };
        json!({
            "status": status.name(),
            "exit_code": status.exit_code(),
            "verdict": verdict,
            "error": error,
            "truncation": truncation,
            "abort": abort,
            "detail": self.error.as_ref().map(ToString::to_string),
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
