//! The compatible mapping's decoder (SPEC.md §18): body bytes in, the binary frame bytes they
//! carry out, with the payload checks made as each message event's data line arrives.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use crate::decoder::Prehashed;
use crate::frame::{FrameHeader, FrameKind, HEADER_LEN};
use crate::limits::DEFAULT_MAX_COMPAT_EVENT_DATA as DEFAULT_MAX_EVENT_DATA;
use crate::mapping::sse::{FirstError, RawItem, SseParser, is_message_event, put_base64_decoded};
use crate::mapping::{CompatError, SseError};

use super::record::{RECORD_MARK, RECORD_PREFIX};

/// A record's content, queued until it can be moved into the binary stream.
#[derive(Debug)]
enum Queued {
    /// A whole frame other than DATA: header and payload.
    Frame(Bytes),
    /// A DATA header (its payload comes from a message event) and its declared length.
    Data { header: Bytes, len: u32 },
    /// The rest of a record from a frame that is not whole or whose header fails its checks.
    Broken(Bytes),
}

/// The most frame bytes not yet taken by the frame decoder that
/// [`CompatDecoder::hand_over_run`] moves to the front of an event's buffer rather than copying
/// the event: one record's frames, bounded so that a caller who never drains `frames` costs a
/// copy per event of at most this, not of everything it left there.
const MAX_MOVED_PREFIX: usize = 4096;

/// The event data from which [`CompatDecoder::hand_over_run`] lays the frames out in the data's
/// own buffer even when that buffer must grow for the headers.
const MIN_IN_PLACE: usize = 16 * 1024;

/// The header and payload length of a queued DATA frame.
fn data_frame(item: &Queued) -> Option<(&Bytes, usize)> {
    match item {
        Queued::Data { header, len } => Some((header, *len as usize)),
        _ => None,
    }
}

/// Decodes the compatible SSE mapping: body bytes in, binary frame bytes out (SPEC.md §18.5).
///
/// Feed the output to a [`StreamDecoder`](crate::StreamDecoder); at the end of the body call
/// [`finish`](Self::finish) and then the stream decoder's `decode_eof`, which decides whether
/// the stream was complete. On an error, decode the frame bytes handed over before it first: an
/// error in them comes earlier in the body and is the verdict (SPEC.md §15, §18.5).
///
/// Memory: one event (at most the event bound), one line, and the frames of one record.
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use mcp_framing::internals::sse_compat::{CompatDecoder, CompatEncoder};
/// use mcp_framing::{StreamDecoder, StreamEncoder, StreamHead};
///
/// let mut body = BytesMut::new();
/// let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
/// enc.final_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut body)?;
///
/// let mut dec = CompatDecoder::new();
/// let mut frames = BytesMut::new();
/// dec.feed(&body, &mut frames).unwrap();
/// dec.finish();
/// assert_eq!((dec.records(), dec.message_events()), (1, 1));
/// let stream = StreamDecoder::new().decode_all(&frames).unwrap();
/// assert_eq!(stream.messages[0].bytes().as_ref(), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
/// # Ok::<(), mcp_framing::internals::sse_compat::CompatEncodeError>(())
/// ```
#[derive(Debug)]
pub struct CompatDecoder {
    parser: SseParser,
    items: Vec<RawItem>,
    queue: VecDeque<Queued>,
    /// Payload length of the DATA frame whose header was handed over and which waits for its
    /// message event.
    waiting: Option<u32>,
    /// A message event filled DATA frames of a message whose MESSAGE_END (or an ABORT) was not
    /// handed over yet.
    open_message: bool,
    failed: FirstError<CompatError>,
    records: u64,
    message_events: u64,
    keep_alives: u64,
    /// The data line of the waiting DATA frame's event, hashed as it arrives (issue 21).
    hashing: Option<Box<LineHashing>>,
    /// Binary stream bytes handed over so far (to `frames`, over every call).
    handed: u64,
    /// Where `frames[0]` lies in the binary stream during a call (`None`: not known, as when a
    /// caller put bytes of its own in `frames`).
    origin: Option<u64>,
    /// Whether to hash the message events' data as it arrives, for a frame decoder that takes
    /// the checks ([`prehash`](Self::prehash)).
    prehash: bool,
    /// The checks of the message events handed over, computed as their data arrived, for the
    /// frame decoder ([`take_prehashed`](Self::take_prehashed)).
    prehashed: VecDeque<Prehashed>,
}

/// The hashing of a data line while it arrives: the run of DATA frames it fills, CRC-32 frame by
/// frame and SHA-256 over all.
#[derive(Debug)]
struct LineHashing {
    /// The run's payload lengths (SPEC.md §18.5 step 3).
    lens: Vec<u32>,
    /// Where the value starts in the line (after `data:` and one optional space).
    value_at: usize,
    /// Bytes of the value hashed.
    hashed: usize,
    /// The frame being hashed, and its bytes hashed.
    frame: usize,
    in_frame: usize,
    crc: crc32fast::Hasher,
    crcs: Vec<u32>,
    sha: sha2::Sha256,
    /// The value is longer than the run: the event will not be handed over as it is.
    overrun: bool,
}

impl LineHashing {
    fn new(lens: Vec<u32>, value_at: usize) -> Self {
        let mut hashing = Self {
            crcs: Vec::with_capacity(lens.len()),
            lens,
            value_at,
            hashed: 0,
            frame: 0,
            in_frame: 0,
            crc: crc32fast::Hasher::new(),
            sha: sha2::Sha256::default(),
            overrun: false,
        };
        hashing.close_frames();
        hashing
    }

    /// Hashes the next bytes of the value.
    fn update(&mut self, mut bytes: &[u8]) {
        use sha2::Digest as _;
        self.hashed += bytes.len();
        while !bytes.is_empty() {
            let Some(&len) = self.lens.get(self.frame) else {
                self.overrun = true;
                return;
            };
            let take = (len as usize - self.in_frame).min(bytes.len());
            let (piece, rest) = bytes.split_at(take);
            self.crc.update(piece);
            self.sha.update(piece);
            self.in_frame += take;
            bytes = rest;
            self.close_frames();
        }
    }

    /// Ends the frames whose payload is complete (empty ones included).
    fn close_frames(&mut self) {
        while self
            .lens
            .get(self.frame)
            .is_some_and(|&len| self.in_frame == len as usize)
        {
            let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new());
            self.crcs.push(crc.finalize());
            self.frame += 1;
            self.in_frame = 0;
        }
    }

    /// The checks of the whole value `data`, if it filled the run exactly, for payloads handed
    /// over as their headers alone: the first payload at `base` in the frame bytes, each next
    /// one after the next header (the frame decoder takes the payloads from `data`).
    fn finish(self, data: &Bytes, base: u64) -> Option<Prehashed> {
        use sha2::Digest as _;
        if self.overrun || self.hashed != data.len() || self.frame != self.lens.len() {
            return None;
        }
        let mut at = base;
        let payloads = self
            .lens
            .iter()
            .zip(&self.crcs)
            .map(|(&len, &crc)| {
                let payload = (at, len, crc);
                at += HEADER_LEN as u64;
                payload
            })
            .collect();
        Some(Prehashed {
            payloads,
            sha256: self.sha.finalize().into(),
            message: data.clone(),
        })
    }
}

impl Default for CompatDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl CompatDecoder {
    /// A decoder with the default event bound ([`DEFAULT_MAX_EVENT_DATA`]).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::internals::sse_compat::CompatDecoder::new().records(), 0);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        Self::with_max_event_data(DEFAULT_MAX_EVENT_DATA)
    }

    /// A decoder whose events (their data, and every line) may hold at most `max` bytes; set it
    /// to the frame decoder's max message size plus 64 KiB (SPEC.md §18.7).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::mapping::SseError;
    /// use mcp_framing::{internals::sse_compat::CompatDecoder, mapping::CompatError};
    /// let mut dec = CompatDecoder::with_max_event_data(8);
    /// let err = dec.feed(b"data: 0123456789\n", &mut bytes::BytesMut::new()).unwrap_err();
    /// assert_eq!(err, CompatError::Sse(SseError::EventTooLarge { max: 8 }));
    /// ```
    #[must_use]
    pub fn with_max_event_data(max: usize) -> Self {
        Self {
            parser: SseParser::with_max_event_data(max),
            items: Vec::new(),
            queue: VecDeque::new(),
            waiting: None,
            open_message: false,
            failed: FirstError::default(),
            records: 0,
            message_events: 0,
            keep_alives: 0,
            hashing: None,
            handed: 0,
            origin: None,
            prehash: false,
            prehashed: VecDeque::new(),
        }
    }

    /// Hashes each message event's data line as it arrives (CRC-32 of each DATA payload, SHA-256
    /// of the message), for a frame decoder that takes the checks with
    /// [`take_prehashed`](Self::take_prehashed) after every call, so that it compares them once
    /// the event is whole instead of hashing the message then (`BodyDecoder`, issue 21).
    pub(crate) fn prehash(mut self) -> Self {
        self.prehash = true;
        self
    }

    /// The checks of the message events handed over since the last call, computed as their data
    /// arrived, in stream order (see [`Prehashed`]).
    pub(crate) fn take_prehashed(&mut self) -> impl Iterator<Item = Prehashed> + '_ {
        self.prehashed.drain(..)
    }

    /// Fails with [`SseError::TooManyComments`] once more than `max` lines in a row carry no
    /// data (see [`SseParser::max_comments_in_a_row`]): keep-alive comments and records alike,
    /// since a record without a message event after it carries no message. Default 4,096.
    #[must_use]
    pub(crate) fn max_comments_in_a_row(mut self, max: u32) -> Self {
        self.parser = self.parser.max_comments_in_a_row(max);
        self
    }

    /// Record lines seen so far.
    ///
    /// # Examples
    ///
    /// See [`CompatDecoder`].
    #[must_use]
    pub fn records(&self) -> u64 {
        self.records
    }

    /// `message` events (with data) seen so far.
    ///
    /// # Examples
    ///
    /// See [`CompatDecoder`].
    #[must_use]
    pub fn message_events(&self) -> u64 {
        self.message_events
    }

    /// Comment lines that are not records (keep-alives) skipped so far.
    #[must_use]
    pub(crate) fn keep_alives(&self) -> u64 {
        self.keep_alives
    }

    /// Parses `input` and appends the binary frame bytes it completes to `frames`.
    ///
    /// # Errors
    ///
    /// Any [`CompatError`]. After an error the decoder returns the same error again. The frame
    /// bytes that precede the error in the body are appended to `frames` first: decode them
    /// before acting on the error. What ends up in `frames` and which error is returned do not
    /// depend on how the body is split into calls.
    ///
    /// # Examples
    ///
    /// See [`CompatDecoder`].
    pub fn feed(&mut self, input: &[u8], frames: &mut BytesMut) -> Result<(), CompatError> {
        self.failed.check()?;
        // `frames` holds the stream's last bytes handed over, if the caller added none.
        self.origin = self.handed.checked_sub(frames.len() as u64);
        let result = self.feed_inner(input, frames);
        self.handed = self
            .handed
            .max(self.origin.map_or(0, |o| o + frames.len() as u64));
        if result.is_ok() {
            self.hash_pending();
        } else {
            self.hashing = None;
        }
        self.failed.keep(result)
    }

    /// Hashes what arrived of the data line of the event the waiting DATA frame waits for (its
    /// first data line, of the run's length at most), so that once the event is whole its checks
    /// are made (issue 21). Any other line is left alone.
    fn hash_pending(&mut self) {
        if !self.prehash {
            return;
        }
        let Some(first) = self.waiting else {
            self.hashing = None;
            return;
        };
        if self.parser.event_has_data() {
            // The line ended (the rest of it is in the event's data) or it is not the event's
            // first data line.
            return;
        }
        let pending = self.parser.pending_line();
        if self.hashing.is_none() {
            if pending.len() < b"data: ".len() || !pending.starts_with(b"data:") {
                return;
            }
            let value_at = 5 + usize::from(pending[5] == b' ');
            self.hashing = Some(Box::new(LineHashing::new(self.run_lens(first), value_at)));
        }
        if let Some(hashing) = &mut self.hashing {
            if let Some(new) = pending.get(hashing.value_at + hashing.hashed..) {
                if !hashing.overrun {
                    hashing.update(new);
                }
            }
        }
    }

    /// The payload lengths of the run a message event fills: the waiting DATA frame's (`first`)
    /// and those of the DATA headers queued right after it (SPEC.md §18.5 step 3).
    fn run_lens(&self, first: u32) -> Vec<u32> {
        std::iter::once(first)
            .chain(self.queue.iter().map_while(|item| match item {
                Queued::Data { len, .. } => Some(*len),
                _ => None,
            }))
            .collect()
    }

    fn feed_inner(&mut self, input: &[u8], frames: &mut BytesMut) -> Result<(), CompatError> {
        // The items completed before a line that fails come first in the body (SPEC.md §15).
        let parsed = self.parser.feed_raw_items(input, &mut self.items);
        let mut items = std::mem::take(&mut self.items);
        let mut result = Ok(());
        for item in items.drain(..) {
            result = match item {
                RawItem::Comment(text) => self.comment(text, frames),
                RawItem::Event { name, data, whole } => {
                    // Fed from a buffer of its own: the data is in one buffer, not copied here.
                    let data = data.into_bytes();
                    // What was hashed of it belongs to this event alone.
                    let hashing = self.hashing.take().filter(|_| whole);
                    if data.is_empty() {
                        // Carries nothing (an `id`-only priming event): SSE would not dispatch it.
                        Ok(())
                    } else if is_message_event(name.as_deref()) {
                        self.message_event(data, hashing, frames)
                    } else {
                        Err(CompatError::Sse(SseError::UnexpectedEvent {
                            name: name.unwrap_or_default(),
                        }))
                    }
                }
            };
            if result.is_err() {
                break;
            }
        }
        items.clear();
        self.items = items;
        result?;
        parsed.map_err(CompatError::Sse)
    }

    fn comment(&mut self, text: Bytes, frames: &mut BytesMut) -> Result<(), CompatError> {
        if !text.starts_with(RECORD_MARK) {
            self.keep_alives += 1;
            return Ok(());
        }
        let record = self.records;
        self.records += 1;
        // SPEC.md §18.5 step 1: no record while a DATA frame waits for its event.
        if self.waiting.is_some() {
            return Err(CompatError::EventMissing { record });
        }
        let invalid = CompatError::InvalidRecord { record };
        let base64 = match text.strip_prefix(&RECORD_PREFIX.as_bytes()[1..]) {
            Some(base64) if !base64.is_empty() => base64,
            _ => return Err(invalid),
        };
        let mut bytes = BytesMut::new();
        put_base64_decoded(base64, &mut bytes).map_err(|_| invalid.clone())?;
        let bytes = bytes.freeze();
        self.queue_frames(bytes);
        self.flush(frames, record)
    }

    /// Splits a record's bytes into frames (SPEC.md §18.5 step 1). Lengths and kinds are read
    /// only from headers that pass the checks of §2 steps 1–2 (the decoder's own header parse).
    fn queue_frames(&mut self, bytes: Bytes) {
        let mut at = 0;
        while at < bytes.len() {
            let header = bytes
                .get(at..at + HEADER_LEN)
                .and_then(|raw| <&[u8; HEADER_LEN]>::try_from(raw).ok())
                .and_then(|raw| FrameHeader::parse(raw).ok());
            let Some(header) = header else {
                self.queue.push_back(Queued::Broken(bytes.slice(at..)));
                return;
            };
            if header.kind == FrameKind::Data.to_byte() {
                self.queue.push_back(Queued::Data {
                    header: bytes.slice(at..at + HEADER_LEN),
                    len: header.len,
                });
                at += HEADER_LEN;
                continue;
            }
            let end = (at + HEADER_LEN).saturating_add(header.len as usize);
            if end > bytes.len() {
                self.queue.push_back(Queued::Broken(bytes.slice(at..)));
                return;
            }
            self.queue.push_back(Queued::Frame(bytes.slice(at..end)));
            at = end;
        }
    }

    /// Moves queued items into the binary stream up to a DATA header, which then waits for its
    /// event (SPEC.md §18.5 step 2).
    fn flush(&mut self, frames: &mut BytesMut, record: u64) -> Result<(), CompatError> {
        while let Some(item) = self.queue.pop_front() {
            match item {
                Queued::Frame(frame) => {
                    frames.extend_from_slice(&frame);
                    // The kind byte of a header that passed its checks (`queue_frames`).
                    if matches!(
                        FrameKind::from_byte(frame[3]),
                        Some(FrameKind::MessageEnd | FrameKind::Abort)
                    ) {
                        self.open_message = false;
                    }
                }
                Queued::Data { header, len } => {
                    // Handed over now: the frame decoder checks the header (its sequence number,
                    // the limits) before the payload arrives (SPEC.md §2).
                    frames.extend_from_slice(&header);
                    if self.open_message {
                        // One message, one event (SPEC.md §18.5 step 2).
                        return Err(CompatError::SplitMessage { record });
                    }
                    self.waiting = Some(len);
                    return Ok(());
                }
                Queued::Broken(rest) => {
                    frames.extend_from_slice(&rest);
                    return Err(CompatError::InvalidRecord { record });
                }
            }
        }
        Ok(())
    }

    /// A message event fills the waiting DATA frame and the DATA headers right after it
    /// (SPEC.md §18.5 step 3).
    fn message_event(
        &mut self,
        data: Bytes,
        hashing: Option<Box<LineHashing>>,
        frames: &mut BytesMut,
    ) -> Result<(), CompatError> {
        let event = self.message_events;
        self.message_events += 1;
        let Some(first) = self.waiting else {
            return Err(CompatError::UnframedEvent { event });
        };
        // The run: the waiting DATA frame and the DATA headers right after it. An event of
        // another length is rejected whole, before any of its bytes is handed over.
        let run = 1 + self
            .queue
            .iter()
            .take_while(|item| matches!(item, Queued::Data { .. }))
            .count();
        let declared = u64::from(first)
            + self
                .queue
                .iter()
                .take(run - 1)
                .map(|item| match item {
                    Queued::Data { len, .. } => u64::from(*len),
                    _ => 0,
                })
                .sum::<u64>();
        if declared != data.len() as u64 {
            return Err(CompatError::EventLengthMismatch {
                declared,
                carried: data.len() as u64,
            });
        }
        self.waiting = None;
        self.open_message = true;
        // The checks, made while the data arrived (the rest of it, which came with the line's
        // end, is hashed now) or on the data now: the frame decoder takes them, and the payloads
        // from the data itself, so that only the DATA headers are handed over (issue 21: no copy
        // of the message into the frame bytes).
        if let (true, Some(origin)) = (self.prehash, self.origin) {
            let mut hashing =
                hashing.unwrap_or_else(|| Box::new(LineHashing::new(self.run_lens(first), 0)));
            if let Some(rest) = data.get(hashing.hashed..) {
                hashing.update(rest);
            }
            let base = origin + frames.len() as u64;
            if let Some(checks) = hashing.finish(&data, base) {
                self.prehashed.push_back(checks);
                for (header, _) in self.queue.iter().take(run - 1).filter_map(data_frame) {
                    frames.extend_from_slice(header);
                }
                self.queue.drain(..run - 1);
                return self.flush(frames, self.records.saturating_sub(1));
            }
        }
        self.hand_over_run(data, first as usize, run - 1, frames);
        self.flush(frames, self.records.saturating_sub(1))
    }

    /// Appends an event's data to `frames` as the payload of the waiting DATA frame (`first`
    /// bytes) and of the `rest` DATA frames queued after it, with their headers between the
    /// payloads; the lengths were checked against the data.
    ///
    /// When the data is the only handle on its buffer (a data line that arrived in several
    /// reads, or a joined one), `frames` holds little (the frame decoder took what came
    /// before) and the buffer has room or the data is large ([`MIN_IN_PLACE`]), the frames are
    /// laid out in that buffer, which becomes `frames`: the payloads
    /// move back past the headers (and the bytes `frames` held) in place, and the message is
    /// not copied into a second buffer of its size.
    fn hand_over_run(&mut self, data: Bytes, first: usize, rest: usize, frames: &mut BytesMut) {
        let total = data.len() + rest * HEADER_LEN;
        let data = if frames.len() <= MAX_MOVED_PREFIX {
            match data.try_into_mut() {
                // Worth it when the buffer has room already (a line grown as it arrived) or the
                // message is large: a small one is cheaper copied than its buffer grown.
                Ok(mut run)
                    if run.capacity() >= frames.len() + total || run.len() >= MIN_IN_PLACE =>
                {
                    let (prefix, carried) = (frames.len(), run.len());
                    run.resize(prefix + total, 0);
                    // Last payload first: each one moves back by the headers before it.
                    let (mut from_end, mut to_end) = (carried, prefix + total);
                    for (header, len) in self.queue.iter().take(rest).rev().filter_map(data_frame) {
                        let (from, to) = (from_end - len, to_end - len);
                        run.copy_within(from..from_end, to);
                        run[to - HEADER_LEN..to].copy_from_slice(header);
                        (from_end, to_end) = (from, to - HEADER_LEN);
                    }
                    debug_assert_eq!((from_end, to_end), (first, prefix + first));
                    run.copy_within(..first, prefix);
                    run[..prefix].copy_from_slice(frames);
                    self.queue.drain(..rest);
                    *frames = run;
                    return;
                }
                Ok(run) => run.freeze(),
                Err(data) => data,
            }
        } else {
            data
        };
        // Room for the payloads and the headers between them at once, not by doubling.
        frames.reserve(total);
        frames.extend_from_slice(&data[..first]);
        let mut at = first;
        for (header, len) in self.queue.iter().take(rest).filter_map(data_frame) {
            frames.extend_from_slice(header);
            frames.extend_from_slice(&data[at..at + len]);
            at += len;
        }
        self.queue.drain(..rest);
    }

    /// Ends the body; returns the bytes received since the last blank line (as
    /// [`SseParser::finish`]): an event left open among them is discarded (SPEC.md §15, §18.5
    /// step 5), while complete comment lines among them, records included, were already handled.
    /// What the receiver has handed over decides the verdict: call the frame decoder's
    /// `decode_eof` next.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut dec = mcp_framing::internals::sse_compat::CompatDecoder::new();
    /// dec.feed(b"data: {\"cut", &mut bytes::BytesMut::new()).unwrap();
    /// assert_eq!(dec.finish(), 11);
    /// ```
    pub fn finish(&mut self) -> usize {
        self.parser.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::StreamEncoder;
    use crate::frame::{FrameHeader, StreamHead};
    use crate::mapping::SseError;
    use crate::mapping::compat::CompatEncoder;

    #[test]
    fn more_comment_lines_in_a_row_than_the_bound_fail_as_too_many_comments() {
        let mut dec = CompatDecoder::new().max_comments_in_a_row(2);
        let err = dec
            .feed(b": a\n: b\n: c\n", &mut BytesMut::new())
            .unwrap_err();
        assert_eq!(err, CompatError::Sse(SseError::TooManyComments { max: 2 }));
    }

    #[test]
    fn comment_lines_that_are_not_records_are_counted_as_keep_alives() {
        let mut dec = CompatDecoder::new();
        dec.feed(b":\n\n: keep-alive\n\n", &mut BytesMut::new())
            .unwrap();
        assert_eq!(dec.keep_alives(), 2);
    }

    #[test]
    fn after_a_record_alone_the_decoder_waits_for_its_message_event() {
        let mut body = BytesMut::new();
        let mut enc = CompatEncoder::new(StreamEncoder::new(StreamHead::for_request(None)));
        enc.final_message(b"{}", &mut body).unwrap();
        let record_end = body.iter().position(|&b| b == b'\n').unwrap() + 1;
        let mut dec = CompatDecoder::new();
        dec.feed(&body[..record_end], &mut BytesMut::new()).unwrap();
        assert!(dec.waiting.is_some());
    }

    /// A body of two messages (one over several DATA frames) with a notification before them.
    fn body() -> (BytesMut, Vec<Vec<u8>>) {
        let encoder = StreamEncoder::builder()
            .frame_size(1000)
            .build(StreamHead::for_request(None));
        let mut enc = CompatEncoder::new(encoder);
        let messages: Vec<Vec<u8>> = vec![
            br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.to_vec(),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{}"}}}}"#,
                "é".repeat(2100)
            )
            .into_bytes(),
        ];
        let mut body = BytesMut::new();
        enc.message(&messages[0], &mut body).unwrap();
        enc.final_message(&messages[1], &mut body).unwrap();
        (body, messages)
    }

    /// The binary stream from frame bytes handed over with the payloads `entries` cover left
    /// out (their headers only): each such payload put back from its entry's message where its
    /// entry places it, its length that of its header and its CRC-32 that of its own bytes.
    fn rebuild(frames: &[u8], entries: &[Prehashed]) -> Vec<u8> {
        let mut places: VecDeque<(u64, u32, u32, Bytes)> = entries
            .iter()
            .flat_map(|entry| {
                let mut at = 0;
                entry.payloads.iter().map(move |&(offset, len, crc)| {
                    let payload = entry.message.slice(at..at + len as usize);
                    at += len as usize;
                    (offset, len, crc, payload)
                })
            })
            .collect();
        let (mut stream, mut at) = (Vec::new(), 0);
        while at + HEADER_LEN <= frames.len() {
            let header = FrameHeader::read(frames[at..at + HEADER_LEN].try_into().unwrap());
            stream.extend_from_slice(&frames[at..at + HEADER_LEN]);
            at += HEADER_LEN;
            if places.front().is_some_and(|place| place.0 == at as u64) {
                let (_, len, crc, payload) = places.pop_front().unwrap();
                // The CRC-32 of the bytes dispatched (the frame decoder compares it with the
                // header's).
                assert_eq!(len, header.len);
                assert_eq!(crc32fast::hash(&payload), crc);
                stream.extend_from_slice(&payload);
            } else {
                // A payload that never came (its event refused) ends the bytes.
                let end = (at + header.len as usize).min(frames.len());
                stream.extend_from_slice(&frames[at..end]);
                at = end;
            }
        }
        assert!(places.is_empty(), "every entry's places are in the frame bytes");
        stream.extend_from_slice(&frames[at..]);
        stream
    }

    /// `body` fed in `piece`-byte reads: the frame bytes handed over (the frame decoder
    /// draining half of them now and then) and the checks made, with or without `prehash`.
    fn feed(body: &[u8], piece: usize, prehash: bool) -> (Vec<u8>, Vec<Prehashed>) {
        let mut dec = CompatDecoder::new();
        if prehash {
            dec = dec.prehash();
        }
        let (mut frames, mut stream, mut entries) = (BytesMut::new(), Vec::new(), Vec::new());
        for chunk in body.chunks(piece) {
            let failed = dec.feed(chunk, &mut frames).is_err();
            entries.extend(dec.take_prehashed());
            let half = frames.len() / 2;
            stream.extend_from_slice(&frames.split_to(half));
            if failed {
                break;
            }
        }
        dec.finish();
        stream.extend_from_slice(&frames);
        (stream, entries)
    }

    #[test]
    fn a_data_line_that_arrives_in_pieces_is_hashed_as_it_comes_and_only_its_headers_are_handed_over()
     {
        use sha2::Digest as _;
        let (body, messages) = body();
        let (wire, none) = feed(&body, body.len(), false);
        assert!(none.is_empty());
        for piece in [1, 7, 100, 999, 4096, body.len()] {
            let (frames, entries) = feed(&body, piece, true);
            // Both messages' payloads are left out of the frame bytes; put back, they are the
            // binary stream.
            assert_eq!(entries.len(), 2, "piece {piece}");
            assert_eq!(frames.len(), wire.len() - messages[0].len() - messages[1].len());
            assert_eq!(rebuild(&frames, &entries), wire, "piece {piece}");
            for (entry, message) in entries.iter().zip(&messages) {
                assert_eq!(&entry.message[..], &message[..]);
                assert_eq!(entry.sha256, <[u8; 32]>::from(sha2::Sha256::digest(message)));
            }
        }
    }

    #[test]
    fn a_data_line_altered_on_the_way_is_checked_on_the_bytes_dispatched() {
        use sha2::Digest as _;
        let (body, _) = body();
        let text = String::from_utf8(body.to_vec()).unwrap();
        // Longer than its run, two data lines, text SSE replaces: each refused, or checked on
        // the data as dispatched, never with checks computed on the bytes as they came.
        let longer = text.replacen("é\"}}", "éé\"}}", 1);
        let split = text.replacen("éé", "é\ndata: é", 1);
        // Four bytes that SSE replaces by four others (U+FFFD for a cut 4-byte sequence, then
        // `A`): the event keeps its length, so only knowing that the data was replaced keeps
        // the checks of the bytes that came from being used for the bytes dispatched.
        let replaced = {
            let mut bytes = body.to_vec();
            let at = bytes.len() - 21;
            assert_eq!(&bytes[at..at + 4], "éé".as_bytes());
            bytes[at..at + 4].copy_from_slice(&[0xf0, 0x9f, 0x98, b'A']);
            bytes
        };
        for altered in [longer.into_bytes(), split.into_bytes(), replaced] {
            for piece in [1, 64, altered.len()] {
                let (frames, entries) = feed(&altered, piece, true);
                let (plain, _) = feed(&altered, piece, false);
                // `rebuild` checks each CRC-32 on the payload's own bytes.
                assert_eq!(rebuild(&frames, &entries), plain, "piece {piece}");
                for entry in &entries {
                    let sha256 = <[u8; 32]>::from(sha2::Sha256::digest(&entry.message));
                    assert_eq!(entry.sha256, sha256, "piece {piece}");
                }
            }
        }
    }
}
