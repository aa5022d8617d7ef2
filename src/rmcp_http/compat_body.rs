//! The layer's compatible-mapping body (SPEC.md §18): the inner server's SSE bytes pass through
//! unchanged, with a framing record written before each `message` event.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http_body::Body;

use crate::encoder::StreamEncoder;
use crate::error::EncodeError;
use crate::event::AbortCode;
use crate::frame::MAX_ABORT_REASON_LEN;
use crate::jsonrpc::is_response;
use crate::sse::{LineSplitter, Piece, SseError, SseEvent, SseParser, is_message_event};
use crate::sse_compat::{CompatEncodeError, CompatEncoder};

/// Inner lines at least this long go out as they came (slices of the inner chunk, no copy);
/// shorter ones are copied into the piece being built, with the record before them, so that a
/// small event leaves as one piece.
const PASS_AS_IS: usize = 4096;

/// The byte order mark an SSE body may start with (WHATWG event-stream: skipped there only).
const BOM: &[u8] = "\u{feff}".as_bytes();

/// Re-frames an inner SSE response body in the compatible mapping.
///
/// The inner bytes are cut into lines once ([`LineSplitter`]), and each line is interpreted as SSE
/// does ([`SseParser::line`]). A comment line outside an event (a keep-alive) goes out at
/// once as a record carrying a KEEPALIVE frame, a comment line to stock clients as before and a
/// frame to framing clients, whose idle timeout it restarts; the lines of an event are held until
/// its blank line, then go out unchanged, preceded by
/// the event's record when it is a `message` event with data (the record holds HEAD before the
/// first message, the DATA headers and MESSAGE_END, and STREAM_END after the final response).
/// After the final response the body ends. An inner body that fails or ends first, or a message
/// over the limit, ends the body with an ABORT record; the event being held is then dropped, so
/// no message reaches a stock client without its record.
///
/// The event's lines are held as slices of the inner chunks and its data as slices of its `data`
/// lines: a message is neither copied nor validated as UTF-8 more than once on its way through
/// (issue 13 §5: a 1 MiB result was copied four times, into fresh buffers).
pub(super) struct CompatPassthrough<B> {
    body: Pin<Box<B>>,
    encoder: CompatEncoder,
    /// Cuts the inner bytes into lines.
    lines: LineSplitter,
    /// Interprets every line but the value of a `data` line, for which it gets `data:`: it
    /// decides as SSE does what the event's type is and when it is dispatched.
    parser: SseParser,
    events: Vec<SseEvent>,
    /// The lines of the event being read, as they came (held until its blank line).
    block: Vec<Bytes>,
    /// Bytes in `block`.
    block_len: usize,
    /// The values of the event's `data` lines (slices of its lines).
    values: Vec<Bytes>,
    /// Length of the event's data: its values joined with LF.
    data_len: usize,
    /// The next line is the body's first (the only one a BOM may start).
    at_start: bool,
    /// The message limit: bound on an event's data.
    max_message: usize,
    /// Bound on the bytes held (a line, an event's lines): the message limit and room for the
    /// field names, `id` lines and comments around the data.
    max_held: usize,
    /// What goes out, in order: the pieces in `ready`, then `building`.
    ready: VecDeque<Bytes>,
    building: BytesMut,
    done: bool,
}

impl<B> CompatPassthrough<B> {
    pub(super) fn new(body: B, encoder: StreamEncoder, max_message: usize) -> Self {
        Self {
            body: Box::pin(body),
            encoder: CompatEncoder::new(encoder),
            lines: LineSplitter::default(),
            // The layer sends a BOM on first and tells the parser nothing of it.
            parser: SseParser::with_max_event_data(max_message).past_start(),
            events: Vec::new(),
            block: Vec::new(),
            block_len: 0,
            values: Vec::new(),
            data_len: 0,
            at_start: true,
            max_message,
            max_held: crate::limits::compat_event_data_limit(max_message as u64),
            ready: VecDeque::new(),
            building: BytesMut::new(),
            done: false,
        }
    }

    /// Ends the stream with an ABORT record.
    fn abort(&mut self, code: AbortCode, reason: &str) {
        let mut end = reason.len().min(MAX_ABORT_REASON_LEN);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        // Fails only if the stream already ended: then there is nothing more to write.
        let _written = self
            .encoder
            .abort(code, &reason[..end], &mut self.building)
            .is_ok();
        self.done = true;
    }

    /// Sends `piece` after what was sent so far.
    fn send(&mut self, piece: Bytes) {
        if piece.len() < PASS_AS_IS {
            self.building.extend_from_slice(&piece);
        } else {
            if !self.building.is_empty() {
                self.ready.push_back(self.building.split().freeze());
            }
            self.ready.push_back(piece);
        }
    }

    /// Holds a line of the event being read.
    fn hold(&mut self, line: Bytes) {
        self.block_len += line.len();
        self.block.push(line);
    }

    /// Handles the complete lines of `data`, writing what may go out.
    fn lines(&mut self, data: Bytes) {
        let mut lines = std::mem::take(&mut self.lines);
        let mut at = 0;
        while !self.done {
            // The bound on what is held is `check_held`'s, for a line and its event together.
            let Ok(piece) = lines.next(&data, &mut at, usize::MAX) else {
                unreachable!("no line is longer than usize::MAX bytes")
            };
            match piece {
                Some(Piece::Line { start, end }) => {
                    self.line(data.slice(start..end), data.slice(end..=end));
                }
                Some(Piece::Joined { content, end }) => self.line(content, data.slice(end..=end)),
                Some(Piece::CrLf { at }) => {
                    // The LF of a CRLF: it goes where its line went.
                    let lf = data.slice(at..=at);
                    if self.block.is_empty() {
                        self.send(lf);
                    } else {
                        self.hold(lf);
                    }
                }
                None => {
                    if self.check_held(lines.pending()) {
                        lines.clear();
                    }
                    break;
                }
            }
        }
        self.lines = lines;
    }

    /// Ends the stream (ABORT, message too large) when the bytes held for a line or an event pass
    /// the bound: the data is bounded by the message limit, this also bounds lines and events
    /// it does not count (comments, `id` lines), so that the inner server cannot make the layer
    /// buffer more. `pending` is the bytes kept of a line whose end has not arrived. Returns whether it
    /// aborted.
    fn check_held(&mut self, pending: usize) -> bool {
        if pending + self.block_len > self.max_held {
            self.block.clear();
            self.values.clear();
            self.data_len = 0;
            let max = self.max_held;
            self.abort(
                AbortCode::MessageTooLarge,
                &format!("an inner event holds more than {max} bytes"),
            );
            return true;
        }
        false
    }

    /// One complete line: its content and its terminator (LF or CR).
    fn line(&mut self, mut content: Bytes, end: Bytes) {
        if std::mem::take(&mut self.at_start) && content.starts_with(BOM) {
            // A BOM stays first in the body, before the first record, where SSE skips it.
            let bom = content.split_to(BOM.len());
            self.send(bom);
        }
        let parsed = match data_value(&content) {
            Some(value) => {
                // The value stays in the line; the parser sees an empty `data` field in its place.
                let value = content.slice_ref(value);
                self.data_len += value.len() + usize::from(!self.values.is_empty());
                self.values.push(value);
                if self.data_len > self.max_message {
                    Err(SseError::EventTooLarge {
                        max: self.max_message,
                    })
                } else {
                    self.parser.line(b"data:", None, &mut self.events)
                }
            }
            None => self.parser.line(&content, None, &mut self.events),
        };
        if let Err(err) = parsed {
            // A line or an event (one JSON-RPC message) over the message limit.
            let code = match err {
                SseError::EventTooLarge { .. } => AbortCode::MessageTooLarge,
                _ => AbortCode::InternalError,
            };
            self.abort(code, &format!("the response message: {err}"));
            return;
        }
        let blank = content.is_empty();
        if self.block.is_empty() && content.first() == Some(&b':') {
            // A keep-alive between events (rmcp's `:`), as a KEEPALIVE frame (SPEC.md §18.4).
            if let Err(err) = self.encoder.keep_alive(&mut self.building) {
                self.abort(AbortCode::InternalError, &err.to_string());
            }
            return;
        }
        self.hold(content);
        self.hold(end);
        if !blank {
            self.check_held(0);
            return;
        }
        // The blank line dispatched the event (if it had any field).
        let event = self.events.pop();
        self.events.clear();
        let block = std::mem::take(&mut self.block);
        self.block_len = 0;
        let values = std::mem::take(&mut self.values);
        let data_len = std::mem::take(&mut self.data_len);
        match event {
            Some(event) if data_len > 0 && is_message_event(event.event.as_deref()) => {
                let data = event_data(&values, data_len);
                let last = is_response(&data);
                match self
                    .encoder
                    .text_message_record(&data, last, &mut self.building)
                {
                    Ok(_) => {
                        block.into_iter().for_each(|line| self.send(line));
                        self.done = last;
                    }
                    Err(CompatEncodeError::Encode(err @ EncodeError::MessageTooLarge { .. })) => {
                        self.abort(AbortCode::MessageTooLarge, &err.to_string());
                    }
                    Err(err) => self.abort(AbortCode::InternalError, &err.to_string()),
                }
            }
            // A priming event (`id` only), an event of another type: unchanged, unframed.
            _ => block.into_iter().for_each(|line| self.send(line)),
        }
    }
}

/// The value of a `data` line (without its end); `None` for a line of another field or a
/// comment.
fn data_value(line: &[u8]) -> Option<&[u8]> {
    match crate::sse::field(line) {
        (b"data", value) => Some(value),
        _ => None,
    }
}

/// The event's data as an SSE parser dispatches it: the values joined with LF, each decoded as
/// UTF-8 with replacement (as [`SseParser`] does line by line). Borrowed when it is one valid
/// value, the usual case (a JSON-RPC message on one line).
fn event_data(values: &[Bytes], len: usize) -> Cow<'_, str> {
    if let [value] = values {
        if let Ok(text) = std::str::from_utf8(value) {
            return Cow::Borrowed(text);
        }
    }
    let mut data = String::with_capacity(len);
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            data.push('\n');
        }
        data.push_str(&String::from_utf8_lossy(value));
    }
    Cow::Owned(data)
}

impl<B> Stream for CompatPassthrough<B>
where
    B: Body<Data = Bytes>,
    B::Error: fmt::Display,
{
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            // Everything one inner chunk produced goes out before the next chunk is read.
            if let Some(piece) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(piece)));
            }
            if !this.building.is_empty() {
                return Poll::Ready(Some(Ok(this.building.split().freeze())));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match this.body.as_mut().poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.lines(data);
                    }
                }
                Poll::Ready(Some(Err(err))) => this.abort(
                    AbortCode::InternalError,
                    &format!("upstream body failed: {err}"),
                ),
                Poll::Ready(None) => this.abort(
                    AbortCode::InternalError,
                    "the upstream response stream ended before its final response",
                ),
            }
        }
    }
}
