//! `encode`: bytes or JSON messages in, a framed stream out.

use std::io::{Read, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use bytes::BytesMut;
use clap::Args;
use mcp_framing::{
    AbortCode, AttemptId, DEFAULT_FRAME_SIZE, DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE,
    EncodeError, RequestKey, StreamEncoder, StreamHead,
};
use serde::de::IgnoredAny;

use crate::CliError;
use crate::input::{InputPath, MappingArgs, open_output};
use mcp_framing::Mapping;
use mcp_framing::sse::SseFrameEncoder;
use mcp_framing::sse_compat::{CompatEncodeError, CompatEncoder};

/// Options of `encode`.
#[derive(Debug, Args)]
pub(crate) struct EncodeArgs {
    /// The message bytes: a file, or `-` for stdin. Without `--json`/`--lines` the whole input is
    /// one message.
    #[arg(default_value = "-")]
    input: PathBuf,
    /// Write the stream to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The input is JSON: each JSON value (or each line with `--lines`) is one message, checked
    /// and minified (whitespace outside strings removed; numbers and strings kept as written).
    #[arg(long)]
    json: bool,
    /// Each non-empty line is one message (without its line ending).
    #[arg(long)]
    lines: bool,
    /// Largest DATA payload written, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_FRAME_SIZE,
          value_parser = parse_frame_size)]
    frame_size: usize,
    /// Push each message into the encoder in pieces of this many bytes, as a streaming producer
    /// would (each piece becomes its own DATA frames).
    #[arg(long, value_name = "BYTES")]
    chunk: Option<NonZeroUsize>,
    /// The request key to echo in HEAD (32 hex digits); none by default.
    #[arg(long, value_name = "HEX")]
    request_key: Option<RequestKey>,
    /// The attempt id (32 hex digits), which also sets the first sequence number; random by
    /// default.
    #[arg(long, value_name = "HEX")]
    attempt_id: Option<AttemptId>,
    /// Largest message accepted, in bytes; a larger one aborts the stream (ABORT code 5).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE)]
    max_message_size: u64,
    #[command(flatten)]
    mapping: MappingArgs,
}

fn parse_frame_size(s: &str) -> Result<usize, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a frame size in 1..=4294967295"))?;
    if n == 0 {
        return Err("the frame size must be at least 1".into());
    }
    usize::try_from(n).map_err(|_| format!("`{s}` does not fit this platform"))
}

/// `encode`.
///
/// # Errors
///
/// Unreadable input, invalid JSON (nothing is written then), a message over the limit (the
/// stream is aborted with code 5), or a failed write.
pub(crate) fn run(args: &EncodeArgs) -> Result<u8, CliError> {
    if args.frame_size > DEFAULT_MAX_FRAME_PAYLOAD as usize {
        eprintln!(
            "mcp-frame: warning: frames of {} bytes exceed the default receiver limit of {} bytes",
            args.frame_size, DEFAULT_MAX_FRAME_PAYLOAD
        );
    }
    let input = InputPath::from(args.input.as_path());
    let head = StreamHead {
        request_key: args.request_key,
        attempt_id: args.attempt_id.unwrap_or_else(AttemptId::random),
    };
    let encoder = StreamEncoder::builder()
        .frame_size(args.frame_size)
        .max_message_size(args.max_message_size)
        .build(head);
    // Validate JSON input completely before writing anything.
    let messages = if args.json || args.lines {
        Some(split_messages(&input.read_all()?, args.json, args.lines)?)
    } else {
        None
    };
    let output_name = args
        .output
        .as_ref()
        .map_or_else(|| "stdout".to_owned(), |p| p.display().to_string());
    if args.mapping.mapping == Mapping::Compat {
        if args.chunk.is_some() {
            return Err(CliError::Usage(
                "--chunk does not apply to --mapping compat: an event carries a whole message"
                    .into(),
            ));
        }
        let messages = match messages {
            Some(messages) => messages,
            None => vec![input.read_all()?],
        };
        let out = open_output(args.output.as_deref(), false)?;
        return write_compat(encoder, &messages, out, &output_name);
    }
    let out = open_output(
        args.output.as_deref(),
        args.mapping.mapping == Mapping::Binary,
    )?;
    let mut sink = Sink {
        encoder,
        out,
        sse: (args.mapping.mapping == Mapping::Sse)
            .then(|| (SseFrameEncoder::new(), BytesMut::new())),
        buf: BytesMut::new(),
        output_name,
        piece: args.chunk.map_or(args.frame_size, NonZeroUsize::get),
    };
    sink.encoder.open(&mut sink.buf).map_err(encode_bug)?;
    match messages {
        Some(messages) => {
            for message in &messages {
                sink.message(message)?;
            }
        }
        None => sink.stream_message(&input)?,
    }
    sink.encoder.end(&mut sink.buf).map_err(encode_bug)?;
    sink.flush()?;
    Ok(0)
}

/// The compatible SSE mapping (SPEC.md §18.4): per message a record and a `message` event, the
/// last record carrying STREAM_END. A message an event cannot carry unchanged, or one over the
/// limit, aborts the stream (ABORT code 1 or 5) after the messages before it.
fn write_compat(
    encoder: StreamEncoder,
    messages: &[Vec<u8>],
    mut out: Box<dyn Write>,
    output_name: &str,
) -> Result<u8, CliError> {
    let mut compat = CompatEncoder::new(encoder);
    let mut body = BytesMut::new();
    let mut failure = None;
    for (i, message) in messages.iter().enumerate() {
        let written = if i + 1 == messages.len() {
            compat.final_message(message, &mut body)
        } else {
            compat.message(message, &mut body)
        };
        match written {
            Ok(_) => {}
            Err(CompatEncodeError::Encode(EncodeError::MessageTooLarge { len, max })) => {
                failure = Some((
                    AbortCode::MessageTooLarge,
                    format!("message of at least {len} bytes exceeds {max} (--max-message-size)"),
                ));
                break;
            }
            Err(err @ CompatEncodeError::Encode(_)) => {
                return Err(CliError::Usage(format!("encoder refused a call: {err}")));
            }
            Err(err) => {
                failure = Some((AbortCode::InternalError, format!("message {i}: {err}")));
                break;
            }
        }
    }
    if let Some((code, reason)) = &failure {
        compat
            .abort(*code, reason, &mut body)
            .map_err(|e| CliError::Usage(format!("encoder refused a call: {e}")))?;
    } else if !compat.is_finished() {
        compat
            .end(&mut body)
            .map_err(|e| CliError::Usage(format!("encoder refused a call: {e}")))?;
    }
    out.write_all(&body)
        .and_then(|()| out.flush())
        .map_err(|e| CliError::io(format!("cannot write to {output_name}"), e))?;
    match failure {
        Some((code, reason)) => Err(CliError::Usage(format!(
            "{reason}; the stream was aborted with code {}",
            u16::from(code)
        ))),
        None => Ok(0),
    }
}

/// An encoder error the CLI's own call order rules out.
fn encode_bug(err: EncodeError) -> CliError {
    CliError::Usage(format!("encoder refused a call: {err}"))
}

struct Sink {
    encoder: StreamEncoder,
    out: Box<dyn Write>,
    /// For the SSE mapping: the event encoder and its output buffer.
    sse: Option<(SseFrameEncoder, BytesMut)>,
    /// Whole frames not yet written.
    buf: BytesMut,
    output_name: String,
    piece: usize,
}

impl Sink {
    fn flush(&mut self) -> Result<(), CliError> {
        let bytes = match &mut self.sse {
            Some((encoder, events)) => {
                events.clear();
                encoder.encode(&self.buf, events); // one event per frame (SPEC.md §15)
                &events[..]
            }
            None => &self.buf[..],
        };
        self.out
            .write_all(bytes)
            .and_then(|()| self.out.flush())
            .map_err(|e| CliError::io(format!("cannot write to {}", self.output_name), e))?;
        self.buf.clear();
        Ok(())
    }

    /// Pushes one piece; a message over the limit aborts the stream (SPEC.md §3 ABORT code 5).
    fn push(&mut self, piece: &[u8]) -> Result<(), CliError> {
        match self.encoder.push(piece, &mut self.buf) {
            Ok(()) => self.flush(),
            Err(EncodeError::MessageTooLarge { len, max }) => {
                let reason = format!("message of at least {len} bytes exceeds {max}");
                self.encoder
                    .abort(AbortCode::MessageTooLarge, &reason, &mut self.buf)
                    .map_err(encode_bug)?;
                self.flush()?;
                Err(CliError::Usage(format!(
                    "{reason} (--max-message-size); the stream was aborted with code 5"
                )))
            }
            Err(err) => Err(encode_bug(err)),
        }
    }

    fn message(&mut self, message: &[u8]) -> Result<(), CliError> {
        for piece in message.chunks(self.piece) {
            self.push(piece)?;
        }
        self.encoder
            .finish_message(&mut self.buf)
            .map_err(encode_bug)?;
        self.flush()
    }

    /// The whole input is one message, pushed in pieces as it is read (a stream from a pipe is
    /// framed as it arrives).
    fn stream_message(&mut self, input: &InputPath) -> Result<(), CliError> {
        let mut reader = input.open()?;
        let mut piece = vec![0u8; self.piece];
        loop {
            let n = read_full(&mut reader, &mut piece)
                .map_err(|e| CliError::io(format!("cannot read {}", input.name()), e))?;
            if n > 0 {
                self.push(&piece[..n])?;
            }
            if n < piece.len() {
                break;
            }
        }
        self.encoder
            .finish_message(&mut self.buf)
            .map_err(encode_bug)?;
        self.flush()
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Splits the input into messages: JSON values, lines, or JSON lines.
fn split_messages(input: &[u8], json: bool, lines: bool) -> Result<Vec<Vec<u8>>, CliError> {
    if lines {
        let mut out = Vec::new();
        for (i, line) in input.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if json {
                let values = json_values(line)
                    .map_err(|e| CliError::Usage(format!("line {}: invalid JSON: {e}", i + 1)))?;
                if values.len() != 1 {
                    return Err(CliError::Usage(format!(
                        "line {}: expected one JSON value, found {}",
                        i + 1,
                        values.len()
                    )));
                }
                out.extend(values);
            } else {
                out.push(line.to_vec());
            }
        }
        Ok(out)
    } else {
        json_values(input).map_err(|e| CliError::Usage(format!("invalid JSON: {e}")))
    }
}

/// Every JSON value in `input` (separated by whitespace), each minified.
fn json_values(input: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    // serde_json does not check UTF-8 inside strings it skips; JSON text must be UTF-8.
    std::str::from_utf8(input).map_err(|e| format!("not UTF-8 ({e})"))?;
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(input).into_iter::<IgnoredAny>();
    let mut start = 0;
    while let Some(value) = stream.next() {
        value.map_err(|e| e.to_string())?;
        let end = stream.byte_offset();
        values.push(minify(&input[start..end]));
        start = end;
    }
    Ok(values)
}

/// Removes the whitespace outside strings of one valid JSON text, keeping every token as written
/// (so numbers keep their exact digits).
fn minify(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}
