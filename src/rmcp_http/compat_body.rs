//! The layer's SSE pass-through: the inner server's SSE bytes go on unchanged, with a framing
//! record written before each `message` event in the compatible mapping (SPEC.md §18; the items
//! of a [`FramedBody`], which writes the records), and with the framing contract written into the
//! final response to a discovery request (§11.2).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http_body::Body;

use super::declare::{Declaration, unframeable};
use super::inner::{Failure, InnerBody, drain_rest};
use super::streamed::{STREAM_FROM, Streamed};
use crate::encoder::StreamEncoder;
use crate::http::FramedBody;
use crate::http::server_body::{Item, PassedEvent, gather};
use crate::mapping::Mapping;
use crate::mapping::compat::OpenRecord;
use crate::mapping::encoder::MappingEncoder;
use crate::mapping::sse::{
    LineSplitter, Parts, Piece, SseEvent, SseParser, data_value, is_message_event,
};
use crate::outgoing::Outgoing;

/// The byte order mark an SSE body may start with (WHATWG event-stream: skipped there only).
const BOM: &[u8] = "\u{feff}".as_bytes();

/// Passes an inner SSE response body on, event by event: re-framed in the compatible mapping
/// ([`compat`](Self::compat): the source of a [`FramedBody`], which writes each record and the
/// bytes passed on), or unframed with the contract declared ([`plain`](Self::plain)).
///
/// The inner bytes are cut into lines once ([`LineSplitter`]), and each line is interpreted as SSE
/// does ([`SseParser::line`]). The lines of an event are held until its blank line, then go out
/// unchanged, preceded in the compatible mapping by the event's record when it is a `message`
/// event with data (the record holds HEAD before the first message, the DATA headers and
/// MESSAGE_END, and STREAM_END after the final response); in the compatible mapping a comment
/// line outside an event (a keep-alive) goes out at once as a record carrying a KEEPALIVE frame,
/// a comment line to stock clients as before and a frame to framing clients, whose idle timeout
/// it restarts. The final response to a discovery request gets the framing contract written into
/// its result (SPEC.md §11.2): its `data` lines are written anew, the event's other lines stay.
///
/// In the compatible mapping the body ends after the final response; an inner body that fails or
/// ends first, or a message over the limit, ends it with an ABORT record, and the event being
/// held is then dropped, so no message reaches a stock client without its record. Unframed, the
/// body is the inner one: after the final response, or an event that cannot be read within the
/// bounds, the rest passes on unread, and an inner failure comes after the bytes before it.
///
/// The event's lines are held as slices of the inner chunks and its data as slices of its `data`
/// lines: a message is neither copied nor validated as UTF-8 more than once on its way through;
/// in the compatible mapping it is read and hashed as it arrives (`data_arriving`).
pub(super) struct SsePassthrough<B: Body> {
    /// The inner body; in the compatible mapping handed to [`drain_rest`] after the final
    /// response.
    body: Option<Pin<Box<B>>>,
    /// The compatible mapping (otherwise unframed).
    compat: bool,
    /// What goes out, in order (unframed: only bytes passed on).
    items: VecDeque<Item>,
    /// Writes the framing contract into the final response (a discovery request).
    declare: Option<Declaration>,
    /// Cuts the inner bytes into lines.
    lines: LineSplitter,
    /// Interprets every line but the value of a `data` line, for which it gets `data:`: it
    /// decides as SSE does what the event's type is and when it is dispatched.
    parser: SseParser,
    events: Vec<SseEvent>,
    /// The event being read.
    open: OpenEvent,
    /// The next line is the body's first (the only one a BOM may start).
    at_start: bool,
    /// The message limit: bound on an event's data.
    max_message: usize,
    /// Bound on the bytes held (a line, an event's lines): the message limit and room for the
    /// field names, `id` lines and comments around the data.
    max_held: usize,
    /// Unframed: the rest of the inner body passes on unread.
    transparent: bool,
    /// Unframed: the inner body's error, handed on after the bytes before it.
    failed: Option<B::Error>,
    /// The compatible mapping's final event went out (the body ends once its line end is: the
    /// LF of a CRLF may still come, first in the next chunk).
    finished: bool,
    /// A keep-alive comment that ended with CR went out as a record (which ends with its own
    /// LF): the LF of its CRLF, if it comes next, goes with the comment.
    comment_cr: bool,
    /// The id the final response must answer (compatible mapping).
    request_id: Option<serde_json::Value>,
    done: bool,
}

/// The event being read, held until its blank line.
#[derive(Default)]
struct OpenEvent {
    /// Its lines, as they came, each marked when it is part of a `data` line.
    block: Vec<(Bytes, bool)>,
    /// Bytes in `block`.
    block_len: usize,
    /// The values of its `data` lines (slices of its lines, as they were kept).
    values: Vec<Parts>,
    /// Length of its data: its values joined with LF.
    data_len: usize,
    /// Its first data line, while it arrives: how much of its value is UTF-8, and its JSON-RPC
    /// reading so far.
    streamed: Streamed,
    /// The record of its message, begun with its first bytes once they pass [`STREAM_FROM`]
    /// (compatible mapping): its frames' CRC-32 and the message's SHA-256 computed as the bytes
    /// arrive, so that after the last byte only the record and the event are left to write (the
    /// record goes first, SPEC.md §18.4).
    record: Option<OpenRecord>,
    /// Its record was refused as its bytes arrived: it is not begun again.
    record_refused: bool,
}

// No field is pinned but the inner body, which is boxed.
impl<B: Body> Unpin for SsePassthrough<B> {}

impl<B: Body> SsePassthrough<B> {
    /// Re-frames `body` in the compatible mapping with `encoder`, each event's data within
    /// `max_message` bytes. `request_id` is the id the final response must answer, when the
    /// request had one.
    pub(super) fn compat(
        body: B,
        encoder: StreamEncoder,
        max_message: usize,
        request_id: Option<serde_json::Value>,
    ) -> FramedBody<Self> {
        let mut passthrough = Self::new(body, true, max_message, None);
        passthrough.request_id = request_id;
        FramedBody::new(passthrough, encoder, Mapping::Compat)
    }

    /// Passes `body` on unframed, the final response declaring the contract (read within
    /// `max_message` bytes an event).
    pub(super) fn plain(body: B, max_message: usize, declare: Declaration) -> Plain<B> {
        Plain(Self::new(body, false, max_message, Some(declare)))
    }

    fn new(body: B, compat: bool, max_message: usize, declare: Option<Declaration>) -> Self {
        Self {
            body: Some(Box::pin(body)),
            compat,
            items: VecDeque::new(),
            declare,
            lines: LineSplitter::default(),
            // The pass-through sends a BOM on first and tells the parser nothing of it.
            parser: SseParser::with_max_event_data(max_message).past_start(),
            events: Vec::new(),
            open: OpenEvent::default(),
            at_start: true,
            max_message,
            max_held: crate::limits::compat_event_data_limit(max_message as u64),
            transparent: false,
            failed: None,
            finished: false,
            comment_cr: false,
            request_id: None,
            done: false,
        }
    }

    /// Stops reading events. In the compatible mapping the stream ends with the ABORT `failure`
    /// calls for and what is held is dropped; unframed, what is held goes out as it came and the
    /// rest passes on unread.
    fn give_up(&mut self, failure: Failure) {
        let held = std::mem::take(&mut self.open).block;
        if self.compat {
            let abort = failure.abort();
            self.items.push_back(Item::Out(Outgoing::Abort(abort)));
            self.done = true;
        } else {
            let reason = match failure {
                Failure::TooLarge { len, max } => {
                    format!("an event holds at least {len} bytes, over {max}")
                }
                Failure::Upstream(reason) | Failure::Internal(reason) => reason,
            };
            if let Some(declaration) = self.declare.take() {
                declaration.not_declared(&reason);
            }
            held.into_iter().for_each(|(piece, _)| self.send(piece));
            self.transparent = true;
        }
    }

    /// Sends `piece` after what was sent so far.
    fn send(&mut self, piece: Bytes) {
        self.items.push_back(Item::Passed(piece));
    }

    /// Holds a piece of the event being read (`data`: of a `data` line).
    fn hold(&mut self, piece: Bytes, data: bool) {
        self.open.block_len += piece.len();
        self.open.block.push((piece, data));
    }

    /// Handles the complete lines of `data`, writing what may go out.
    fn lines(&mut self, data: Bytes, encoder: Option<&MappingEncoder>) {
        if self.transparent {
            self.send(data);
            return;
        }
        let mut lines = std::mem::take(&mut self.lines);
        let mut at = 0;
        while !self.done {
            if self.finished {
                // The final event went out. If its blank line ended with a CR, the LF of a CRLF
                // that follows is the upstream's byte too: a stock SSE parser (eventsource-parser)
                // waits for what follows a lone CR before it dispatches the event.
                if lines.after_cr() {
                    match data.get(at) {
                        Some(b'\n') => self.send(data.slice(at..=at)),
                        Some(_) => {}
                        // It may come first in the next chunk.
                        None => break,
                    }
                }
                self.done = true;
                break;
            }
            if self.transparent {
                // The rest of this chunk too.
                self.send(data.slice(at..));
                break;
            }
            // The bound on what is held is `check_held`'s, for a line and its event together.
            let Ok(piece) = lines.next_shared(&data, &mut at, usize::MAX) else {
                unreachable!("no line is longer than usize::MAX bytes")
            };
            match piece {
                Some(Piece::Line { start, end }) => {
                    self.line(data.slice(start..end), data.slice(end..=end));
                }
                Some(Piece::Joined { content, end }) => {
                    self.joined_line(content, data.slice(end..=end));
                }
                Some(Piece::CrLf { at }) => {
                    // The LF of a CRLF: it goes where its line went (a comment's, into its
                    // record).
                    let lf = data.slice(at..=at);
                    match self.open.block.last() {
                        _ if std::mem::take(&mut self.comment_cr) => {}
                        None => self.send(lf),
                        Some(&(_, data)) => self.hold(lf, data),
                    }
                }
                None => {
                    let pending = lines.pending();
                    if self.over_held(pending) {
                        if !self.compat {
                            // Unframed, the kept start of the line goes out with what is held.
                            lines
                                .take_pending()
                                .into_buffers()
                                .for_each(|b| self.send(b));
                        }
                    } else {
                        self.data_arriving(lines.pending_parts(), encoder);
                    }
                    break;
                }
            }
        }
        self.lines = lines;
    }

    /// Reads the value of the open event's first `data` line as it arrives (`line`, the line as
    /// far as it came; compatible mapping, an event that is a message so far): checked as
    /// UTF-8 and read as JSON-RPC ([`Streamed`]), and once past [`STREAM_FROM`] its whole frames
    /// go into the event's record ([`OpenRecord`]). Nothing goes out before the event's end.
    fn data_arriving(&mut self, line: &Parts, encoder: Option<&MappingEncoder>) {
        let Some(encoder) = encoder else {
            return;
        };
        // The record begins from the encoder's state: not before the body has written the
        // frames of what went before it (a keep-alive, an event's record); the bytes that
        // arrived meanwhile go into it with the next read, or at the event's end.
        let written = |item: &Item| matches!(item, Item::Passed(_));
        if !self.items.iter().all(written) {
            return;
        }
        if self.done
            || self.open.record_refused
            || !self.open.values.is_empty()
            || !self.parser.open_event_is_message()
        {
            return;
        }
        // The value as far as it came, once the line's first bytes tell where it starts.
        let Some(at) = line.data_value_start() else {
            return;
        };
        let valid = self.open.streamed.arrived(line, at);
        if valid < STREAM_FROM {
            return;
        }
        let record = self
            .open
            .record
            .get_or_insert_with(|| encoder.open_record());
        let frame = encoder.frame_size();
        let whole = record.len() + (valid - record.len()) / frame * frame;
        let pieces = line.pieces_from(at + record.len());
        if whole > record.len() && record.push_pieces(pieces, whole - record.len()).is_err() {
            // Refused (over the limit, ...): the record of the whole message says why, at its
            // end; none is begun again for this event.
            self.open.record = None;
            self.open.record_refused = true;
        }
    }

    /// Gives up (message too large) when the bytes held for a line or an event pass the bound:
    /// the data is bounded by the message limit, this also bounds lines and events it does not
    /// count (comments, `id` lines), so that the inner server cannot make the layer buffer more.
    /// `pending` is the bytes kept of a line whose end has not arrived. Returns whether it gave
    /// up.
    fn over_held(&mut self, pending: usize) -> bool {
        let held = pending + self.open.block_len;
        if held <= self.max_held {
            return false;
        }
        self.give_up(Failure::TooLarge {
            len: held as u64,
            max: self.max_held as u64,
        });
        true
    }

    /// A line begun in an earlier chunk: a `data` line kept as the parts of the chunks it came
    /// in is held as those parts, and its value is those parts (not copied); any other line is
    /// read in one buffer ([`line`](Self::line)).
    fn joined_line(&mut self, content: Parts, end: Bytes) {
        let at = match content.data_value_start() {
            Some(at) if !content.is_copied() && content.len() > b"data: ".len() => at,
            _ => {
                self.line(content.into_bytes(), end);
                return;
            }
        };
        // A line that starts with `data:` starts with no BOM, even the body's first.
        self.at_start = false;
        self.comment_cr = false;
        let pieces: Vec<Bytes> = content.into_buffers().collect();
        let value = Parts::from_buffers(pieces.iter().cloned()).split_off(at);
        let added = self.add_data(value);
        for piece in pieces {
            self.hold(piece, true);
        }
        self.hold(end, true);
        match added {
            // Unframed, the line goes on with what is held (framed, all is dropped).
            Err(failure) => self.give_up(failure),
            Ok(()) => {
                self.over_held(0);
            }
        }
    }

    /// Adds the value of a `data` line to the event's data, within the message limit; the
    /// parser sees an empty `data` field in its place.
    fn add_data(&mut self, value: Parts) -> Result<(), Failure> {
        self.open.data_len += value.len() + usize::from(!self.open.values.is_empty());
        self.open.values.push(value);
        if self.open.data_len > self.max_message {
            let (len, max) = (self.open.data_len as u64, self.max_message as u64);
            return Err(Failure::TooLarge { len, max });
        }
        self.parse(b"data:")
    }

    /// Hands a line to the parser (the event's type, and when it is dispatched).
    fn parse(&mut self, line: &[u8]) -> Result<(), Failure> {
        self.parser
            .line(line, None, &mut self.events)
            .map(drop)
            .map_err(|err| Failure::Internal(format!("the response stream: {err}")))
    }

    /// One complete line: its content and its terminator (LF or CR).
    fn line(&mut self, mut content: Bytes, end: Bytes) {
        self.comment_cr = false;
        if std::mem::take(&mut self.at_start) && content.starts_with(BOM) {
            // A BOM stays first in the body, before the first record, where SSE skips it.
            let bom = content.split_to(BOM.len());
            self.send(bom);
        }
        let value = data_value(&content).map(|value| content.slice_ref(value));
        let data = value.is_some();
        let parsed = match value {
            // The value stays in the line; the parser sees an empty `data` field in its place.
            Some(value) => self.add_data(Parts::from(value)),
            None => self.parse(&content),
        };
        if let Err(failure) = parsed {
            // Unframed, the line goes on with what is held (framed, all is dropped).
            self.hold(content, data);
            self.hold(end, data);
            self.give_up(failure);
            return;
        }
        let blank = content.is_empty();
        if self.open.block.is_empty() && content.first() == Some(&b':') {
            if self.compat {
                // A keep-alive between events (rmcp's `:`), as a KEEPALIVE frame (SPEC.md §18.4).
                self.items.push_back(Item::Out(Outgoing::KeepAlive));
                self.comment_cr = end.as_ref() == b"\r";
            } else {
                self.send(content);
                self.send(end);
            }
            return;
        }
        self.hold(content, data);
        self.hold(end, data);
        if !blank {
            self.over_held(0);
            return;
        }
        // The blank line dispatched the event (if it had any field).
        let event = self.events.pop();
        self.events.clear();
        let open = std::mem::take(&mut self.open);
        match event {
            Some(event) if open.data_len > 0 && is_message_event(event.event.as_deref()) => {
                self.message_event(open);
            }
            // A priming event (`id` only), an event of another type: unchanged, unframed.
            _ => open
                .block
                .into_iter()
                .for_each(|(piece, _)| self.send(piece)),
        }
    }

    /// A message event dispatched: its record first (compatible mapping), then its lines, with
    /// the contract declared in the final response to a discovery request.
    fn message_event(&mut self, open: OpenEvent) {
        let OpenEvent {
            mut block,
            values,
            data_len,
            mut streamed,
            record,
            ..
        } = open;
        let (mut data, carried, seen) = streamed.read_whole(event_data(values, data_len));
        // The record's bytes are the data's first bytes (the text is the data itself).
        let mut record = record.filter(|_| seen);
        if self.compat {
            if let Some(reason) =
                unframeable(&carried, |id| data.copy_range(id), self.request_id.as_ref())
            {
                // Never framed as a verified message: dropped, the stream ends with ABORT code 1.
                self.give_up(Failure::Internal(reason));
                return;
            }
        }
        let last = carried.is_final();
        if let Some(declare) = self.declare.take().filter(|_| last) {
            let text = data.into_bytes();
            data = match declare.apply_bytes(&text) {
                Some(declared) => {
                    block = with_data(block, &declared);
                    record = None;
                    Parts::from(Bytes::from(declared))
                }
                None => Parts::from(text),
            };
        }
        if self.compat {
            // Its record, then its lines; a record refused drops the event.
            let lines = block.into_iter().map(|(piece, _)| piece).collect();
            self.items.push_back(Item::Event(Box::new(PassedEvent {
                record,
                data,
                last,
                lines,
            })));
            self.finished = last;
        } else {
            block.into_iter().for_each(|(piece, _)| self.send(piece));
            // After the final response the body has nothing more to declare.
            self.transparent = last;
        }
    }

    /// The inner body ended: in the compatible mapping before its final response (an ABORT);
    /// unframed, what is held goes out as it came.
    fn body_ended(&mut self) {
        if self.compat {
            self.give_up(Failure::ended());
            return;
        }
        // An event left open, a line without its end: the client's, as they came.
        let held = std::mem::take(&mut self.open.block);
        held.into_iter().for_each(|(piece, _)| self.send(piece));
        let pending = self.lines.take_pending();
        pending.into_buffers().for_each(|piece| self.send(piece));
        self.done = true;
    }
}

/// An event's held lines with its `data` lines replaced by `data`'s (one `data: ` line per
/// LF-separated piece, SPEC.md §18.3), where the first one was.
fn with_data(block: Vec<(Bytes, bool)>, data: &str) -> Vec<(Bytes, bool)> {
    let mut lines = Vec::with_capacity(block.len());
    let mut written = false;
    for (piece, is_data) in block {
        if !is_data {
            lines.push((piece, false));
        } else if !std::mem::replace(&mut written, true) {
            let mut text = String::with_capacity(data.len() + 8);
            for line in data.split('\n') {
                text.push_str("data: ");
                text.push_str(line);
                text.push('\n');
            }
            lines.push((Bytes::from(text), true));
        }
    }
    lines
}

/// The event's data as it came: its values joined with LF (`len` bytes), for
/// [`message_text`](crate::jsonrpc::message_text) to read as an SSE parser dispatches it. The
/// value itself, as it was kept, when there is one: the usual case (a JSON-RPC message on one
/// line).
fn event_data(mut values: Vec<Parts>, len: usize) -> Parts {
    if values.len() == 1 {
        return values.pop().unwrap_or_default();
    }
    let mut data = BytesMut::with_capacity(len);
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            data.extend_from_slice(b"\n");
        }
        value
            .pieces()
            .for_each(|piece| data.extend_from_slice(piece));
    }
    Parts::from(data.freeze())
}

impl<B: InnerBody> SsePassthrough<B> {
    /// The next item (`encoder`: the compatible mapping's, whose state a message's record
    /// begins from): everything one inner chunk produced goes out before the next is read; an
    /// inner failure (unframed) after the bytes before it.
    fn poll_item(
        &mut self,
        cx: &mut Context<'_>,
        encoder: Option<&MappingEncoder>,
    ) -> Poll<Option<Result<Item, B::Error>>> {
        loop {
            if let Some(item) = self.items.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            if let Some(err) = self.failed.take() {
                return Poll::Ready(Some(Err(err)));
            }
            if self.done {
                // The final response went out whole: the end of the inner body is read apart
                // (this body ends now).
                if let Some(body) = self.body.take().filter(|_| self.finished) {
                    drain_rest(body);
                }
                return Poll::Ready(None);
            }
            let Some(body) = self.body.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(body.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.lines(data, encoder);
                    }
                }
                // The final response went out (only the LF of its CRLF could still come).
                Some(Err(_)) | None if self.finished => self.done = true,
                Some(Err(err)) if self.compat => self.give_up(Failure::failed(err)),
                Some(Err(err)) => {
                    self.body_ended();
                    self.failed = Some(err);
                }
                None => self.body_ended(),
            }
        }
    }
}

/// The compatible mapping: the pass-through's items, written by the one body that writes every
/// framed response.
impl<B: InnerBody> Stream for FramedBody<SsePassthrough<B>> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_framed(cx, |this, cx, encoder| this.poll_item(cx, Some(encoder)))
    }
}

/// The pass-through of an unframed body ([`SsePassthrough::plain`]).
pub(super) struct Plain<B: Body>(SsePassthrough<B>);

impl<B: InnerBody> Stream for Plain<B> {
    type Item = Result<Bytes, B::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut self.0;
        let item = ready!(this.poll_item(cx, None));
        Poll::Ready(item.map(|item| match item {
            Ok(Item::Passed(piece)) => Ok(gather(piece, &mut this.items)),
            // Unframed, every item is bytes passed on.
            Ok(_) => Ok(Bytes::new()),
            Err(err) => Err(err),
        }))
    }
}
