//! The SSE event parser under both mappings (the WHATWG event-stream rules: any chunking,
//! `\n`, `\r\n` or `\r` line endings, `:` comments), usable for unframed SSE bodies too.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use super::parts::Parts;

use crate::limits::DEFAULT_MAX_EVENT_DATA;
use crate::limits::DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW;
use crate::mapping::SseError;

/// One dispatched SSE event.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::sse::SseParser;
/// let mut parser = SseParser::default();
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

/// One item of an SSE body whose events carry their data as bytes (UTF-8, lines joined with
/// LF; as they came from a parser made with [`SseParser::data_unchecked`]): what [`SseParser::feed_raw_items`] returns to the compatible mapping, which hands the
/// data on as frame payload and needs no `String` (SPEC.md §18.5).
#[derive(Debug)]
pub(crate) enum RawItem {
    /// A dispatched event: its `event` field and its data. The data of an event with one data
    /// line that arrived in several reads is a slice of that line, not a copy; `whole` says so:
    /// the data is that line's value as it came (valid UTF-8 unless unchecked, nothing replaced), the bytes
    /// [`SseParser::pending_line`] showed while the line arrived.
    Event {
        name: Option<String>,
        data: Parts,
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
    fn raw_event(&mut self, _name: Option<String>, _data: Parts, _whole: bool) {}
    fn comment(&mut self, text: &[u8]);
}

impl SseSink for Vec<SseEvent> {
    fn event(&mut self, event: SseEvent) {
        self.push(event);
    }
    fn comment(&mut self, _text: &[u8]) {}
}

impl SseSink for Vec<RawItem> {
    const RAW: bool = true;
    fn event(&mut self, event: SseEvent) {
        let data = Parts::from(Bytes::from(event.data.into_bytes()));
        self.raw_event(event.event, data, false);
    }
    fn raw_event(&mut self, name: Option<String>, data: Parts, whole: bool) {
        self.push(RawItem::Event { name, data, whole });
    }
    fn comment(&mut self, text: &[u8]) {
        self.push(RawItem::Comment(Bytes::copy_from_slice(text)));
    }
}

/// The data of the open event for a sink that takes it as bytes ([`SseSink::RAW`]).
#[derive(Debug, Default)]
struct RawData {
    /// One data line that arrived in several reads: that line's value as it was kept (parts of
    /// the reads, or a slice of the line's buffer), not a copy.
    line: Parts,
    /// Otherwise: the data lines joined with LF (or one line read in place from the input).
    joined: BytesMut,
}

impl RawData {
    fn len(&self) -> usize {
        self.line.len().max(self.joined.len())
    }

    /// Adds a data line's value (after an LF if `separate`). `buffered` is the buffered line
    /// that `value` is part of, if there is one: a first value is then kept as a slice of it.
    fn push(&mut self, separate: bool, value: &[u8], buffered: Option<&Bytes>) {
        if let (false, Some(line)) = (separate, buffered) {
            if self.is_empty() && !value.is_empty() {
                // The event's first value: kept as a slice of its buffered line.
                self.line = Parts::from(line.slice_ref(value));
                return;
            }
        }
        self.join_line(value.len());
        if separate {
            self.joined.put_u8(b'\n');
        }
        self.joined.extend_from_slice(value);
    }

    /// [`push`](Self::push) of a value kept as parts: a first value stays as it is.
    fn push_parts(&mut self, separate: bool, value: Parts) {
        if !separate && self.is_empty() {
            self.line = value;
            return;
        }
        self.join_line(value.len());
        if separate {
            self.joined.put_u8(b'\n');
        }
        for piece in value.pieces() {
            self.joined.extend_from_slice(piece);
        }
    }

    fn is_empty(&self) -> bool {
        self.line.is_empty() && self.joined.is_empty()
    }

    /// A second value comes: the first, kept as it came, is copied into `joined` (with room for
    /// `more` bytes after it).
    fn join_line(&mut self, more: usize) {
        if self.line.is_empty() {
            return;
        }
        let first = std::mem::take(&mut self.line);
        self.joined.reserve(first.len() + 1 + more);
        for piece in first.pieces() {
            self.joined.extend_from_slice(piece);
        }
    }

    /// The data, leaving this empty; the only handle on the buffers copied. `true` with the one
    /// data line's value as it was kept (as it came).
    fn take(&mut self) -> (Parts, bool) {
        if self.line.is_empty() {
            (Parts::from(std::mem::take(&mut self.joined).freeze()), false)
        } else {
            (std::mem::take(&mut self.line), true)
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

/// The value of a `data` line ([`field`]: after the colon, without one leading space); `None`
/// for a line of another field or a comment.
#[cfg(feature = "rmcp-server")]
pub(crate) fn data_value(line: &[u8]) -> Option<&[u8]> {
    match field(line) {
        (b"data", value) => Some(value),
        _ => None,
    }
}

/// Whether an SSE event whose `event` field is `event` is a `message` event: one without an
/// `event` field, with an empty one, or with `event: message` (WHATWG event-stream: an empty
/// event type buffer dispatches as `message`; rmcp and the Python and TypeScript SDKs read such
/// events as MCP messages). The one rule of the crate: the layer, the compatible mapping's
/// encoder and decoder, the deduplication layer and the client's GET stream all decide by it
/// (SPEC.md §15, §18.3).
#[must_use]
pub(crate) fn is_message_event(event: Option<&str>) -> bool {
    matches!(event, None | Some("" | "message"))
}

/// A line longer than a [`LineSplitter`]'s bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineTooLong;

/// Splits `text/event-stream` bytes into lines (WHATWG event-stream: a line ends at CR, LF or
/// CRLF), whatever the reads: the one line splitter of the crate, under [`SseParser`] and the
/// layer's compatible pass-through. Each byte of input is looked at once; a line that lies whole
/// in one input is handed out in place, only the start of a line whose end has not arrived is
/// kept (bounded): as the parts of the reads it came in when the input is a shared buffer
/// ([`next_shared`](Self::next_shared), not copied), else copied.
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    /// The start of a line whose end has not arrived.
    partial: Parts,
    /// The last line ended with CR: an LF first in the next input completes a CRLF.
    after_cr: bool,
}

/// One piece of input from [`LineSplitter::next_shared`] (or the parser's own reading).
#[derive(Debug)]
// Where a line's terminator lies matters to the layer's pass-through (feature `rmcp-server`), which
// sends every byte on; the parser needs the content alone.
#[cfg_attr(not(feature = "rmcp-server"), allow(dead_code))]
pub(crate) enum Piece {
    /// A complete line lying whole in the input: `input[start..end]` is its content and
    /// `input[end]` its terminator (CR or LF).
    Line { start: usize, end: usize },
    /// A complete line begun in earlier input: its content (the bytes kept and this input's
    /// part, terminator excluded; the only handle on the buffers copied) and `input[end]`, its
    /// terminator.
    Joined { content: Parts, end: usize },
    /// The LF at `input[at]` completing a CRLF: it ends no line of its own.
    CrLf { at: usize },
}

impl LineSplitter {
    /// [`next_in`](Self::next_in) of a shared buffer: the start of a line is kept as parts of
    /// it.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn next_shared(
        &mut self,
        input: &Bytes,
        at: &mut usize,
        max: usize,
    ) -> Result<Option<Piece>, LineTooLong> {
        self.next_in(input, Some(input), at, max)
    }

    /// The next piece of `input` from `*at`, which moves past it; `None` once the rest of the
    /// input is kept as the start of a line. A line's content may hold at most `max` bytes.
    /// `shared` is `input` as a shared buffer, if the caller has one: the start of a line is
    /// then kept as parts of it, else copied.
    fn next_in(
        &mut self,
        input: &[u8],
        shared: Option<&Bytes>,
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
            self.keep(input, shared, *at..input.len(), max);
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
            self.keep(input, shared, *at..end, max);
            Piece::Joined {
                content: std::mem::take(&mut self.partial),
                end,
            }
        };
        *at = end + 1;
        Ok(Some(piece))
    }

    /// Keeps `input[range]` after the start of a line kept, within `max` bytes: a part of the
    /// shared buffer if there is one, else a copy.
    fn keep(&mut self, input: &[u8], shared: Option<&Bytes>, range: Range<usize>, max: usize) {
        match shared {
            Some(shared) => self.partial.push_shared(shared.slice(range), max),
            None => self.partial.push_copy(&input[range], max),
        }
    }

    /// Bytes kept of a line whose end has not arrived.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn pending(&self) -> usize {
        self.partial.len()
    }

    /// The start of a line whose end has not arrived (empty if none), when it was copied (the
    /// input was not a shared buffer).
    pub(crate) fn pending_line(&self) -> &[u8] {
        debug_assert!(self.partial.is_copied(), "a line kept as parts");
        self.partial.copied()
    }

    /// The start of a line whose end has not arrived, as it was kept.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn pending_parts(&self) -> &Parts {
        &self.partial
    }

    /// Takes the start of a line kept (for a caller that passes every byte on).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn take_pending(&mut self) -> Parts {
        std::mem::take(&mut self.partial)
    }

    /// Whether the last line ended with a CR whose LF, if one comes, has not been read yet.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn after_cr(&self) -> bool {
        self.after_cr
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
/// let mut parser = SseParser::default();
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
    /// The start of a data line whose end has not arrived, checked as UTF-8 as it arrives.
    pending_utf8: PendingUtf8,
    /// A sink that takes bytes gets the data as it came, unchecked (see
    /// [`data_unchecked`](Self::data_unchecked)).
    data_unchecked: bool,
}

/// How far the start of a data line kept while its end has not arrived is known to be UTF-8
/// (issue 21): checked as its bytes arrive, so that at the line's end only the bytes after it
/// are checked, not the whole line again. A character cut by a read is carried: the check stops
/// before it and takes it up with the next bytes.
#[derive(Debug, Default)]
struct PendingUtf8 {
    /// `pending_line()[..valid]` is UTF-8 and ends on a character boundary.
    valid: usize,
    /// A byte sequence that is not UTF-8 was found: the line is checked (and its text replaced)
    /// whole at its end, as any other.
    invalid: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default data limit ([`DEFAULT_MAX_EVENT_DATA`]): what `Default` makes.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::internals::sse::SseParser::default().comments(), 0);
    /// ```
    #[must_use]
    pub(crate) fn new() -> Self {
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
            pending_utf8: PendingUtf8::default(),
            data_unchecked: false,
        }
    }

    /// A parser whose events carry their data as it came, for a sink that takes bytes
    /// ([`feed_raw_shared`](Self::feed_raw_shared)): no UTF-8 check, no replacement; the caller
    /// makes both once the event is whole (the layer reading its inner server's events, which
    /// decides in the same pass whether the message is the final response, issue 21). An SSE
    /// client reads the data as UTF-8 with replacement (WHATWG), and replacing the joined data
    /// lines is replacing each (an LF ends any sequence that is not UTF-8), so the text is the
    /// one this parser would have given.
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn data_unchecked(mut self) -> Self {
        self.data_unchecked = true;
        self
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
    /// data. Default 4,096 (the decoders set it from `Limits`).
    #[must_use]
    pub(crate) fn max_comments_in_a_row(mut self, max: u32) -> Self {
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

    /// Like [`feed`](Self::feed), with the events' data as bytes and every comment line too, in
    /// body order with the events (a comment inside an event's lines comes before that event,
    /// which is dispatched at its blank line; SPEC.md §18 carries records in comments): an event whose
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
        while let Some(piece) = (self.lines)
            .next_in(input, shared, &mut at, max)
            .map_err(too_large)?
        {
            let dispatched = match piece {
                // The whole line is in this input: read in place, without a copy.
                Piece::Line { start, end } => {
                    // A raw sink keeps a data value as a slice of the line, if it is shared.
                    let line = shared.filter(|_| S::RAW).map(|b| b.slice(start..end));
                    self.line(&input[start..end], line.as_ref(), events)?
                }
                // The line's own buffer goes along, so that an event's data can be handed on
                // in place (`CompatDecoder`), with what was checked of it as it arrived.
                Piece::Joined { content, .. } => {
                    let checked = std::mem::take(&mut self.pending_utf8);
                    let valid = if checked.invalid { 0 } else { checked.valid };
                    self.joined_line(content, valid, events)?
                }
                Piece::CrLf { .. } => false,
            };
            if dispatched {
                self.pending_bytes = input.len() - at;
            }
        }
        if S::RAW && !self.data_unchecked {
            // A sink that takes the data as text (`String`) checks it whole at the line's end.
            self.check_pending_utf8();
        }
        Ok(())
    }

    /// Checks as UTF-8 the bytes of a data line that arrived since the last call while its end
    /// has not (issue 21: a 1 MiB line is not checked whole after its last byte). Other lines
    /// (records, comments, which are not text to check) are left alone, as is a body's first
    /// line while it may start with a BOM.
    fn check_pending_utf8(&mut self) {
        let pending = self.lines.pending_line();
        let checked = &mut self.pending_utf8;
        if checked.invalid || pending.len() <= checked.valid {
            return;
        }
        if checked.valid == 0 && (self.at_start || !pending.starts_with(b"data:")) {
            return;
        }
        match simdutf8::compat::from_utf8(&pending[checked.valid..]) {
            Ok(_) => checked.valid = pending.len(),
            Err(err) => {
                checked.valid += err.valid_up_to();
                // `None`: a character cut at the end, completed by the next bytes.
                checked.invalid = err.error_len().is_some();
            }
        }
    }

    /// Ends the input. Returns the number of bytes of an event that was still open (not ended by
    /// a blank line): per the SSE format, such an event is discarded, never dispatched.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::sse::SseParser;
    /// let mut parser = SseParser::default();
    /// let mut events = Vec::new();
    /// parser.feed(b"data: {\"cut\":", &mut events).unwrap();
    /// assert!(events.is_empty());
    /// assert_eq!(parser.finish(), 13);
    /// ```
    pub fn finish(&mut self) -> usize {
        let discarded = self.pending_bytes;
        self.reset_event();
        self.lines.clear();
        self.pending_utf8 = PendingUtf8::default();
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
    /// as it comes, [`CompatDecoder`](crate::mapping::compat::CompatDecoder)).
    pub(crate) fn pending_line(&self) -> &[u8] {
        self.lines.pending_line()
    }

    /// The start of a line whose end has not arrived, as it was kept (parts of the shared inputs
    /// of [`feed_raw_shared`](Self::feed_raw_shared)).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn pending_parts(&self) -> &Parts {
        self.lines.pending_parts()
    }

    /// Whether the open event has a data line already.
    pub(crate) fn event_has_data(&self) -> bool {
        self.has_data
    }

    /// Whether the open event is a message event as far as its fields so far say (no `event`
    /// field yet, or one naming `message`, SPEC.md §18.3).
    #[cfg(feature = "rmcp-server")]
    pub(crate) fn open_event_is_message(&self) -> bool {
        is_message_event(self.event.as_deref())
    }

    /// Interprets one line (without its ending) of the body, as [`LineSplitter`] cut it;
    /// `buffered` is the line as a shared buffer when there is one (kept across reads, or a
    /// slice of a shared input), so that a data value can be kept as a slice of it. Returns
    /// whether the line was blank (an event's end).
    pub(crate) fn line<S: SseSink>(
        &mut self,
        line: &[u8],
        buffered: Option<&Bytes>,
        events: &mut S,
    ) -> Result<bool, SseError> {
        self.line_checked(line, buffered, 0, events)
    }

    /// A line begun in earlier input ([`Piece::Joined`]), whose first `valid` bytes are known to
    /// be UTF-8. A data line kept as the parts of the reads it came in (a shared input) gives
    /// its value as those parts to a sink that takes the data unchecked (the layer): the line is
    /// not copied; any other line is read in one buffer.
    fn joined_line<S: SseSink>(
        &mut self,
        content: Parts,
        valid: usize,
        events: &mut S,
    ) -> Result<bool, SseError> {
        if content.is_copied() {
            let content = content.into_bytes();
            return self.line_checked(&content, Some(&content), valid, events);
        }
        let carries_data = content.len() > b"data: ".len();
        // A line that starts with `data:` starts with no BOM, even the body's first.
        let value_at = content.data_value_start().filter(|_| carries_data);
        if let Some(value_at) = value_at.filter(|_| S::RAW && self.data_unchecked) {
            self.at_start = false;
            self.quiet_lines = 0;
            self.raw_data.push_parts(self.has_data, content.split_off(value_at));
            self.has_data = true;
            self.check_data_len(self.raw_data.len())?;
            return Ok(false);
        }
        let content = content.into_bytes();
        self.line_checked(&content, Some(&content), valid, events)
    }

    /// [`line`](Self::line) of a line whose first `valid` bytes are known to be UTF-8 ending on
    /// a character boundary (checked as they arrived, [`PendingUtf8`]).
    fn line_checked<S: SseSink>(
        &mut self,
        mut line: &[u8],
        buffered: Option<&Bytes>,
        valid: usize,
        events: &mut S,
    ) -> Result<bool, SseError> {
        // The value is the line's end: where it starts in the line as it came.
        let line_len = line.len();
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
        if S::RAW && name == b"data" {
            // The bytes of the value checked as they arrived are not checked again: the rest
            // starts on a character boundary.
            let checked = valid.saturating_sub(line_len - value.len()).min(value.len());
            return self.raw_data_value(value, checked, buffered);
        }
        // The stream is UTF-8 with replacement (WHATWG). Valid text (the usual case) takes the
        // fast validation; `from_utf8_lossy` walks chunk by chunk, as slow as SHA-256 on long
        // data lines (measured: a quarter of decoding a 1 MiB event).
        let value = match simdutf8::basic::from_utf8(value) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        match name {
            b"event" => self.event = Some(value.into_owned()),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
                self.check_data_len(self.data.len())?;
            }
            b"id" if !value.contains('\0') => self.id = Some(value.into_owned()),
            // `retry` and unknown fields are ignored (WHATWG event-stream interpretation).
            _ => {}
        }
        Ok(false)
    }

    /// Adds a data line's value for a sink that takes bytes; `value[..checked]` is known to be
    /// UTF-8 ending on a character boundary. Valid text is a part of the line (`buffered`);
    /// replaced text (WHATWG) is its own.
    fn raw_data_value(
        &mut self,
        value: &[u8],
        checked: usize,
        buffered: Option<&Bytes>,
    ) -> Result<bool, SseError> {
        if self.data_unchecked || simdutf8::basic::from_utf8(&value[checked..]).is_ok() {
            self.raw_data.push(self.has_data, value, buffered);
        } else {
            let text = String::from_utf8_lossy(value);
            self.raw_data.push(self.has_data, text.as_bytes(), None);
        }
        self.has_data = true;
        self.check_data_len(self.raw_data.len())?;
        Ok(false)
    }

    /// The open event's data may hold at most the bound.
    fn check_data_len(&self, len: usize) -> Result<(), SseError> {
        if len > self.max_event_data {
            return Err(SseError::EventTooLarge {
                max: self.max_event_data,
            });
        }
        Ok(())
    }
}
