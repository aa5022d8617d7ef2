//! Running the decoder over an input and turning its end state into a verdict and exit status.

use std::io;

use mcp_framing::internals::frame::MAGIC;
use mcp_framing::internals::sse_compat::RECORD_PREFIX;
use mcp_framing::{
    BodyDecoder, BodyError, DecodeError, Event, MessageSummary, Progress, StreamDecoder,
    StreamHead, VerifiedMessage, internals::outcome::VerdictKind, mapping::Mapping,
};
use serde_json::{Value, json};

use crate::input::hex;

/// What the verdict means for the caller; each has its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Every message verified and the stream is complete: STREAM_END arrived (Regime A), or the
    /// final response verified and the input ended before STREAM_END (Regime B, SPEC.md §7
    /// row 4; only with `--expect-request-key`). Either way the answer is usable.
    Clean,
    /// Clean in Regime B, but the caller asked for the sentinel (`--require-sentinel`): the
    /// final response verified, the stream was cut before STREAM_END all the same.
    SentinelMissing,
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
    /// exit status for it, so the tool and a client using the crate always agree (a client
    /// delivers a Regime B response as clean too). `require_sentinel` turns a clean verdict
    /// without the sentinel into [`Status::SentinelMissing`].
    fn of(
        failure: Option<&BodyError>,
        outcome: &mcp_framing::outcome::Outcome,
        require_sentinel: bool,
    ) -> Self {
        let Some(failure) = failure else {
            return if require_sentinel && outcome.is_clean() && !outcome.sentinel_seen {
                Self::SentinelMissing
            } else {
                Self::Clean
            };
        };
        match failure.outcome().verdict.kind() {
            VerdictKind::Clean => Self::Clean,
            VerdictKind::Abandoned => Self::Abandoned,
            VerdictKind::Aborted => Self::Aborted,
            VerdictKind::Corrupt | VerdictKind::Spliced => Self::Corrupt,
            VerdictKind::CrossWired | VerdictKind::ContractViolation | VerdictKind::Ambiguous => {
                Self::Contract
            }
        }
    }

    /// The documented exit status (`--help`, the module docs of `main.rs`).
    pub(crate) const fn exit_code(self) -> u8 {
        match self {
            Self::Clean => 0,
            Self::SentinelMissing => 1,
            Self::Abandoned => 3,
            Self::Corrupt => 4,
            Self::Aborted => 5,
            Self::Contract => 6,
        }
    }

    const fn name(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::SentinelMissing => "sentinel-missing",
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
    /// `None`: clean (with the sentinel, or a final response delivered without it).
    pub(crate) failure: Option<BodyError>,
    /// The crate's classification of the body (SPEC.md §11.4): verdict, regime, sentinel.
    pub(crate) classification: mcp_framing::outcome::Outcome,
    pub(crate) head: Option<StreamHead>,
    pub(crate) messages: Vec<MessageSummary>,
    pub(crate) progress: Progress,
    /// Bytes read from the input (reading stops at the first error).
    pub(crate) input_bytes: u64,
    /// The first input bytes (to tell an unframed input from a truncated stream).
    first_bytes: Vec<u8>,
    pub(crate) mapping: Mapping,
    /// `--require-sentinel`: a clean verdict without STREAM_END is [`Status::SentinelMissing`].
    require_sentinel: bool,
}

/// Feeds the body as it is read to the crate's [`BodyDecoder`] (the path `VerifiedResponse`
/// takes) and collects what it reports.
pub(crate) struct Session {
    body: BodyDecoder,
    failure: Option<BodyError>,
    messages: Vec<MessageSummary>,
    input_bytes: u64,
    first_bytes: Vec<u8>,
    require_sentinel: bool,
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
        require_sentinel: bool,
    ) -> Self {
        let body = BodyDecoder::new(mapping, decoder);
        Self {
            body: match max_event_data {
                Some(max) => body.max_event_data(max),
                None => body,
            },
            failure: None,
            messages: Vec::new(),
            input_bytes: 0,
            first_bytes: Vec::new(),
            require_sentinel,
        }
    }

    /// Why the stream failed, if it did.
    pub(crate) fn failure(&self) -> Option<&BodyError> {
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
        self.body.feed(bytes);
        self.drain(on_message)
    }

    /// Ends the stream with `failure` (an error found outside this session, e.g. by the SSE
    /// pass of `inspect`), unless it already failed.
    pub(crate) fn fail(&mut self, failure: BodyError) {
        self.failure.get_or_insert(failure);
    }

    /// Takes every event the body delivered so far, in body order (SPEC.md §15).
    fn drain(&mut self, on_message: OnMessage<'_>) -> io::Result<()> {
        while self.failure.is_none() {
            match self.body.next_event() {
                Ok(Some(Event::Message(message))) => {
                    self.messages.push(message.summary());
                    on_message(&message)?;
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(err) => self.failure = Some(err),
            }
        }
        Ok(())
    }

    /// The input ended: the verdict (SPEC.md §7; an SSE event left open is discarded, §15).
    ///
    /// # Errors
    ///
    /// Only what `on_message` returns.
    pub(crate) fn finish(mut self, on_message: OnMessage<'_>) -> io::Result<Outcome> {
        self.body.finish();
        self.drain(on_message)?;
        let decoder = self.body.decoder();
        Ok(Outcome {
            // A failure found outside the body decoder (`fail`) decides over its state.
            classification: match &self.failure {
                Some(failure) if self.body.outcome().is_clean() => failure.outcome(),
                _ => self.body.outcome(),
            },
            head: decoder.head(),
            progress: decoder.progress(),
            failure: self.failure,
            messages: self.messages,
            input_bytes: self.input_bytes,
            first_bytes: self.first_bytes,
            mapping: self.body.mapping(),
            require_sentinel: self.require_sentinel,
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
            Status::of(
                self.failure.as_ref(),
                &self.classification,
                self.require_sentinel,
            )
        }
    }

    fn not_framed(&self) -> bool {
        let start = &self.first_bytes[..self.first_bytes.len().min(2)];
        self.mapping == Mapping::Binary
            && matches!(
                self.failure,
                Some(BodyError::Decode(DecodeError::Truncated { .. }))
            )
            && !start.is_empty()
            && !MAGIC.starts_with(start)
    }

    /// A hint for a body given with the wrong `--mapping`.
    fn mapping_hint(&self) -> &'static str {
        let unframed = self.not_framed()
            || matches!(
                self.failure,
                Some(BodyError::Decode(DecodeError::BadMagic { offset: 0, .. }))
            );
        let start = self.first_bytes.strip_prefix(b"\xef\xbb\xbf");
        let start = start.unwrap_or(&self.first_bytes);
        if self.mapping != Mapping::Binary || !unframed || !looks_like_sse(start) {
            ""
        } else if RECORD_PREFIX.as_bytes().starts_with(start) {
            // The bytes kept (`FIRST_BYTES`) are a prefix of a record line.
            " (this looks like the compatible SSE mapping: try --mapping compat)"
        } else {
            " (this looks like an SSE body: try --mapping sse or --mapping compat)"
        }
    }

    /// The verdict in one line (for stderr); a clean one names its regime and whether the
    /// sentinel was seen (SPEC.md §9).
    pub(crate) fn line(&self) -> String {
        let status = self.status();
        let verified = plural(self.messages.len() as u64, "message");
        let body = match &self.failure {
            None => {
                let counts = format!(
                    "{verified} verified, {}, {}",
                    plural(self.progress.frames, "frame"),
                    plural(self.input_bytes, "byte")
                );
                let regime = self.classification.regime.name();
                if self.classification.sentinel_seen {
                    format!("{counts}; regime {regime}, sentinel seen")
                } else {
                    let required = if status == Status::SentinelMissing {
                        " (--require-sentinel)"
                    } else {
                        ""
                    };
                    format!(
                        "the final response verified, then the input ended before the \
                         STREAM_END sentinel (SPEC.md §7 row 4); {counts}; regime {regime}, \
                         sentinel not seen{required}"
                    )
                }
            }
            Some(BodyError::Decode(DecodeError::PeerAbort(abort))) => {
                format!("the peer aborted the stream ({abort}); {verified} verified before")
            }
            Some(BodyError::Decode(DecodeError::Truncated { at, .. })) if self.not_framed() => {
                format!(
                    "not an mcp-framing stream: the input starts with {}, not the magic 9f 4d \
                     (the decoder reports: stream truncated {at})",
                    hex(&self.first_bytes[..self.first_bytes.len().min(2)])
                )
            }
            Some(BodyError::Decode(DecodeError::Truncated { at, progress })) => format!(
                "stream truncated {at}: {}, {} received; {verified} verified before",
                plural(progress.frames, "frame"),
                plural(progress.bytes, "byte"),
            ),
            Some(failure) => format!("{failure} ({}); {verified} verified before", failure.kind()),
        };
        format!("{}: {body}{}", status.name(), self.mapping_hint())
    }

    /// The verdict for machines; `verdict`, `sentinel_seen`, `regime`, `error`, `truncation` and
    /// `abort` use the names of `tests/vectors/manifest.json`.
    pub(crate) fn to_json(&self) -> Value {
        let status = self.status();
        let (verdict, truncation, abort) = match &self.failure {
            None => ("clean", Value::Null, Value::Null),
            Some(BodyError::Decode(DecodeError::PeerAbort(a))) => (
                "aborted",
                Value::Null,
                json!({"code": u16::from(a.code), "reason": a.reason}),
            ),
            Some(BodyError::Decode(DecodeError::Truncated { at, .. })) => {
                ("error", json!(at.kind()), Value::Null)
            }
            Some(_) => ("error", Value::Null, Value::Null),
        };
        json!({
            "status": status.name(),
            "exit_code": status.exit_code(),
            "verdict": verdict,
            "sentinel_seen": self.classification.sentinel_seen,
            "regime": self.classification.regime.name(),
            "error": self.failure.as_ref().map(BodyError::kind),
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
