//! Properties of outcomes over generated streams: only a whole stream is clean, and a strict
//! prefix is retried only when that is safe.

use bytes::BytesMut;
use proptest::prelude::*;

use super::{RequestTraits, RetryDecision, RetryPolicy};
use crate::outcome::{Outcome, Verdict};
use crate::test_support::outcome_support::final_result;
use crate::{RequestKey, StreamDecoder, StreamEncoder, StreamHead};

fn encode(messages: &[Vec<u8>], frame_size: usize, key: Option<RequestKey>) -> BytesMut {
    let mut enc = StreamEncoder::builder()
        .frame_size(frame_size)
        .build(StreamHead::for_request(key));
    let mut wire = BytesMut::new();
    for message in messages {
        enc.message(message, &mut wire).unwrap();
    }
    enc.end(&mut wire).unwrap();
    wire
}

fn outcome_of(input: &[u8], key: Option<RequestKey>) -> Outcome {
    let mut builder = StreamDecoder::builder();
    if let Some(key) = key {
        builder = builder.expect_request_key(key);
    }
    let mut decoder = builder.build();
    let _ = final_result(&mut decoder, input);
    decoder.outcome()
}

fn streams() -> impl Strategy<Value = (Vec<Vec<u8>>, usize, Option<RequestKey>)> {
    (
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..100), 0..4),
        1usize..48,
        prop::option::of(
            any::<[u8; 16]>().prop_filter_map("non-zero key", |b| RequestKey::try_from(b).ok()),
        ),
    )
}

proptest! {
    #[test]
    fn whole_stream_is_clean_with_every_message_counted((messages, frame_size, key) in streams()) {
        let wire = encode(&messages, frame_size, key);
        let outcome = outcome_of(&wire, key);
        prop_assert_eq!(&outcome.verdict, &Verdict::Clean);
        prop_assert_eq!(outcome.received.messages, messages.len() as u64);
        prop_assert_eq!(outcome.received.bytes, wire.len() as u64);
    }

    #[test]
    fn every_strict_prefix_is_abandoned_and_retried_only_when_safe(
        (messages, frame_size, key) in streams(),
        cut in any::<prop::sample::Index>(),
    ) {
        let wire = encode(&messages, frame_size, key);
        let cut = cut.index(wire.len());
        let outcome = outcome_of(&wire[..cut], key);
        prop_assert!(matches!(outcome.verdict, Verdict::Abandoned { at: Some(_) }), "{:?}", outcome.verdict);
        prop_assert_eq!(outcome.received.bytes, cut as u64);
        // Against a server that declares deduplication (SPEC.md §17.11); without it a key
        // alone is not enough.
        let request = RequestTraits { is_idempotent: false, request_key: key };
        let decision = RetryPolicy::default().server_deduplicates(true).decide(&outcome, &request);
        prop_assert!(!RetryPolicy::default().decide(&outcome, &request).is_retry());
        prop_assert_eq!(decision.is_retry(), key.is_some());
        prop_assert!(key.is_some() || matches!(decision, RetryDecision::SurfaceToCaller(_)));
    }

    #[test]
    fn any_single_bit_flip_is_never_clean(
        (messages, frame_size, key) in streams(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut wire = encode(&messages, frame_size, key);
        let at = at.index(wire.len());
        wire[at] ^= 1 << bit;
        let outcome = outcome_of(&wire, key);
        prop_assert!(!outcome.is_clean(), "flip at {} bit {}: {:?}", at, bit, outcome.verdict);
    }
}
