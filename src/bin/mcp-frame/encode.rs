//! `encode`: bytes or JSON messages in, a framed stream out.

use std::io::{Read, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use bytes::BytesMut;
use clap::Args;
use mcp_framing::internals::body::{CompatEncodeError, MappingEncoder};
use mcp_framing::{
    AttemptId, EncodeError, RequestKey, StreamEncoder, StreamHead,
    internals::limits::{DEFAULT_FRAME_SIZE, DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE},
    mapping::Mapping,
};
use serde::de::IgnoredAny;

use crate::CliError;
use crate::input::{InputPath, MappingArgs, open_output};

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
    let mapping = args.mapping.mapping;
    if mapping == Mapping::Compat && args.chunk.is_some() {
        return Err(CliError::Usage(
            "--chunk does not apply to --mapping compat: an event carries a whole message".into(),
        ));
    }
    let mut sink = Sink {
        encoder: MappingEncoder::new(mapping, encoder),
        out: open_output(args.output.as_deref(), mapping == Mapping::Binary)?,
        buf: BytesMut::new(),
        output_name,
        piece: args.chunk.map_or(args.frame_size, NonZeroUsize::get),
    };
    sink.encoder.open(&mut sink.buf).map_err(encode_bug)?;
    let last = match messages {
        Some(messages) => {
            for (i, message) in messages.iter().enumerate() {
                sink.message(Some(i), message, i + 1 == messages.len())?;
            }
            messages.len().checked_sub(1)
        }
        None => {
            sink.stream_message(&input)?;
            None
        }
    };
    // In the compatible mapping the last message's record carries the sentinel (SPEC.md §18.4).
    if let Err(err) = sink.encoder.end(&mut sink.buf) {
        return Err(sink.refused(last, &err));
    }
    sink.flush()?;
    Ok(0)
}

/// An encoder error the CLI's own call order rules out.
fn encode_bug(err: impl std::fmt::Display) -> CliError {
    CliError::Usage(format!("encoder refused a call: {err}"))
}

/// Writes the body in its mapping as it is encoded: in the binary and SSE mappings each piece
/// goes out as it is pushed; in the compatible mapping (SPEC.md §18.4) each message is a record
/// and a `message` event once it is complete, the last record carrying STREAM_END. A message
/// over the limit, or one an event cannot carry unchanged, aborts the stream (ABORT code 5 or 1)
/// after the messages before it.
struct Sink {
    encoder: MappingEncoder,
    out: Box<dyn Write>,
    /// Body bytes not yet written.
    buf: BytesMut,
    output_name: String,
    piece: usize,
}

impl Sink {
    fn flush(&mut self) -> Result<(), CliError> {
        self.out
            .write_all(&self.buf)
            .and_then(|()| self.out.flush())
            .map_err(|e| CliError::io(format!("cannot write to {}", self.output_name), e))?;
        self.buf.clear();
        Ok(())
    }

    /// Aborts the stream as `err` calls for (SPEC.md §3.1: code 5 for a message over the limit)
    /// and writes it; the error to report, naming message `index` if known.
    fn refused(&mut self, index: Option<usize>, err: &CompatEncodeError) -> CliError {
        let Some(code) = self.encoder.fail(err, &mut self.buf) else {
            return encode_bug(err);
        };
        if let Err(write) = self.flush() {
            return write;
        }
        let at = index.map_or_else(String::new, |i| format!("message {i}: "));
        let hint = match err {
            CompatEncodeError::Encode(EncodeError::MessageTooLarge { .. }) => {
                " (--max-message-size)"
            }
            _ => "",
        };
        CliError::Usage(format!(
            "{at}{err}{hint}; the stream was aborted with code {}",
            u16::from(code)
        ))
    }

    /// Pushes one piece of message `index`.
    fn push(&mut self, index: Option<usize>, piece: &[u8]) -> Result<(), CliError> {
        match self.encoder.push(piece, &mut self.buf) {
            Ok(()) => self.flush(),
            Err(err) => Err(self.refused(index, &err)),
        }
    }

    /// Finishes message `index`; one that is not the `last` is written at once, the last one
    /// with the end.
    fn finish(&mut self, index: Option<usize>, last: bool) -> Result<(), CliError> {
        let finished = self.encoder.finish_message(&mut self.buf);
        let written = finished.and_then(|()| {
            if last {
                Ok(())
            } else {
                self.encoder.flush(&mut self.buf)
            }
        });
        match written {
            Ok(()) => self.flush(),
            Err(err) => Err(self.refused(index, &err)),
        }
    }

    fn message(
        &mut self,
        index: Option<usize>,
        message: &[u8],
        last: bool,
    ) -> Result<(), CliError> {
        for piece in message.chunks(self.piece) {
            self.push(index, piece)?;
        }
        self.finish(index, last)
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
                self.push(None, &piece[..n])?;
            }
            if n < piece.len() {
                break;
            }
        }
        self.finish(None, true)
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
