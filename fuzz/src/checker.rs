//! Checks a decoder's events, one at a time, against the stream rules, and re-encodes them.
//!
//! [`StreamChecker`] knows nothing of the bytes' meaning: it checks what any correct decoder must
//! report (SPEC.md §3, §5, §7) and rebuilds the stream from the events with the encoder. While no
//! extension frame was skipped, the re-encoding must equal the input byte for byte, which checks
//! every field the decoder reported (head, chunk bytes, digests, abort reason) at once.

use bytes::{Bytes, BytesMut};
use mcp_framing::internals::frame::MAX_ABORT_REASON_LEN;
use mcp_framing::{
    Abort, DecodeError, Event, MessageSummary, Progress, StreamEncoder, StreamHead, StreamSummary,
    Truncation,
};
use sha2::{Digest, Sha256};

use super::limits::Limits;

const AFTER_HEAD: &str = "the re-encoder exists after the head";

/// Room for one re-encoded frame: the largest DATA frame, or an ABORT frame, plus its header.
fn scratch_capacity(limits: &Limits) -> usize {
    limits.max_frame_payload as usize + 2 * 1024
}

/// Follows one decoded stream; see the module docs.
#[derive(Debug)]
pub struct StreamChecker<'a> {
    limits: Limits,
    input: &'a [u8],
    head: Option<StreamHead>,
    end: Option<StreamSummary>,
    abort: Option<Abort>,
    messages: u64,
    /// A message flagged as the final response came (SPEC.md §7.1: at most one).
    final_seen: bool,
    /// The last verified message is the final response, and no chunk came since.
    last_is_final: bool,
    open_len: u64,
    open_hash: Sha256,
    open_chunks: Vec<Bytes>,
    summaries: Vec<MessageSummary>,
    frames: u64,
    encoder: Option<StreamEncoder>,
    scratch: BytesMut,
    synced_to: usize,
    in_sync: bool,
}

impl<'a> StreamChecker<'a> {
    /// A checker for the decoding of `input` by a decoder configured with `limits`.
    ///
    /// It reserves everything it will hold up front (a frame makes at most one chunk and takes at
    /// least 21 bytes, a message at least 60), so that a memory bound armed around the decoder's
    /// calls measures the decoder alone.
    #[must_use]
    pub fn new(limits: Limits, input: &'a [u8]) -> Self {
        Self {
            limits,
            input,
            head: None,
            end: None,
            abort: None,
            messages: 0,
            final_seen: false,
            last_is_final: false,
            open_len: 0,
            open_hash: Sha256::new(),
            open_chunks: Vec::with_capacity(input.len() / 21 + 1),
            summaries: Vec::with_capacity(input.len() / 60 + 1),
            frames: 0,
            encoder: None,
            scratch: BytesMut::with_capacity(scratch_capacity(&limits)),
            synced_to: 0,
            in_sync: true,
        }
    }

    /// The summaries of the messages verified so far.
    #[must_use]
    pub fn summaries(&self) -> &[MessageSummary] {
        &self.summaries
    }

    /// The stream head, once reported.
    #[must_use]
    pub fn head(&self) -> Option<StreamHead> {
        self.head
    }

    /// Checks one event. `consumed` is how many input bytes the decoder had taken from its
    /// buffer when it returned the event, `progress` its progress then.
    ///
    /// # Panics
    ///
    /// When the event breaks a stream rule or does not re-encode to the input.
    pub fn event(&mut self, event: &Event, consumed: usize, progress: Progress) {
        assert!(
            self.end.is_none() && self.abort.is_none(),
            "event after the terminal frame: {event:?}"
        );
        if !matches!(event, Event::Opened(_)) {
            assert!(
                self.head.is_some(),
                "event before the stream head: {event:?}"
            );
        }
        match event {
            Event::Opened(head) => {
                assert!(self.head.is_none(), "second stream head {head:?}");
                if let Some(key) = self.limits.request_key {
                    assert_eq!(
                        head.request_key,
                        Some(key),
                        "head with the wrong key reported"
                    );
                }
                assert_ne!(
                    head.request_key.map(|k| *k.as_bytes()),
                    Some([0; 16]),
                    "the all-zero key means no key (SPEC.md §3)"
                );
                self.head = Some(*head);
                let mut encoder = StreamEncoder::builder()
                    .frame_size(self.limits.max_frame_payload as usize)
                    .max_message_size(u64::MAX)
                    .build(*head);
                encoder.open(&mut self.scratch).expect("open a re-encoding");
                self.encoder = Some(encoder);
            }
            Event::Chunk(chunk) => {
                let bytes = chunk.unverified_bytes();
                assert!(!bytes.is_empty(), "empty chunk");
                assert!(
                    bytes.len() <= self.limits.max_frame_payload as usize,
                    "chunk of {} bytes over the frame limit {}",
                    bytes.len(),
                    self.limits.max_frame_payload
                );
                assert_eq!(
                    chunk.message_index(),
                    self.messages,
                    "chunk's message index"
                );
                assert_eq!(
                    chunk.offset(),
                    self.open_len,
                    "chunk's offset in its message"
                );
                self.open_len += bytes.len() as u64;
                self.last_is_final = false;
                assert!(
                    self.open_len <= self.limits.max_message_size,
                    "message grew to {} bytes past the limit {}",
                    self.open_len,
                    self.limits.max_message_size
                );
                self.open_hash.update(bytes);
                self.open_chunks.push(bytes.clone());
                self.encoder
                    .as_mut()
                    .expect(AFTER_HEAD)
                    .push(bytes, &mut self.scratch)
                    .expect("re-encode a chunk");
            }
            Event::Message(message) => {
                assert!(
                    self.limits.assemble,
                    "Message event from a non-assembling decoder"
                );
                assert!(
                    message.bytes().iter().eq(self.open_chunks.iter().flatten()),
                    "message bytes are not the concatenation of its chunks"
                );
                let digest: [u8; 32] = Sha256::digest(message.bytes()).into();
                assert_eq!(
                    digest,
                    message.summary().sha256,
                    "summary digest of the bytes"
                );
                // SPEC.md §7.1: one final response at most, and only where it is looked for.
                if message.is_final_response() {
                    assert!(
                        self.limits.request_key.is_some(),
                        "a final response flagged by a decoder that expects no key"
                    );
                    assert!(!self.final_seen, "a second final response");
                    self.final_seen = true;
                }
                self.last_is_final = message.is_final_response();
                self.close_message(message.summary());
            }
            Event::MessageVerified(summary) => {
                assert!(
                    !self.limits.assemble,
                    "MessageVerified from an assembling decoder"
                );
                self.close_message(*summary);
            }
            Event::KeepAlive => {
                self.encoder
                    .as_mut()
                    .expect(AFTER_HEAD)
                    .keep_alive(&mut self.scratch)
                    .expect("re-encode a keepalive");
            }
            Event::End(summary) if !summary.sentinel_seen => {
                // SPEC.md §7 row 4: the end of input right after the final response, reported by
                // `decode_eof`: no frame goes with it, and nothing is re-encoded for it.
                assert!(
                    self.limits.request_key.is_some() && self.limits.assemble,
                    "delivered by a decoder that does not look for the final response"
                );
                assert!(
                    self.last_is_final,
                    "delivered, but the last message is not the final response"
                );
                assert_eq!(self.open_len, 0, "delivered inside a message");
                assert_eq!(summary.messages, self.messages, "delivered message count");
                assert_eq!(summary.frames, progress.frames, "delivered frame count");
                assert_eq!(summary.bytes, consumed as u64, "delivered byte count");
                assert_eq!(
                    consumed,
                    self.input.len(),
                    "delivered before the input's end"
                );
                assert_eq!(
                    progress.bytes, consumed as u64,
                    "progress bytes when delivered"
                );
                self.end = Some(*summary);
                return;
            }
            Event::End(summary) => {
                assert_eq!(self.open_len, 0, "STREAM_END inside a message accepted");
                assert_eq!(
                    summary.messages, self.messages,
                    "end summary's message count"
                );
                assert_eq!(summary.frames, progress.frames, "end summary's frame count");
                assert_eq!(summary.bytes, consumed as u64, "end summary's byte count");
                self.end = Some(*summary);
                self.encoder
                    .as_mut()
                    .expect(AFTER_HEAD)
                    .end(&mut self.scratch)
                    .expect("re-encode the end");
            }
            Event::Aborted(abort) => {
                assert!(
                    abort.reason.len() <= MAX_ABORT_REASON_LEN,
                    "abort reason too long"
                );
                self.abort = Some(abort.clone());
                self.encoder
                    .as_mut()
                    .expect(AFTER_HEAD)
                    .abort_with(abort, &mut self.scratch)
                    .expect("re-encode the abort");
                // The open message is discarded (SPEC.md §3 ABORT).
                self.open_chunks.clear();
            }
            other => panic!("event this oracle does not know: {other:?}"),
        }
        self.check_progress(consumed, progress);
        if self.in_sync {
            assert!(
                self.scratch[..] == self.input[self.synced_to..consumed],
                "the events re-encode to other bytes than input[{}..{}]",
                self.synced_to,
                consumed
            );
            self.synced_to = consumed;
        }
        self.scratch.clear();
    }

    fn check_progress(&mut self, consumed: usize, progress: Progress) {
        assert_eq!(
            progress.bytes, consumed as u64,
            "progress bytes vs bytes consumed"
        );
        assert_eq!(progress.messages, self.messages, "progress message count");
        if self.abort.is_none() {
            assert_eq!(
                progress.open_message_bytes, self.open_len,
                "progress open bytes"
            );
        }
        self.frames += 1;
        assert!(progress.frames >= self.frames, "fewer frames than events");
        if progress.frames != self.frames {
            // Extension frames (0x80..=0xFF) were checked and skipped: the encoder cannot write
            // them, so the byte-exact comparison stops here; the event checks go on.
            self.frames = progress.frames;
            self.in_sync = false;
        }
        let head = self.head.expect("progress after head");
        let last = head
            .initial_sequence()
            .wrapping_add((progress.frames - 1) as u32);
        assert_eq!(progress.last_sequence, Some(last), "last sequence number");
    }

    fn close_message(&mut self, summary: MessageSummary) {
        assert_eq!(summary.index, self.messages, "message index");
        assert_eq!(summary.len, self.open_len, "message length vs its chunks");
        let digest: [u8; 32] = self.open_hash.finalize_reset().into();
        assert_eq!(summary.sha256, digest, "message digest vs its chunks");
        let encoded = self
            .encoder
            .as_mut()
            .expect(AFTER_HEAD)
            .finish_message(&mut self.scratch)
            .expect("re-encode a message end");
        assert_eq!(encoded, summary, "re-encoded summary");
        self.reencode_alone(summary);
        self.messages += 1;
        self.open_len = 0;
        self.open_chunks.clear();
        self.summaries.push(summary);
    }

    /// A verified message, framed alone in a stream with the same head and frame boundaries,
    /// decodes to the same message again.
    fn reencode_alone(&self, summary: MessageSummary) {
        let head = self.head.expect("message after head");
        let mut encoder = StreamEncoder::builder()
            .frame_size(self.limits.max_frame_payload as usize)
            .max_message_size(self.limits.max_message_size)
            .build(head);
        let mut wire = BytesMut::new();
        for chunk in &self.open_chunks {
            encoder
                .push(chunk, &mut wire)
                .expect("push a verified chunk");
        }
        let alone = encoder.finish_message(&mut wire).expect("finish");
        encoder.end(&mut wire).expect("end");
        assert_eq!((alone.len, alone.sha256), (summary.len, summary.sha256));
        let limits = Limits {
            assemble: true,
            ..self.limits
        };
        let stream = limits
            .decoder()
            .decode_all(&wire)
            .unwrap_or_else(|err| panic!("a verified message re-encoded fails to decode: {err}"));
        assert_eq!(stream.head, head, "re-encoded head");
        assert_eq!(stream.messages.len(), 1, "re-encoded message count");
        let again = &stream.messages[0];
        assert_eq!(
            (again.summary().len, again.summary().sha256),
            (summary.len, summary.sha256)
        );
        assert!(
            again.bytes().iter().eq(self.open_chunks.iter().flatten()),
            "re-encoded message decodes to other bytes"
        );
    }

    /// Checks the end-of-input verdict. `remaining` is the number of bytes left in the decoder's
    /// buffer when it is known to hold all unconsumed input (one-shot decoding).
    ///
    /// # Panics
    ///
    /// When the verdict contradicts the events (SPEC.md §7) or the configuration.
    pub fn verdict(&self, verdict: &Result<(), DecodeError>, remaining: Option<usize>) {
        let terminal = self.end.is_some() || self.abort.is_some();
        let err = match verdict {
            Ok(()) => {
                let end = self.end.expect("clean end without STREAM_END");
                assert_eq!(remaining.unwrap_or(0), 0, "clean end with bytes left");
                if self.in_sync && end.sentinel_seen {
                    assert_eq!(
                        self.synced_to,
                        self.input.len(),
                        "clean end before the input's end"
                    );
                } else if self.in_sync {
                    // Delivered (SPEC.md §7 row 4): after the last whole frame, part of one
                    // frame at most.
                    let rest = &self.input[self.synced_to..];
                    let declared = rest.get(8..12).map_or(0, |len| {
                        u32::from_be_bytes(len.try_into().expect("4 bytes"))
                    });
                    assert!(
                        rest.len() < 20 || rest.len() < 20 + declared as usize,
                        "delivered with {} bytes after the last whole frame",
                        rest.len()
                    );
                }
                return;
            }
            Err(err) => err,
        };
        match err {
            DecodeError::PeerAbort(abort) => {
                assert_eq!(
                    Some(abort),
                    self.abort.as_ref(),
                    "PeerAbort without that ABORT"
                );
                assert_eq!(remaining.unwrap_or(0), 0, "PeerAbort with bytes left");
            }
            DecodeError::TrailingData { len } => {
                assert!(terminal, "TrailingData before the terminal frame");
                assert!(*len > 0, "TrailingData of no bytes");
                if let Some(remaining) = remaining {
                    assert_eq!(*len, remaining, "TrailingData length");
                }
            }
            DecodeError::Truncated { at, progress } => {
                assert!(!terminal, "Truncated after the terminal frame");
                self.check_truncation(*at, *progress, remaining);
            }
            other => {
                assert!(!terminal, "error after the terminal frame: {other}");
                self.check_error(other);
            }
        }
    }

    fn check_truncation(&self, at: Truncation, progress: Progress, remaining: Option<usize>) {
        assert_eq!(
            progress.bytes,
            self.input.len() as u64,
            "truncation's byte count"
        );
        assert_eq!(
            progress.messages, self.messages,
            "truncation's message count"
        );
        assert_eq!(
            progress.open_message_bytes, self.open_len,
            "truncation's open bytes"
        );
        let whole_frames = || {
            assert_eq!(remaining.unwrap_or(0), 0, "{at:?} with bytes buffered");
            assert!(self.head.is_some(), "{at:?} before the head");
        };
        match at {
            Truncation::NoFrame => {
                assert!(self.input.is_empty(), "NoFrame for a non-empty input");
            }
            Truncation::InHeader { received } => {
                assert!(
                    (1..20).contains(&received),
                    "InHeader with {received} bytes"
                );
                if let Some(remaining) = remaining {
                    assert_eq!(received, remaining, "InHeader's byte count");
                }
            }
            Truncation::InPayload {
                received, declared, ..
            } => {
                assert!(
                    received < declared as usize,
                    "InPayload with the whole payload"
                );
                if let Some(remaining) = remaining {
                    assert_eq!(received, remaining, "InPayload's byte count");
                }
            }
            Truncation::InMessage { message_bytes } => {
                whole_frames();
                assert!(message_bytes > 0, "InMessage without message bytes");
                assert_eq!(message_bytes, self.open_len, "InMessage's byte count");
            }
            Truncation::BetweenMessages { messages } => {
                whole_frames();
                assert_eq!(self.open_len, 0, "BetweenMessages inside a message");
                assert_eq!(messages, self.messages, "BetweenMessages' message count");
            }
            other => panic!("truncation this oracle does not know: {other:?}"),
        }
    }

    fn check_error(&self, err: &DecodeError) {
        match *err {
            DecodeError::FrameTooLarge { len, max } => {
                assert_eq!(max, self.limits.max_frame_payload, "FrameTooLarge's limit");
                assert!(len > max, "FrameTooLarge for {len} <= {max}");
            }
            DecodeError::MessageTooLarge { len, max } => {
                assert_eq!(max, self.limits.max_message_size, "MessageTooLarge's limit");
                assert!(
                    len > max && len > self.open_len,
                    "MessageTooLarge for {len}"
                );
            }
            DecodeError::RequestKeyMismatch { expected, .. } => {
                assert_eq!(
                    Some(expected),
                    self.limits.request_key,
                    "key mismatch, no key set"
                );
            }
            DecodeError::LengthMismatch {
                index, received, ..
            } => {
                assert_eq!(index, self.messages, "LengthMismatch's index");
                assert_eq!(received, self.open_len, "LengthMismatch's received bytes");
            }
            DecodeError::DigestMismatch {
                index, computed, ..
            } => {
                assert_eq!(index, self.messages, "DigestMismatch's index");
                let digest: [u8; 32] = self.open_hash.clone().finalize().into();
                assert_eq!(computed, digest, "DigestMismatch's computed digest");
            }
            DecodeError::MessageCountMismatch { received, .. } => {
                assert_eq!(received, self.messages, "MessageCountMismatch's count");
            }
            _ => {}
        }
    }
}
