//! `decode_raw`: arbitrary bytes through the streaming decoder, memory bounded.
//!
//! Input: one limits byte ([`Limits::from_byte`]), then the stream. The decoder gets the whole
//! stream in one buffer, first through `decode` (as a reader would), then `decode_eof`.
//!
//! Oracle:
//! - no panic; every event and the verdict pass [`StreamChecker`] (stream rules, re-encoding);
//! - memory: while the decoder runs, the heap may grow by at most [`memory_budget`] over what
//!   was allocated before the first call. The budget does not grow with the frame limit or with
//!   lengths declared in headers: a decoder that reserves a declared length fails it;
//! - `decode` never returns an end-of-input verdict; after an error every call returns it again;
//! - `decode_all` reaches the same verdict and messages.

use bytes::BytesMut;
use mcp_framing::{DecodeError, StreamDecoder};

use super::MemoryGuard;
use super::checker::StreamChecker;
use super::limits::Limits;

/// Heap growth allowed while the decoder holds `input_len` bytes of input under `limits`.
///
/// An assembling decoder keeps the open message, which can be no larger than the message limit
/// or the input; a `BytesMut` growing by doubling holds at most twice that, plus the old buffer
/// while it moves (so 4x is a bound with room). A decoder that does not assemble keeps no payload.
/// The constant covers the ABORT reason (<= 1 KiB, held twice) and small bookkeeping.
#[must_use]
pub fn memory_budget(limits: &Limits, input_len: usize) -> usize {
    let message = if limits.assemble {
        let max = usize::try_from(limits.max_message_size).unwrap_or(usize::MAX);
        4 * max.min(input_len)
    } else {
        0
    };
    message + 16 * 1024
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When the decoder breaks the oracle.
pub fn run(data: &[u8], guard: &dyn MemoryGuard) {
    let Some((&config, input)) = data.split_first() else {
        return;
    };
    let limits = Limits::from_byte(config);
    let mut buf = BytesMut::from(input);
    let mut decoder = limits.decoder();
    let mut checker = StreamChecker::new(limits, input);
    let limit = guard.allocated() + memory_budget(&limits, input.len());
    let mut at_eof = false;
    let verdict = loop {
        guard.set_limit(Some(limit));
        let result = if at_eof {
            decoder.decode_eof(&mut buf)
        } else {
            decoder.decode(&mut buf)
        };
        guard.set_limit(None);
        match result {
            Ok(Some(event)) => {
                checker.event(&event, input.len() - buf.len(), decoder.progress());
            }
            Ok(None) if !at_eof => at_eof = true,
            Ok(None) => break Ok(()),
            Err(err) => {
                if !at_eof {
                    assert!(
                        !matches!(
                            err,
                            DecodeError::Truncated { .. } | DecodeError::PeerAbort(_)
                        ),
                        "decode returned the end-of-input verdict {err}"
                    );
                }
                break Err(err);
            }
        }
    };
    checker.verdict(&verdict, Some(buf.len()));
    fails_closed(&mut decoder, &mut buf, &verdict);

    match (&verdict, limits.decoder().decode_all(input)) {
        (Ok(()), Ok(stream)) => {
            assert_eq!(Some(stream.head), checker.head(), "decode_all's head");
            let summaries: Vec<_> = stream.messages.iter().map(|m| m.summary()).collect();
            if limits.assemble {
                assert_eq!(summaries, checker.summaries(), "decode_all's messages");
            } else {
                assert!(summaries.is_empty(), "decode_all assembled messages");
            }
            assert_eq!(stream.summary.messages, checker.summaries().len() as u64);
            assert_eq!(
                stream.summary.sentinel_seen,
                decoder.outcome().sentinel_seen,
                "decode_all's sentinel"
            );
        }
        (Err(err), Err(again)) => assert_eq!(err, &again, "decode_all's error"),
        (verdict, all) => panic!("decode_all disagrees: {all:?} after {verdict:?}"),
    }
}

/// After the verdict the decoder stays where it is: an error comes back on every call, a
/// complete stream stays complete.
fn fails_closed(
    decoder: &mut StreamDecoder,
    buf: &mut BytesMut,
    verdict: &Result<(), DecodeError>,
) {
    match verdict {
        Ok(()) => {
            // Complete with the sentinel, or a final response delivered without it (SPEC.md §7
            // row 4), as the outcome records.
            let outcome = decoder.outcome();
            assert!(outcome.is_clean(), "clean end, outcome {outcome:?}");
            assert_eq!(
                decoder.is_complete(),
                outcome.sentinel_seen,
                "complete exactly when the sentinel arrived"
            );
            assert_eq!(decoder.decode(buf), Ok(None), "decode after the end");
            assert_eq!(
                decoder.decode_eof(buf),
                Ok(None),
                "decode_eof after the end"
            );
        }
        Err(err) => {
            assert!(!decoder.is_complete(), "failed decoder says complete");
            assert_eq!(
                decoder.decode(buf).as_ref(),
                Err(err),
                "decode after an error"
            );
            assert_eq!(
                decoder.decode_eof(buf).as_ref(),
                Err(err),
                "decode_eof after an error"
            );
        }
    }
}
