//! The layer's compatible-mapping body (SPEC.md §18): the inner server's SSE bytes pass through
//! unchanged, with a framing record written before each `message` event.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http_body::Body;

use super::is_final_response;
use crate::encoder::StreamEncoder;
use crate::error::EncodeError;
use crate::event::AbortCode;
use crate::frame::MAX_ABORT_REASON_LEN;
use crate::sse::{SseError, SseEvent, SseParser};
use crate::sse_compat::{CompatEncodeError, CompatEncoder};

/// Re-frames an inner SSE response body in the compatible mapping.
///
/// The inner bytes are cut into lines. A comment line outside an event (a keep-alive) goes out at
/// once as a record carrying a KEEPALIVE frame, a comment line to stock clients as before and a
/// frame to framing clients, whose idle timeout it restarts; the lines of an event are held until
/// its blank line, then go out unchanged, preceded by
/// the event's record when it is a `message` event with data (the record holds HEAD before the
/// first message, the DATA headers and MESSAGE_END, and STREAM_END after the final response).
/// After the final response the body ends. An inner body that fails or ends first, or a message
/// over the limit, ends the body with an ABORT record; the event being held is then dropped, so
/// no message reaches a stock client without its record.
pub(super) struct CompatPassthrough<B> {
    body: Pin<Box<B>>,
    encoder: CompatEncoder,
    parser: SseParser,
    events: Vec<SseEvent>,
    /// Bytes of a line whose end has not arrived.
    partial: BytesMut,
    /// The lines of the event being read (held until its blank line).
    block: BytesMut,
    /// The last line ended with CR: a following LF belongs to it.
    after_cr: bool,
    /// Bound on the bytes held (a line, an event's lines): the message limit and room for the
    /// field names, `id` lines and comments around the data.
    max_held: usize,
    done: bool,
}

impl<B> CompatPassthrough<B> {
    pub(super) fn new(body: B, encoder: StreamEncoder, max_message: usize) -> Self {
        Self {
            body: Box::pin(body),
            encoder: CompatEncoder::new(encoder),
            parser: SseParser::with_max_event_data(max_message),
            events: Vec::new(),
            partial: BytesMut::new(),
            block: BytesMut::new(),
            after_cr: false,
            max_held: crate::limits::compat_event_data_limit(max_message as u64),
            done: false,
        }
    }

    /// Ends the stream with an ABORT record.
    fn abort(&mut self, code: AbortCode, reason: &str, out: &mut BytesMut) {
        let mut end = reason.len().min(MAX_ABORT_REASON_LEN);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        // Fails only if the stream already ended: then there is nothing more to write.
        let _written = self.encoder.abort(code, &reason[..end], out).is_ok();
        self.done = true;
    }

    /// Handles the complete lines of `data`, writing what may go out to `out`.
    fn lines(&mut self, mut data: &[u8], out: &mut BytesMut) {
        while !data.is_empty() && !self.done {
            if self.after_cr {
                self.after_cr = false;
                if data[0] == b'\n' {
                    // The LF of a CRLF: it goes where its line went.
                    let _ = self.parser.feed(b"\n", &mut self.events);
                    if self.block.is_empty() {
                        out.extend_from_slice(b"\n");
                    } else {
                        self.block.extend_from_slice(b"\n");
                    }
                    data = &data[1..];
                    continue;
                }
            }
            let Some(end) = memchr::memchr2(b'\n', b'\r', data) else {
                self.partial.extend_from_slice(data);
                self.check_held(out);
                return;
            };
            self.after_cr = data[end] == b'\r';
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&data[..=end]);
            data = &data[end + 1..];
            self.line(&line, out);
        }
    }

    /// Ends the stream (ABORT, message too large) when the bytes held for a line or an event pass
    /// the bound: the parser bounds data lines, this also bounds lines and events it does not
    /// count (comments, `id` lines), so that the inner server cannot make the layer buffer more.
    fn check_held(&mut self, out: &mut BytesMut) {
        if self.partial.len() + self.block.len() > self.max_held {
            self.partial.clear();
            self.block.clear();
            let max = self.max_held;
            self.abort(
                AbortCode::MessageTooLarge,
                &format!("an inner event holds more than {max} bytes"),
                out,
            );
        }
    }

    /// One complete line, its terminator included.
    fn line(&mut self, line: &[u8], out: &mut BytesMut) {
        if let Err(err) = self.parser.feed(line, &mut self.events) {
            // A line or an event (one JSON-RPC message) over the message limit.
            let code = match err {
                SseError::EventTooLarge { .. } => AbortCode::MessageTooLarge,
                _ => AbortCode::InternalError,
            };
            self.abort(code, &format!("the response message: {err}"), out);
            return;
        }
        // A line ends at its first LF or CR (a CRLF's LF is handled in `lines`).
        let blank = line.len() == 1;
        if self.block.is_empty() && line.first() == Some(&b':') {
            // A keep-alive between events (rmcp's `:`), as a KEEPALIVE frame (SPEC.md §18.4).
            if let Err(err) = self.encoder.keep_alive(out) {
                self.abort(AbortCode::InternalError, &err.to_string(), out);
            }
            return;
        }
        self.block.extend_from_slice(line);
        if !blank {
            self.check_held(out);
            return;
        }
        // The blank line dispatched the event (if it had any field).
        let event = self.events.pop();
        self.events.clear();
        let block = self.block.split();
        match event {
            Some(event)
                if !event.data.is_empty()
                    && matches!(event.event.as_deref(), None | Some("message")) =>
            {
                let last = is_final_response(&event.data);
                match self
                    .encoder
                    .message_record(event.data.as_bytes(), last, out)
                {
                    Ok(_) => {
                        out.extend_from_slice(&block);
                        self.done = last;
                    }
                    Err(CompatEncodeError::Encode(err @ EncodeError::MessageTooLarge { .. })) => {
                        self.abort(AbortCode::MessageTooLarge, &err.to_string(), out);
                    }
                    Err(err) => self.abort(AbortCode::InternalError, &err.to_string(), out),
                }
            }
            // A priming event (`id` only), an event of another type: unchanged, unframed.
            _ => out.extend_from_slice(&block),
        }
    }
}

impl<B> Stream for CompatPassthrough<B>
where
    B: Body<Data = Bytes>,
    B::Error: fmt::Display,
{
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut out = BytesMut::new();
        while out.is_empty() && !this.done {
            match this.body.as_mut().poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.lines(&data, &mut out);
                    }
                }
                Poll::Ready(Some(Err(err))) => this.abort(
                    AbortCode::InternalError,
                    &format!("upstream body failed: {err}"),
                    &mut out,
                ),
                Poll::Ready(None) => this.abort(
                    AbortCode::InternalError,
                    "the upstream response stream ended before its final response",
                    &mut out,
                ),
            }
        }
        if out.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(Ok(out.freeze())))
        }
    }
}
