//! `inspect`: a table of the frames of a capture, as far as they can be parsed, with the
//! decoder's verdict and the frame where it stopped.

use bytes::BytesMut;
use clap::Args;
use mcp_framing::internals::frame::{
    FrameHeader, HEADER_LEN, MAGIC, MessageEnd, PayloadError, StreamEnd, VERSION,
};
use mcp_framing::{
    Abort, AbortCode, BodyError, DecodeError, FrameKind, StreamHead,
    internals::body::MappingDecoder, mapping::Mapping,
};
use serde_json::{Value, json};

use crate::CliError;
use crate::input::{InputPath, StreamArgs, hex};
use crate::verdict::Session;

/// Options of `inspect`.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The stream (with `--mapping sse`, the frames of the `mcp-frame` events are listed).
    #[command(flatten)]
    stream: StreamArgs,
    /// Print the frames and the verdict as one JSON object.
    #[arg(long)]
    json: bool,
}

/// One frame as found in the input, checked only for its own checksums.
#[derive(Debug)]
struct Row {
    offset: usize,
    kind: u8,
    version: u8,
    sequence: u32,
    length: u32,
    header_crc_ok: bool,
    /// `None`: the payload is cut off by the end of the input.
    payload_crc_ok: Option<bool>,
    /// Payload bytes present.
    present: usize,
    info: String,
    /// What the decoder said about this frame.
    decoder: RowStatus,
}

/// The decoder's view of one listed frame.
#[derive(Debug)]
enum RowStatus {
    /// The decoder stopped before this frame.
    NotReached,
    /// Accepted.
    Ok,
    /// Header accepted, the input ended inside the payload.
    Cut,
    /// The decoder's first error came from this frame.
    Error(String),
}

impl RowStatus {
    fn label(&self) -> &str {
        match self {
            Self::NotReached => "not reached",
            Self::Ok => "ok",
            Self::Cut => "cut",
            Self::Error(err) => err,
        }
    }
}

impl Row {
    fn end(&self) -> usize {
        self.offset + HEADER_LEN + self.present
    }
}

/// Where the frame listing ended, when it ended before the input did.
#[derive(Debug)]
struct Tail {
    offset: usize,
    what: String,
}

fn kind_label(kind: u8) -> String {
    match FrameKind::from_byte(kind) {
        Some(FrameKind::Ignorable(b)) => format!("EXT(0x{b:02x})"),
        Some(k) => k.name().to_owned(),
        None => format!("UNKNOWN(0x{kind:02x})"),
    }
}

/// Printable preview of message bytes.
fn preview(bytes: &[u8], max: usize) -> String {
    let mut out = String::new();
    for &b in bytes.iter().take(max) {
        match b {
            b'"' => out.push('"'),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > max {
        out.push('…');
    }
    out
}

/// What the walker knows of messages, to describe DATA frames (not verified: the decoder does).
#[derive(Default)]
struct WalkState {
    message: u64,
    message_offset: u64,
    previous_sequence: Option<u32>,
}

fn describe(kind: u8, payload: &[u8], state: &mut WalkState) -> String {
    let unexpected = || format!("unexpected payload length {}", payload.len());
    match FrameKind::from_byte(kind) {
        Some(FrameKind::Head) => StreamHead::load(payload).map_or_else(
            |_| unexpected(),
            |head| {
                let key = head
                    .request_key
                    .map_or_else(|| "none".to_owned(), |key| hex(key.as_bytes()));
                format!(
                    "request key {key}, attempt {}",
                    hex(head.attempt_id.as_bytes())
                )
            },
        ),
        Some(FrameKind::Data) => {
            let info = format!(
                "message {} bytes {}..{}: {}",
                state.message,
                state.message_offset,
                state.message_offset + payload.len() as u64,
                preview(payload, 32)
            );
            state.message_offset += payload.len() as u64;
            info
        }
        Some(FrameKind::MessageEnd) => MessageEnd::load(payload).map_or_else(
            |_| unexpected(),
            |end| {
                let info = format!(
                    "message {} ends: {} bytes, sha256 {}…",
                    state.message,
                    end.len,
                    hex(&end.sha256[..8])
                );
                state.message += 1;
                state.message_offset = 0;
                info
            },
        ),
        Some(FrameKind::StreamEnd) => StreamEnd::load(payload).map_or_else(
            |_| unexpected(),
            |end| format!("sentinel, message count {}", end.messages),
        ),
        Some(FrameKind::Abort) => {
            // Shown through `Abort`'s Display: the peer-chosen reason, control characters escaped.
            let abort = match Abort::load(payload) {
                Ok(abort) => abort,
                Err(PayloadError::AbortReasonNotUtf8) => Abort::new(
                    AbortCode::from(u16::from_be_bytes([payload[0], payload[1]])),
                    String::from_utf8_lossy(&payload[2..]),
                ),
                Err(_) => return unexpected(),
            };
            format!("abort {}: {abort}", u16::from(abort.code))
        }
        Some(FrameKind::KeepAlive) => "keep-alive".to_owned(),
        Some(FrameKind::Ignorable(_)) => "extension frame, skipped".to_owned(),
        None => "unknown kind".to_owned(),
        Some(_) => unexpected(),
    }
}

/// Lists frames until the input ends or no frame header can be found.
fn walk(data: &[u8]) -> (Vec<Row>, Option<Tail>) {
    let mut rows = Vec::new();
    let mut state = WalkState::default();
    let mut at = 0;
    while at < data.len() {
        let rest = &data[at..];
        if rest.len() < HEADER_LEN {
            let what = if rest.starts_with(&MAGIC[..rest.len().min(2)]) {
                format!(
                    "input ends inside a frame header ({} of 20 bytes)",
                    rest.len()
                )
            } else {
                format!(
                    "{} bytes that are not a frame header: {}",
                    rest.len(),
                    preview(rest, 16)
                )
            };
            return (rows, Some(Tail { offset: at, what }));
        }
        let Some(raw) = rest
            .first_chunk::<HEADER_LEN>()
            .filter(|raw| raw[..2] == MAGIC)
        else {
            let what = format!(
                "no frame header here ({} bytes left): {}",
                rest.len(),
                preview(rest, 16)
            );
            return (rows, Some(Tail { offset: at, what }));
        };
        let header = FrameHeader::read(raw);
        let (length, sequence) = (header.len, header.sequence);
        let available = rest.len() - HEADER_LEN;
        let present = usize::try_from(length).map_or(available, |l| l.min(available));
        let payload = &rest[HEADER_LEN..HEADER_LEN + present];
        let complete = present as u64 == u64::from(length);
        let header_crc_ok = FrameHeader::header_crc_ok(raw);
        let payload_crc_ok = complete.then(|| header.payload_crc_ok(payload));
        let mut info = if payload_crc_ok == Some(true) {
            describe(rest[3], payload, &mut state)
        } else if complete {
            "payload checksum mismatch".to_owned()
        } else {
            let what = format!("input ends inside the payload ({present} of {length} bytes)");
            if rest[3] == FrameKind::Data.to_byte() {
                format!("message {}: {what}", state.message)
            } else {
                what
            }
        };
        if let Some(prev) = state.previous_sequence {
            let expected = prev.wrapping_add(1);
            if sequence != expected {
                info.push_str(&format!(" [sequence expected {expected:#010x}]"));
            }
        }
        if !header_crc_ok {
            info.push_str(" [header corrupt: length unreliable]");
        }
        state.previous_sequence = Some(sequence);
        rows.push(Row {
            offset: at,
            kind: rest[3],
            version: rest[2],
            sequence,
            length,
            header_crc_ok,
            payload_crc_ok,
            present,
            info,
            decoder: RowStatus::NotReached,
        });
        at += HEADER_LEN + present;
    }
    (rows, None)
}

/// The frame bytes an SSE body carries, up to its first mapping error (SPEC.md §15, §18).
struct EventFrames {
    frames: Vec<u8>,
    /// What the body carried (events, records).
    carried: String,
    error: Option<BodyError>,
}

fn event_frames(body: &[u8], mut decoder: MappingDecoder) -> EventFrames {
    let mut frames = BytesMut::new();
    // On an error, the frames handed over before the failing line are kept (body order).
    let error = decoder.feed(body, &mut frames).err();
    decoder.finish();
    let carried = match &decoder {
        MappingDecoder::Sse(sse) => format!("{} mcp-frame events", sse.frame_events()),
        MappingDecoder::Compat(compat) => format!(
            "{} framing records, {} message events",
            compat.records(),
            compat.message_events()
        ),
        _ => String::new(),
    };
    EventFrames {
        frames: frames.to_vec(),
        carried,
        error,
    }
}

/// `inspect`.
///
/// # Errors
///
/// Reading the input failed.
pub(crate) fn run(args: &InspectArgs) -> Result<u8, CliError> {
    let input = InputPath::from(args.stream.input.as_path());
    let body = input.read_all()?;
    let decoder = args.stream.decoder.decoder();
    let mapping = args.stream.mapping.mapping;
    let sse = (mapping != Mapping::Binary).then(|| {
        let max_event_data = args.stream.decoder.max_event_data;
        event_frames(
            &body,
            MappingDecoder::new(mapping, decoder.limits(), max_event_data),
        )
    });
    let data = sse.as_ref().map_or(&body[..], |s| &s.frames[..]);
    let (mut rows, tail) = walk(data);
    // Feed the decoder frame by frame so that its first error points at a frame.
    let require_sentinel = args.stream.decoder.require_sentinel;
    let mut session = Session::new(decoder, Mapping::Binary, None, require_sentinel);
    let mut no_output = |_: &mcp_framing::VerifiedMessage| Ok(());
    let mut fed = 0;
    let mut stopped_in_tail = None;
    for row in &mut rows {
        if session.failure().is_some() {
            break;
        }
        feed(&mut session, &data[row.offset..row.end()]);
        fed = row.end();
        row.decoder = match session.failure() {
            Some(failure) => RowStatus::Error(describe_failure(failure)),
            None if row.payload_crc_ok.is_none() => RowStatus::Cut,
            None => RowStatus::Ok,
        };
    }
    if session.failure().is_none() && fed < data.len() {
        feed(&mut session, &data[fed..]);
        stopped_in_tail = session.failure().map(describe_failure);
    }
    if let Some(err) = sse.as_ref().and_then(|s| s.error.clone()) {
        session.fail(err);
    }
    let mut outcome = session
        .finish(&mut no_output)
        .map_err(|e| CliError::io("cannot decode", e))?;
    if sse.is_some() {
        outcome.mapping = mapping;
        outcome.input_bytes = body.len() as u64;
    }
    let eof_error = match (&outcome.failure, &stopped_in_tail) {
        (
            Some(
                failure @ BodyError::Decode(
                    DecodeError::Truncated { .. } | DecodeError::PeerAbort(_),
                ),
            ),
            None,
        ) => Some(describe_failure(failure)),
        // SPEC.md §7 row 4: what the end of input decided, though it is no error.
        (None, _) if !outcome.classification.sentinel_seen => Some(
            "Delivered: the final response verified, then the end of input before STREAM_END \
             (clean in Regime B)"
                .to_owned(),
        ),
        _ => None,
    };
    let sse_note = sse.as_ref().map(|s| {
        let name = mapping.name();
        match &s.error {
            Some(err) => format!(
                "{name} body of {} bytes: {}, then {} ({err}); offsets are in the decoded frame \
                 bytes",
                body.len(),
                s.carried,
                err.kind()
            ),
            None => format!(
                "{name} body of {} bytes: {}; offsets are in the decoded frame bytes",
                body.len(),
                s.carried
            ),
        }
    });
    if args.json {
        let frames: Vec<Value> = rows.iter().map(row_json).collect();
        println!(
            "{}",
            json!({
                "frames": frames,
                "tail": tail.as_ref().map(|t| json!({"offset": t.offset, "note": t.what})),
                "decoder_stopped_in_tail": stopped_in_tail,
                "end_of_input": eof_error,
                "sse": sse.as_ref().map(|s| json!({
                    "carried": s.carried,
                    "error": s.error.as_ref().map(BodyError::kind),
                    "note": sse_note,
                })),
                "verdict": outcome.to_json(),
            })
        );
    } else {
        if let Some(note) = &sse_note {
            println!("{note}");
        }
        print_table(&rows, tail.as_ref(), stopped_in_tail.as_deref());
        println!("verdict: {}", outcome.line());
    }
    Ok(outcome.status().exit_code())
}

/// Feeds `bytes` (already frame bytes) to a session that writes nothing out.
fn feed(session: &mut Session, bytes: &[u8]) {
    // Writing a message is the only way `feed` fails, and this session writes none.
    let _ = session.feed(bytes, &mut |_| Ok(()));
}

fn describe_failure(failure: &BodyError) -> String {
    format!("{}: {failure}", failure.kind())
}

fn row_json(row: &Row) -> Value {
    json!({
        "offset": row.offset,
        "kind": kind_label(row.kind),
        "kind_byte": row.kind,
        "version": row.version,
        "sequence": row.sequence,
        "length": row.length,
        "header_crc_ok": row.header_crc_ok,
        "payload_crc_ok": row.payload_crc_ok,
        "payload_present": row.present,
        "info": row.info,
        "decoder": row.decoder.label(),
    })
}

fn print_table(rows: &[Row], tail: Option<&Tail>, stopped_in_tail: Option<&str>) {
    println!(
        "{:>8}  {:<12} {:<10} {:>8}  {:<4} {:<4} {:<7} info",
        "offset", "kind", "sequence", "length", "hcrc", "pcrc", "decoder"
    );
    for row in rows {
        let ok = |b: bool| if b { "ok" } else { "BAD" };
        let (decoder, error) = match &row.decoder {
            RowStatus::Error(err) => ("ERROR", Some(err)),
            RowStatus::NotReached => ("-", None),
            other => (other.label(), None),
        };
        let kind = if row.version == VERSION {
            kind_label(row.kind)
        } else {
            format!("v{}:{}", row.version, kind_label(row.kind))
        };
        println!(
            "{:>8}  {:<12} {:#010x} {:>8}  {:<4} {:<4} {:<7} {}",
            row.offset,
            kind,
            row.sequence,
            row.length,
            ok(row.header_crc_ok),
            row.payload_crc_ok.map_or("cut", ok),
            decoder,
            row.info
        );
        if let Some(err) = error {
            println!("{:>8}  ^ the decoder stopped here: {err}", "");
        }
    }
    if let Some(tail) = tail {
        println!("{:>8}  {}", tail.offset, tail.what);
    }
    if let Some(err) = stopped_in_tail {
        println!("{:>8}  ^ the decoder stopped here: {err}", "");
    }
}
