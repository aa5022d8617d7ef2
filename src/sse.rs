//! The SSE mapping (SPEC.md §15): a framed stream carried inside `text/event-stream` events.
//!
//! MCP's Streamable HTTP answers a request with `application/json` or `text/event-stream` only,
//! so a framed response that must pass through unchanged MCP infrastructure travels as SSE
//! events named [`FRAME_EVENT`] (`mcp-frame`) whose `data` is the standard base64 (with padding)
//! of one or more whole frames. The decoded bytes are exactly the binary stream: the same CRCs,
//! digests and sequence numbers, so [`StreamDecoder`](crate::StreamDecoder) decides as it does
//! for a binary body.
//!
//! ```text
//! event: mcp-frame
//! data: n00BAaGio6QAAAAg...      <- base64 of one frame (HEAD)
//!                                 <- blank line ends the event
//! : keep-alive                    <- comments are skipped
//! event: mcp-frame
//! data: n00BAqGio6UAAAAL...      <- base64 of a DATA frame
//!
//! ```
//!
//! Both halves are sans-I/O: [`SseFrameEncoder`] writes events into a `BytesMut`,
//! [`SseFrameDecoder`] takes body bytes as they arrive (any chunking, `\n`, `\r\n` or `\r` line
//! endings, `:` comments) and returns the frame bytes they carry. [`SseParser`] is the general
//! event parser underneath, usable for unframed SSE bodies too.

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::{FrameHeader, HEADER_LEN};
use crate::limits::DEFAULT_MAX_EVENT_DATA;
use crate::limits::DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW;
use crate::mapping::{FRAME_EVENT, SseError};

/// One dispatched SSE event.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::sse::SseParser;
/// let mut parser = SseParser::new();
/// let mut events = Vec::new();
/// parser.feed(b"event: ping\r\ndata: a\r\ndata: b\r\n\r\n", &mut events).unwrap();
/// assert_eq!(events[0].event.as_deref(), Some("ping"));
/// assert_eq!(events[0].data, "a\nb");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, if any (a receiver treats `None` as `message`).
    pub event: Option<String>,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The `id` field, if any.
    pub id: Option<String>,
}

/// One item of an SSE body, in body order: a dispatched event or a comment line (see
/// [`SseParser::feed_items`]).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::sse::{SseItem, SseParser};
/// let mut items = Vec::new();
/// SseParser::new().feed_items(b": keep-alive\ndata: {}\n\n", &mut items).unwrap();
/// assert!(matches!(&items[0], SseItem::Comment(text) if &text[..] == b" keep-alive"));
/// assert!(matches!(&items[1], SseItem::Event(event) if event.data == "{}"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseItem {
    /// A dispatched event (as [`SseParser::feed`] returns it).
    Event(SseEvent),
    /// A comment line: the bytes after its leading `:`, line ending excluded.
    Comment(Bytes),
}

/// One item of an SSE body whose events carry their data as bytes (UTF-8, lines joined with
/// LF): what [`SseParser::feed_raw_items`] returns to the compatible mapping, which hands the
/// data on as frame payload and needs no `String` (SPEC.md §18.5).
#[derive(Debug)]
pub(crate) enum RawItem {
    /// A dispatched event: its `event` field and its data. The data of an event with one data
    /// line that arrived in several reads is a slice of that line, not a copy; `whole` says so:
    /// the data is that line's value as it came (valid UTF-8, nothing replaced), the bytes
    /// [`SseParser::pending_line`] showed while the line arrived.
    Event {
        name: Option<String>,
        data: Bytes,
        whole: bool,
    },
    /// A comment line: the bytes after its leading `:`, line ending excluded.
    Comment(Bytes),
}

/// Where [`SseParser`] puts what it parses: events only, or events and comments in body order,
/// with the data as `String` ([`SseEvent`]) or as bytes ([`RawItem`]).
pub(crate) trait SseSink {
    /// Whether events are dispatched with [`raw_event`](Self::raw_event) (their data kept as
    /// bytes) rather than [`event`](Self::event).
    const RAW: bool = false;
    fn event(&mut self, event: SseEvent);
    fn raw_event(&mut self, _name: Option<String>, _data: Bytes, _whole: bool) {}
    fn comment(&mut self, text: &[u8]);
}

impl SseSink for Vec<SseEvent> {
    fn event(&mut self, event: SseEvent) {
        self.push(event);
    }
    fn comment(&mut self, _text: &[u8]) {}
}

impl SseSink for Vec<SseItem> {
    fn event(&mut self, event: SseEvent) {
        self.push(SseItem::Event(event));
    }
    fn comment(&mut self, text: &[u8]) {
        self.push(SseItem::Comment(Bytes::copy_from_slice(text)));
    }
}

impl SseSink for Vec<RawItem> {
    const RAW: bool = true;
    fn event(&mut self, event: SseEvent) {
        self.raw_event(event.event, Bytes::from(event.data.into_bytes()), false);
    }
    fn raw_event(&mut self, name: Option<String>, data: Bytes, whole: bool) {
        self.push(RawItem::Event { name, data, whole });
    }
    fn comment(&mut self, text: &[u8]) {
        self.push(RawItem::Comment(Bytes::copy_from_slice(text)));
    }
}

/// The data of the open event for a sink that takes it as bytes ([`SseSink::RAW`]).
#[derive(Debug, Default)]
struct RawData {
    /// One data line that arrived in several reads: a slice of that line, not a copy.
    line: Option<Bytes>,
    /// Otherwise: the data lines joined with LF (or one line read in place from the input).
    joined: BytesMut,
}

impl RawData {
    fn len(&self) -> usize {
        self.line.as_ref().map_or(self.joined.len(), Bytes::len)
    }

    /// Adds a data line's value (after an LF if `separate`). `buffered` is the buffered line
    /// that `value` is part of, if there is one: a first value is then kept as a slice of it.
    fn push(&mut self, separate: bool, value: &[u8], buffered: Option<&Bytes>) {
        if let Some(first) = self.line.take() {
            self.joined.reserve(first.len() + 1 + value.len());
            self.joined.extend_from_slice(&first);
        } else if !separate && self.joined.is_empty() && !value.is_empty() {
            // The event's first value: kept as a slice of its buffered line, if it has one.
            if let Some(line) = buffered {
                self.line = Some(line.slice_ref(value));
                return;
            }
        }
        if separate {
            self.joined.put_u8(b'\n');
        }
        self.joined.extend_from_slice(value);
    }

    /// The data, leaving this empty; the only handle on its buffer once the line it may be a
    /// slice of is dropped. `true` with a slice of the one data line (its value as it came).
    fn take(&mut self) -> (Bytes, bool) {
        match self.line.take() {
            Some(line) => (line, true),
            None => (std::mem::take(&mut self.joined).freeze(), false),
        }
    }
}

/// A field line's name and value (WHATWG event-stream): the name is what precedes the first
/// colon, or the whole line; the value follows the colon, without one leading space.
pub(crate) fn field(line: &[u8]) -> (&[u8], &[u8]) {
    match line.iter().position(|&b| b == b':') {
        Some(colon) => {
            let value = &line[colon + 1..];
            (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
        }
        None => (line, &[]),
    }
}

/// Whether an SSE event whose `event` field is `event` is a `message` event: one without an
/// `event` field, with an empty one, or with `event: message` (WHATWG event-stream: an empty
/// event type buffer dispatches as `message`; rmcp and the Python and TypeScript SDKs read such
/// events as MCP messages). The one rule of the crate: the layer, the compatible mapping's
/// encoder and decoder, the deduplication layer and the client's GET stream all decide by it
/// (SPEC.md §15, §18.3).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::sse::is_message_event;
/// assert!(is_message_event(None));
/// assert!(is_message_event(Some("")));
/// assert!(is_message_event(Some("message")));
/// assert!(!is_message_event(Some("mcp-frame")));
/// assert!(!is_message_event(Some("Message"))); // event types are case-sensitive
/// ```
#[must_use]
pub fn is_message_event(event: Option<&str>) -> bool {
    matches!(event, None | Some("" | "message"))
}

/// A line longer than a [`LineSplitter`]'s bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineTooLong;

/// Splits `text/event-stream` bytes into lines (WHATWG event-stream: a line ends at CR, LF or
/// CRLF), whatever the reads: the one line splitter of the crate, under [`SseParser`] and the
/// layer's compatible pass-through. Each byte of input is looked at once; a line that lies whole
/// in one input is handed out in place, only the start of a line whose end has not arrived is
/// kept (bounded).
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    /// The start of a line whose end has not arrived.
    partial: BytesMut,
    /// The last line ended with CR: an LF first in the next input completes a CRLF.
    after_cr: bool,
}

/// One piece of input from [`LineSplitter::next`].
#[derive(Debug)]
// Where a line's terminator lies matters to the layer's pass-through (feature `rmcp-server`), which
// sends every byte on; the parser needs the content alone.
#[cfg_attr(not(feature = "rmcp-server"), allow(dead_code))]
pub(crate) enum Piece {
    /// A complete line lying whole in the input: `input[start..end]` is its content and
    /// `input[end]` its terminator (CR or LF).
    Line { start: usize, end: usize },
    /// A complete line begun in earlier input: its content (the bytes kept and this input's
    /// part, terminator excluded; the only handle on its buffer) and `input[end]`, its
    /// terminator.
    Joined { content: Bytes, end: usize },
    /// The LF at `input[at]` completing a CRLF: it ends no line of its own.
    CrLf { at: usize },
}

impl LineSplitter {
    /// The next piece of `input` from `*at`, which moves past it; `None` once the rest of the
    /// input is kept as the start of a line. A line's content may hold at most `max` bytes.
    pub(crate) fn next(
        &mut self,
        input: &[u8],
        at: &mut usize,
        max: usize,
    ) -> Result<Option<Piece>, LineTooLong> {
        let rest = &input[*at..];
        if rest.is_empty() {
            return Ok(None);
        }
        if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
            let piece = Piece::CrLf { at: *at };
            *at += 1;
            return Ok(Some(piece));
        }
        let Some(len) = memchr::memchr2(b'\n', b'\r', rest) else {
            if self.partial.len() + rest.len() > max {
                return Err(LineTooLong);
            }
            self.partial.extend_from_slice(rest);
            *at = input.len();
            return Ok(None);
        };
        let end = *at + len;
        if self.partial.len() + len > max {
            return Err(LineTooLong);
        }
        self.after_cr = input[end] == b'\r';
        let piece = if self.partial.is_empty() {
            Piece::Line { start: *at, end }
        } else {
            self.partial.extend_from_slice(&input[*at..end]);
            Piece::Joined {
                content: std::mem::take(&mut self.partial).freeze(),
                end,
            }
        };
        *at = end + 1;
        Ok(Some(piece))
    }

    /// Bytes kept of a line whose end has not arrived.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn pending(&self) -> usize {
        self.partial.len()
    }

    /// The start of a line whose end has not arrived (empty if none).
    pub(crate) fn pending_line(&self) -> &[u8] {
        &self.partial
    }

    /// Takes the start of a line kept (for a caller that passes every byte on).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn take_pending(&mut self) -> Bytes {
        std::mem::take(&mut self.partial).freeze()
    }

    /// Forgets the start of a line kept (the body ended: it is not a line).
    pub(crate) fn clear(&mut self) {
        self.partial.clear();
        self.after_cr = false;
    }
}

/// A sans-I/O parser of `text/event-stream` bodies (the WHATWG event-stream format): any
/// chunking, `\n`, `\r\n` and `\r` line endings, `:` comments, a leading BOM.
///
/// Events with neither data nor a name (e.g. only an `id`) are dispatched too, with empty data,
/// so that a caller can see them; a partial event at the end of input is discarded
/// ([`finish`](Self::finish) says how many bytes).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::sse::SseParser;
/// let body = b": keep-alive\n\nevent: message\ndata: {}\n\n";
/// let mut parser = SseParser::new();
/// let mut events = Vec::new();
/// for byte in body.chunks(1) {
///     parser.feed(byte, &mut events).unwrap(); // a proxy re-chunked into 1-byte pieces
/// }
/// assert_eq!(events.len(), 1);
/// assert_eq!(events[0].data, "{}");
/// assert_eq!(parser.comments(), 1);
/// ```
#[derive(Debug)]
pub struct SseParser {
    lines: LineSplitter,
    event: Option<String>,
    data: String,
    /// The data of the open event for a sink that takes bytes (instead of `data`).
    raw_data: RawData,
    has_data: bool,
    id: Option<String>,
    at_start: bool,
    max_event_data: usize,
    comments: u64,
    /// Lines since the last one that carried data (SPEC.md §15).
    quiet_lines: u32,
    max_quiet_lines: u32,
    pending_bytes: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default data limit ([`DEFAULT_MAX_EVENT_DATA`]).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::internals::sse::SseParser::new().comments(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::with_max_event_data(DEFAULT_MAX_EVENT_DATA)
    }

    /// A parser that fails with [`SseError::EventTooLarge`] once a line or an event's data
    /// exceeds `max` bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{internals::sse::SseParser, mapping::SseError};
    /// let mut parser = SseParser::with_max_event_data(4);
    /// let err = parser.feed(b"data: 12345\n", &mut Vec::new()).unwrap_err();
    /// assert_eq!(err, SseError::EventTooLarge { max: 4 });
    /// ```
    #[must_use]
    pub fn with_max_event_data(max: usize) -> Self {
        Self {
            lines: LineSplitter::default(),
            event: None,
            data: String::new(),
            raw_data: RawData::default(),
            has_data: false,
            id: None,
            at_start: true,
            max_event_data: max,
            comments: 0,
            quiet_lines: 0,
            max_quiet_lines: DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW,
            pending_bytes: 0,
        }
    }

    /// A parser for lines after the body's first, which alone may start with a BOM (for a
    /// caller that handled the BOM itself and hands over lines with [`line`](Self::line)).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn past_start(mut self) -> Self {
        self.at_start = false;
        self
    }

    /// Fails with [`SseError::TooManyComments`] once more than `max` lines in a row carry no
    /// data: `:` comments (keep-alives), blank lines, and the other fields of events without
    /// data. Default [`DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW`].
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{internals::sse::SseParser, mapping::SseError};
    /// let mut parser = SseParser::new().max_comments_in_a_row(2);
    /// let err = parser.feed(b": a\n: b\n: c\n", &mut Vec::new()).unwrap_err();
    /// assert_eq!(err, SseError::TooManyComments { max: 2 });
    /// ```
    #[must_use]
    pub fn max_comments_in_a_row(mut self, max: u32) -> Self {
        self.max_quiet_lines = max;
        self
    }

    /// Comment lines (`:` ...) seen so far, e.g. keep-alives.
    ///
    /// # Examples
    ///
    /// See [`SseParser`].
    #[must_use]
    pub fn comments(&self) -> u64 {
        self.comments
    }

    /// Parses `input`, appending every event it completes to `events`.
    ///
    /// # Errors
    ///
    /// [`SseError::EventTooLarge`] when a line or an event's data passes the limit; the
    /// parser must not be used afterwards. The events completed before the failing line are
    /// still appended to `events` (body order, SPEC.md §15).
    ///
    /// # Examples
    ///
    /// See [`SseParser`].
    pub fn feed(&mut self, input: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.feed_into(input, events)
    }

    /// Like [`feed`](Self::feed), but also returns every comment line, in body order with the
    /// events (a comment inside an event's lines comes before that event, which is dispatched at
    /// its blank line). For mappings that carry information in comments (SPEC.md §18).
    ///
    /// # Errors
    ///
    /// As [`feed`](Self::feed); the items completed before the failing line are appended.
    ///
    /// # Examples
    ///
    /// See [`SseItem`].
    pub fn feed_items(&mut self, input: &[u8], items: &mut Vec<SseItem>) -> Result<(), SseError> {
        self.feed_into(input, items)
    }

    /// Like [`feed_items`](Self::feed_items), with the events' data as bytes: an event whose
    /// one data line arrived in several reads carries a slice of that line, not a copy (the
    /// only handle on that buffer once the parser moved on, so the receiver may take it over
    /// with `Bytes::try_into_mut`), and no `String` is built. A parser is fed either this way
    /// or the others, not both.
    pub(crate) fn feed_raw_items(
        &mut self,
        input: &[u8],
        items: &mut Vec<RawItem>,
    ) -> Result<(), SseError> {
        self.feed_into(input, items)
    }

    /// [`feed_raw_items`](Self::feed_raw_items) of a shared buffer: the data of an event with one
    /// data line is a slice of `input` too when the line lies whole in it, so that no event's
    /// data is copied (the layer reading its inner server's events, issue 21).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn feed_raw_shared(
        &mut self,
        input: &Bytes,
        items: &mut Vec<RawItem>,
    ) -> Result<(), SseError> {
        self.feed_lines(input, Some(input), items)
    }

    fn feed_into<S: SseSink>(&mut self, input: &[u8], events: &mut S) -> Result<(), SseError> {
        self.feed_lines(input, None, events)
    }

    /// Parses `input`; `shared` is the same bytes as a shared buffer, if the caller has one.
    fn feed_lines<S: SseSink>(
        &mut self,
        input: &[u8],
        shared: Option<&Bytes>,
        events: &mut S,
    ) -> Result<(), SseError> {
        // Bytes since the last blank line: this input's, until a blank line resets it.
        self.pending_bytes += input.len();
        // A line holds at most a field name, `: ` and the data it adds.
        let max = self.max_event_data.saturating_add(16);
        let max_event_data = self.max_event_data;
        let too_large = |_| SseError::EventTooLarge {
            max: max_event_data,
        };
        let mut at = 0;
        while let Some(piece) = self.lines.next(input, &mut at, max).map_err(too_large)? {
            let dispatched = match piece {
                // The whole line is in this input: read in place, without a copy.
                Piece::Line { start, end } => {
                    // A raw sink keeps a data value as a slice of the line, if it is shared.
                    let line = shared.filter(|_| S::RAW).map(|b| b.slice(start..end));
                    self.line(&input[start..end], line.as_ref(), events)?
                }
                // The line's own buffer goes along, so that an event's data can be handed on
                // in place (`CompatDecoder`).
                Piece::Joined { content, .. } => self.line(&content, Some(&content), events)?,
                Piece::CrLf { .. } => false,
            };
            if dispatched {
                self.pending_bytes = input.len() - at;
            }
        }
        Ok(())
    }

    /// Ends the input. Returns the number of bytes of an event that was still open (not ended by
    /// a blank line): per the SSE format, such an event is discarded, never dispatched.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::sse::SseParser;
    /// let mut parser = SseParser::new();
    /// let mut events = Vec::new();
    /// parser.feed(b"data: {\"cut\":", &mut events).unwrap();
    /// assert!(events.is_empty());
    /// assert_eq!(parser.finish(), 13);
    /// ```
    pub fn finish(&mut self) -> usize {
        let discarded = self.pending_bytes;
        self.reset_event();
        self.lines.clear();
        self.pending_bytes = 0;
        discarded
    }

    fn reset_event(&mut self) {
        self.event = None;
        self.data.clear();
        self.raw_data = RawData::default();
        self.has_data = false;
        self.id = None;
    }

    /// The start of a line whose end has not arrived, as it came (empty if none): for a caller
    /// that works on a long line while it arrives (the compatible mapping's data line, hashed
    /// as it comes, [`CompatDecoder`](crate::sse_compat::CompatDecoder)).
    pub(crate) fn pending_line(&self) -> &[u8] {
        self.lines.pending_line()
    }

    /// Whether the open event has a data line already.
    pub(crate) fn event_has_data(&self) -> bool {
        self.has_data
    }

    /// Interprets one line (without its ending) of the body, as [`LineSplitter`] cut it;
    /// `buffered` is the line as a shared buffer when there is one (kept across reads, or a
    /// slice of a shared input), so that a data value can be kept as a slice of it. Returns
    /// whether the line was blank (an event's end).
    pub(crate) fn line<S: SseSink>(
        &mut self,
        mut line: &[u8],
        buffered: Option<&Bytes>,
        events: &mut S,
    ) -> Result<bool, SseError> {
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        // SPEC.md §15: a peer cannot hold the body open with lines that carry nothing; a data
        // line with data starts the count again.
        let carries_data =
            line.starts_with(b"data:") && line.len() > b"data:".len() && line != b"data: ";
        if carries_data {
            self.quiet_lines = 0;
        } else {
            self.quiet_lines = self.quiet_lines.saturating_add(1);
            if self.quiet_lines > self.max_quiet_lines {
                return Err(SseError::TooManyComments {
                    max: self.max_quiet_lines,
                });
            }
        }
        if line.is_empty() {
            if self.has_data || self.event.is_some() || self.id.is_some() {
                if S::RAW {
                    let (data, whole) = self.raw_data.take();
                    events.raw_event(self.event.take(), data, whole);
                } else {
                    events.event(SseEvent {
                        event: self.event.take(),
                        data: std::mem::take(&mut self.data),
                        id: self.id.take(),
                    });
                }
            }
            self.reset_event();
            return Ok(true);
        }
        if line[0] == b':' {
            self.comments += 1;
            events.comment(&line[1..]);
            return Ok(false);
        }
        let (name, value) = field(line);
        // The stream is UTF-8 with replacement (WHATWG). Valid text (the usual case) takes the
        // fast validation; `from_utf8_lossy` walks chunk by chunk, as slow as SHA-256 on long
        // data lines (measured: a quarter of decoding a 1 MiB event).
        let value = match std::str::from_utf8(value) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        match name {
            b"event" => self.event = Some(value.into_owned()),
            b"data" => {
                let len = if S::RAW {
                    // Valid text is a part of the line; replaced text is its own.
                    let line = match value {
                        std::borrow::Cow::Borrowed(_) => buffered,
                        std::borrow::Cow::Owned(_) => None,
                    };
                    self.raw_data.push(self.has_data, value.as_bytes(), line);
                    self.raw_data.len()
                } else {
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(&value);
                    self.data.len()
                };
                self.has_data = true;
                if len > self.max_event_data {
                    return Err(SseError::EventTooLarge {
                        max: self.max_event_data,
                    });
                }
            }
            b"id" if !value.contains('\0') => self.id = Some(value.into_owned()),
            // `retry` and unknown fields are ignored (WHATWG event-stream interpretation).
            _ => {}
        }
        Ok(false)
    }
}

/// Decodes the SSE mapping: body bytes in, frame bytes out (SPEC.md §15).
///
/// Feed the output to a [`StreamDecoder`](crate::StreamDecoder); at the end of the body call
/// [`finish`](Self::finish) and then the stream decoder's `decode_eof`, which decides whether the
/// stream was complete. An event cut before its blank line is discarded, so a body cut inside an
/// event is a truncation of the framed stream, never a shorter valid one.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse::{SseFrameDecoder, SseFrameEncoder};
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut wire = BytesMut::new();
/// let mut enc = StreamEncoder::new(StreamHead::for_request(None));
/// enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)?;
/// enc.end(&mut wire)?;
/// let mut body = BytesMut::new();
/// SseFrameEncoder::new().encode(&wire, &mut body);
///
/// let mut frames = BytesMut::new();
/// let mut dec = SseFrameDecoder::new();
/// for piece in body.chunks(7) {
///     dec.feed(piece, &mut frames).unwrap();
/// }
/// dec.finish();
/// assert_eq!(frames, wire); // byte-exact
/// let stream = StreamDecoder::new().decode_all(&frames).unwrap();
/// assert_eq!(stream.messages.len(), 1);
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Debug, Default)]
pub struct SseFrameDecoder {
    parser: SseParser,
    events: Vec<SseEvent>,
    frame_events: u64,
    failed: FirstError<SseError>,
}

impl SseFrameDecoder {
    /// A decoder with the default event data limit ([`DEFAULT_MAX_EVENT_DATA`]).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::internals::sse::SseFrameDecoder::new().frame_events(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder whose events may carry at most `max` bytes of base64 data.
    ///
    /// # Examples
    ///
    /// ```
    /// let dec = mcp_framing::internals::sse::SseFrameDecoder::with_max_event_data(1 << 20);
    /// assert_eq!(dec.frame_events(), 0);
    /// ```
    #[must_use]
    pub fn with_max_event_data(max: usize) -> Self {
        Self {
            parser: SseParser::with_max_event_data(max),
            ..Self::default()
        }
    }

    /// Bounds the lines in a row that carry no data (see [`SseParser::max_comments_in_a_row`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{internals::sse::SseFrameDecoder, mapping::SseError};
    /// let mut dec = SseFrameDecoder::new().max_comments_in_a_row(1);
    /// let err = dec.feed(b": ping\n: ping\n", &mut bytes::BytesMut::new()).unwrap_err();
    /// assert_eq!(err, SseError::TooManyComments { max: 1 });
    /// ```
    #[must_use]
    pub fn max_comments_in_a_row(mut self, max: u32) -> Self {
        self.parser = self.parser.max_comments_in_a_row(max);
        self
    }

    /// `mcp-frame` events decoded so far.
    ///
    /// # Examples
    ///
    /// See [`SseFrameDecoder`].
    #[must_use]
    pub fn frame_events(&self) -> u64 {
        self.frame_events
    }

    /// Comment lines skipped so far (keep-alives).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut dec = mcp_framing::internals::sse::SseFrameDecoder::new();
    /// dec.feed(b": ping\r\n\r\n", &mut bytes::BytesMut::new()).unwrap();
    /// assert_eq!(dec.comments(), 1);
    /// ```
    #[must_use]
    pub fn comments(&self) -> u64 {
        self.parser.comments()
    }

    /// Parses `input` and appends the frame bytes of every completed `mcp-frame` event to
    /// `frames`.
    ///
    /// Events without data (an `id`-only priming event, a named event without data) are skipped.
    ///
    /// # Errors
    ///
    /// [`SseError::UnexpectedEvent`] for a data event under another name (the body is not a
    /// framed stream: fail closed), [`SseError::InvalidBase64`], [`SseError::EventTooLarge`].
    /// After an error the decoder returns the same error again.
    ///
    /// Errors come in body order (SPEC.md §15): the frames of the events completed before the
    /// failing line or event are still appended to `frames`, so decode them before acting on
    /// the error; an error in them comes first in the body. What ends up in `frames` and which
    /// error is returned do not depend on how the body is split into calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{internals::sse::SseFrameDecoder, mapping::SseError};
    /// let mut dec = SseFrameDecoder::with_max_event_data(64);
    /// let mut frames = bytes::BytesMut::new();
    /// // One read: an event carrying three bytes, then a comment line over the limit.
    /// let body = format!("event: mcp-frame\ndata: AQID\n\n:{}\n", "x".repeat(100));
    /// let err = dec.feed(body.as_bytes(), &mut frames).unwrap_err();
    /// assert_eq!(err, SseError::EventTooLarge { max: 64 });
    /// assert_eq!(&frames[..], [1, 2, 3]); // the earlier event's bytes were handed over
    /// ```
    pub fn feed(&mut self, input: &[u8], frames: &mut BytesMut) -> Result<(), SseError> {
        self.failed.check()?;
        let result = self.feed_inner(input, frames);
        self.failed.keep(result)
    }

    fn feed_inner(&mut self, input: &[u8], frames: &mut BytesMut) -> Result<(), SseError> {
        // Errors come in body order (SPEC.md §15): the events completed before a line that fails
        // are handed over first, and an error in one of them is reported instead. Without this,
        // the error would depend on how the body was split into reads.
        let parsed = self.parser.feed(input, &mut self.events);
        for event in self.events.drain(..) {
            if event.data.is_empty() {
                // Nothing carried (an `id`-only priming event, a named event without data): SSE
                // itself would not dispatch it.
                continue;
            }
            match event.event.as_deref() {
                Some(FRAME_EVENT) => {
                    // SSE joins data lines with `\n`, which is not base64: a sender that split
                    // the base64 over several lines loses nothing.
                    let data = event.data.as_bytes();
                    let joined: Vec<u8>;
                    let text = if memchr::memchr(b'\n', data).is_some() {
                        joined = data.iter().copied().filter(|&b| b != b'\n').collect();
                        &joined[..]
                    } else {
                        data
                    };
                    // Decoded in place at the end of `frames`: the event's data, already within
                    // the event limit, bounds what is reserved.
                    if put_base64_decoded(text, frames).is_err() {
                        return Err(SseError::InvalidBase64 {
                            event: self.frame_events,
                        });
                    }
                    self.frame_events += 1;
                }
                name => {
                    let name = match name {
                        Some(name) if !is_message_event(Some(name)) => name,
                        _ => "message",
                    };
                    return Err(SseError::UnexpectedEvent {
                        name: name.to_owned(),
                    });
                }
            }
        }
        parsed
    }

    /// Ends the body; returns the bytes of an event left open (discarded, SPEC.md §15).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut dec = mcp_framing::internals::sse::SseFrameDecoder::new();
    /// dec.feed(b"event: mcp-frame\ndata: n00B", &mut bytes::BytesMut::new()).unwrap();
    /// assert_eq!(dec.finish(), 27);
    /// ```
    pub fn finish(&mut self) -> usize {
        self.parser.finish()
    }
}

/// Appends the standard base64 of `bytes` (RFC 4648 §4, padded) to `dst`, encoded in place
/// without an intermediate string: the one base64 encoder of the crate (the SSE mapping's events,
/// the compatible mapping's records). SIMD where the CPU has it (`base64-simd`, picked at run
/// time): a 1 MiB result in the SSE mapping was encoded at a quarter of SHA-256's speed.
pub(crate) fn put_base64(bytes: &[u8], dst: &mut BytesMut) {
    let start = dst.len();
    let text_len = base64_simd::STANDARD.encoded_length(bytes.len());
    dst.resize(start + text_len, 0);
    let written = base64_simd::STANDARD
        .encode(bytes, base64_simd::Out::from_slice(&mut dst[start..]))
        .len();
    debug_assert_eq!(written, text_len);
}

/// Appends the bytes of the standard base64 `text` to `dst`: canonical and padded only (a
/// multiple of 4 characters, `=` padding, zero trailing bits, SPEC.md §15); on error `dst` is as
/// it was. The one base64 decoder of the crate, as [`put_base64`] is the one encoder.
pub(crate) fn put_base64_decoded(
    text: &[u8],
    dst: &mut BytesMut,
) -> Result<(), base64_simd::Error> {
    let start = dst.len();
    dst.resize(
        start + base64_simd::STANDARD.estimated_decoded_length(text.len()),
        0,
    );
    match base64_simd::STANDARD.decode(text, base64_simd::Out::from_slice(&mut dst[start..])) {
        Ok(decoded) => {
            let len = decoded.len();
            dst.truncate(start + len);
            Ok(())
        }
        Err(err) => {
            dst.truncate(start);
            Err(err)
        }
    }
}

/// The first error of a decoder whose errors are final: once it failed, every call returns
/// that error again (the SSE decoders of both mappings).
#[derive(Debug)]
pub(crate) struct FirstError<E>(Option<E>);

impl<E> Default for FirstError<E> {
    fn default() -> Self {
        Self(None)
    }
}

impl<E: Clone> FirstError<E> {
    /// `Err` with the error kept, if there is one.
    pub(crate) fn check(&self) -> Result<(), E> {
        self.0.clone().map_or(Ok(()), Err)
    }

    /// Keeps the error of `result`, if it is one, and returns `result`.
    pub(crate) fn keep(&mut self, result: Result<(), E>) -> Result<(), E> {
        if let Err(err) = &result {
            self.0 = Some(err.clone());
        }
        result
    }
}

/// Encodes frame bytes as SSE `mcp-frame` events, one event per whole frame (SPEC.md §15).
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse::SseFrameEncoder;
/// use mcp_framing::{StreamEncoder, StreamHead};
///
/// let mut wire = BytesMut::new();
/// StreamEncoder::new(StreamHead::for_request(None)).open(&mut wire)?;
/// let mut body = BytesMut::new();
/// SseFrameEncoder::new().encode(&wire, &mut body);
/// assert!(body.starts_with(b"event: mcp-frame\ndata: n00BA")); // 9f 4d 01 01 ...
/// assert!(body.ends_with(b"\n\n"));
/// # Ok::<(), mcp_framing::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SseFrameEncoder {
    _private: (),
}

/// Bytes an `mcp-frame` event adds around its base64 data: `event: mcp-frame\n` (17),
/// `data: ` (6) and the final `\n\n` (2).
pub const EVENT_OVERHEAD: usize = 25;

impl SseFrameEncoder {
    /// A new encoder.
    ///
    /// # Examples
    ///
    /// See [`SseFrameEncoder`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes the whole frames in `frames` as events into `dst`, one event per frame. A trailing
    /// partial frame (which an encoder never produces) is written as one last event.
    ///
    /// # Examples
    ///
    /// See [`SseFrameEncoder`].
    pub fn encode(&self, frames: &[u8], dst: &mut BytesMut) {
        let mut rest = frames;
        while !rest.is_empty() {
            let len = match rest.first_chunk::<HEADER_LEN>() {
                Some(header) => {
                    let declared = FrameHeader::read(header).len as usize;
                    HEADER_LEN.saturating_add(declared).min(rest.len())
                }
                None => rest.len(),
            };
            let (frame, tail) = rest.split_at(len);
            self.encode_event(frame, dst);
            rest = tail;
        }
    }

    /// Writes `bytes` (one or more whole frames) as a single event.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::sse::{EVENT_OVERHEAD, SseFrameEncoder};
    /// let mut body = bytes::BytesMut::new();
    /// SseFrameEncoder::new().encode_event(&[0u8; 20], &mut body);
    /// assert_eq!(body.len(), EVENT_OVERHEAD + 28); // base64 of 20 bytes is 28 characters
    /// ```
    pub fn encode_event(&self, bytes: &[u8], dst: &mut BytesMut) {
        let text_len = bytes.len().div_ceil(3) * 4;
        dst.reserve(EVENT_OVERHEAD + text_len);
        dst.put_slice(b"event: ");
        dst.put_slice(FRAME_EVENT.as_bytes());
        dst.put_slice(b"\ndata: ");
        put_base64(bytes, dst);
        dst.put_slice(b"\n\n");
    }

    /// Convenience: [`encode`](Self::encode) into a fresh buffer.
    ///
    /// # Examples
    ///
    /// ```
    /// let body = mcp_framing::internals::sse::SseFrameEncoder::new().to_events(&[]);
    /// assert!(body.is_empty());
    /// ```
    #[must_use]
    pub fn to_events(&self, frames: &[u8]) -> Bytes {
        let mut dst = BytesMut::new();
        self.encode(frames, &mut dst);
        dst.freeze()
    }
}
