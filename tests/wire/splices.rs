//! Splices of two attempts of one request, and dropped, duplicated and reordered frames
//! (SPEC.md §4, §5): all detected, at the first frame that does not belong.

use crate::support::common;

use common::vectors::{multiple_messages, multiple_messages_retry};
use common::{
    ATTEMPT, KEY, Outcome, RETRY, RETRY_SAME_PREFIX, decode_one_shot, frame_boundaries, frame_spans,
};
use mcp_framing::{DecodeError, Event, StreamDecoder, StreamState};

fn decoder() -> StreamDecoder {
    StreamDecoder::builder().expect_request_key(KEY).build()
}

/// The stream as a list of frames.
fn frames(bytes: &[u8]) -> Vec<Vec<u8>> {
    frame_spans(bytes)
        .into_iter()
        .map(|span| bytes[span].to_vec())
        .collect()
}

fn sequence_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes(frame[4..8].try_into().expect("4 bytes"))
}

/// Checks that `outcome` has exactly the events of `prefix` (the frames before the first bad
/// one) and then fails with `err`: the error is reported at the first bad frame, not later.
fn assert_caught_at(outcome: &Outcome, prefix: &[u8], err: &DecodeError, context: &str) {
    let mut before = decode_one_shot(decoder(), prefix);
    // The prefix alone, cut after the final response, ends delivered (SPEC.md §7 row 4): an
    // end of input that the stream with the bad frame never reached.
    if matches!(before.events.last(), Some(Event::End(end)) if !end.sentinel_seen) {
        before.events.pop();
    }
    assert_eq!(
        outcome.events, before.events,
        "{context}: events before the bad frame"
    );
    assert_eq!(outcome.end.as_ref(), Err(err), "{context}");
}

#[test]
fn a_splice_of_two_attempts_is_caught_at_the_first_foreign_frame_for_every_cut() {
    let first = multiple_messages(ATTEMPT, 16);
    let retry = multiple_messages_retry(RETRY);
    let (a, b) = (frames(&first), frames(&retry));
    assert_eq!(a.len(), b.len());
    assert_ne!(first, retry);
    for cut in 1..a.len() {
        let prefix = a[..cut].concat();
        let spliced = [prefix.clone(), b[cut..].concat()].concat();
        let outcome = decode_one_shot(decoder(), &spliced);
        let err = DecodeError::ForeignFrame {
            expected: ATTEMPT.initial_sequence().wrapping_add(cut as u32),
            found: RETRY.initial_sequence().wrapping_add(cut as u32),
        };
        assert_caught_at(&outcome, &prefix, &err, &format!("cut after frame {cut}"));
    }
}

#[test]
fn a_retry_restarted_from_its_head_after_a_partial_attempt_is_a_foreign_frame() {
    let first = multiple_messages(ATTEMPT, 16);
    let retry = multiple_messages_retry(RETRY);
    for (i, &cut) in frame_boundaries(&first).iter().enumerate().skip(1) {
        let spliced = [&first[..cut], &retry[..]].concat();
        let outcome = decode_one_shot(decoder(), &spliced);
        let expected = ATTEMPT.initial_sequence().wrapping_add(i as u32);
        let err = if cut == first.len() {
            // After the first attempt's sentinel, anything is trailing data.
            DecodeError::TrailingData { len: retry.len() }
        } else {
            DecodeError::ForeignFrame {
                expected,
                found: RETRY.initial_sequence(),
            }
        };
        assert_caught_at(&outcome, &first[..cut], &err, &format!("cut at {cut}"));
    }
}

#[test]
fn a_splice_of_attempts_with_the_same_sequence_numbers_is_caught_by_the_digest() {
    let first = multiple_messages(ATTEMPT, 16);
    let retry = multiple_messages_retry(RETRY_SAME_PREFIX);
    let genuine_first = decode_one_shot(decoder(), &first).messages();
    let genuine_retry = decode_one_shot(decoder(), &retry).messages();
    let (a, b) = (frames(&first), frames(&retry));
    let mut digest_caught = 0;
    for cut in 1..a.len() {
        let spliced = [a[..cut].concat(), b[cut..].concat()].concat();
        let outcome = decode_one_shot(decoder(), &spliced);
        let context = format!("cut after frame {cut}");
        // Every delivered message is one attempt's genuine message at that index.
        let delivered = outcome.messages();
        for (i, message) in delivered.iter().enumerate() {
            assert!(
                *message == genuine_first[i] || *message == genuine_retry[i],
                "{context}: message {i} is a mix of both attempts"
            );
        }
        // The message open at the cut mixes both attempts: its bytes differ from what the
        // retry's MESSAGE_END describes, unless the first attempt's part was identical.
        let open = open_message_at(&a, cut);
        match open {
            Some((index, ref first_part)) => {
                let retry_message = &genuine_retry[index];
                if first_part[..] != retry_message[..first_part.len()] {
                    assert!(
                        matches!(outcome.end, Err(DecodeError::DigestMismatch { index: i, .. }) if i == index as u64),
                        "{context}: {:?}",
                        outcome.end
                    );
                    digest_caught += 1;
                } else {
                    assert!(outcome.is_clean(), "{context}");
                }
            }
            // Cut at a message boundary: each message is whole and verified; the sequence
            // numbers (equal by construction here, 2^-32 for random attempt ids) cannot tell.
            None => assert!(outcome.is_clean(), "{context}: {:?}", outcome.end),
        }
    }
    assert!(
        digest_caught > 10,
        "only {digest_caught} cuts inside differing messages"
    );
}

/// The index and the bytes received so far of the message open after the first `cut` frames.
fn open_message_at(frames: &[Vec<u8>], cut: usize) -> Option<(usize, Vec<u8>)> {
    let mut index = 0;
    let mut open: Option<Vec<u8>> = None;
    for frame in &frames[..cut] {
        match frame[3] {
            0x02 => open
                .get_or_insert_with(Vec::new)
                .extend_from_slice(&frame[20..]),
            0x03 => {
                index += 1;
                open = None;
            }
            _ => {}
        }
    }
    open.map(|bytes| (index, bytes))
}

#[test]
fn dropping_any_frame_is_a_sequence_gap() {
    let stream = frames(&multiple_messages(ATTEMPT, 16));
    for i in 0..stream.len() {
        let mut edited = stream.clone();
        edited.remove(i);
        let outcome = decode_one_shot(decoder(), &edited.concat());
        let context = format!("frame {i} dropped");
        if i == 0 {
            assert!(
                matches!(
                    outcome.end,
                    Err(DecodeError::UnexpectedFrame {
                        state: StreamState::AwaitingHead,
                        ..
                    })
                ),
                "{context}"
            );
        } else if i == stream.len() - 1 {
            // Dropping the sentinel after the final response leaves the response delivered
            // (SPEC.md §7 row 4): the frames before it are all there, in sequence.
            assert!(
                matches!(outcome.events.last(), Some(Event::End(end)) if !end.sentinel_seen)
                    && outcome.is_clean(),
                "{context}: {:?}",
                outcome.end
            );
        } else {
            let err = DecodeError::SequenceGap {
                expected: sequence_of(&stream[i]),
                found: sequence_of(&stream[i + 1]),
            };
            assert_caught_at(&outcome, &stream[..i].concat(), &err, &context);
        }
    }
}

#[test]
fn duplicating_any_frame_is_a_sequence_replay() {
    let stream = frames(&multiple_messages(ATTEMPT, 16));
    for i in 0..stream.len() {
        let mut edited = stream.clone();
        edited.insert(i + 1, stream[i].clone());
        let outcome = decode_one_shot(decoder(), &edited.concat());
        let context = format!("frame {i} duplicated");
        let err = if i == stream.len() - 1 {
            DecodeError::TrailingData {
                len: stream[i].len(),
            }
        } else {
            DecodeError::SequenceReplay {
                expected: sequence_of(&stream[i]).wrapping_add(1),
                found: sequence_of(&stream[i]),
            }
        };
        assert_caught_at(&outcome, &stream[..=i].concat(), &err, &context);
    }
}

#[test]
fn swapping_any_two_neighbouring_frames_is_a_sequence_gap() {
    let stream = frames(&multiple_messages(ATTEMPT, 16));
    for i in 1..stream.len() - 1 {
        for distance in 1..=3 {
            if i + distance >= stream.len() {
                continue;
            }
            let mut edited = stream.clone();
            edited.swap(i, i + distance);
            let outcome = decode_one_shot(decoder(), &edited.concat());
            let err = DecodeError::SequenceGap {
                expected: sequence_of(&stream[i]),
                found: sequence_of(&stream[i + distance]),
            };
            let context = format!("frames {i} and {} swapped", i + distance);
            assert_caught_at(&outcome, &stream[..i].concat(), &err, &context);
        }
    }
}

#[test]
fn a_replayed_whole_message_is_a_sequence_replay() {
    let stream = frames(&multiple_messages(ATTEMPT, 16));
    let ends: Vec<usize> = (0..stream.len())
        .filter(|&i| stream[i][3] == 0x03)
        .collect();
    // Frames of the second message, sent again after it.
    let (start, end) = (ends[0] + 1, ends[1]);
    let mut edited = stream[..=end].to_vec();
    edited.extend_from_slice(&stream[start..=end]);
    edited.extend_from_slice(&stream[end + 1..]);
    let outcome = decode_one_shot(decoder(), &edited.concat());
    let err = DecodeError::SequenceReplay {
        expected: sequence_of(&stream[end]).wrapping_add(1),
        found: sequence_of(&stream[start]),
    };
    assert_caught_at(&outcome, &stream[..=end].concat(), &err, "message replayed");
    assert_eq!(outcome.messages().len(), 2);
    assert!(
        outcome
            .events
            .iter()
            .all(|e| !matches!(e, Event::End(_) | Event::Aborted(_)))
    );
}
