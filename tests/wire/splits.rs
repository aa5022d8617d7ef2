//! Every split point: the events and the verdict do not depend on how the input is split into
//! reads, whether fed to the sans-I/O decoder or read by `FramedRead` from a reader that hands
//! out random sizes and interleaves `Poll::Pending`.

use crate::support::common;

use common::vectors::{self, Vector};
use common::{
    Outcome, ReadStep, ScriptedReader, decode_framed, decode_one_shot, decode_pieces,
    split_at_offsets,
};
use proptest::prelude::*;

fn one_shot(vector: &Vector) -> Outcome {
    decode_one_shot(vector.decoder(), &vector.bytes).split_independent()
}

/// The vectors small enough to decode thousands of times per test case.
fn small_vectors() -> Vec<Vector> {
    vectors::all()
        .into_iter()
        .filter(|v| v.bytes.len() <= 4096)
        .collect()
}

#[test]
fn reading_one_byte_at_a_time_gives_the_same_events_for_every_vector() {
    for vector in vectors::all() {
        let whole = one_shot(&vector);
        let bytes = decode_pieces(vector.decoder(), vector.bytes.chunks(1));
        assert_eq!(bytes.split_independent(), whole, "{}", vector.file);
    }
}

#[test]
fn every_three_way_split_of_the_worked_example_gives_the_same_events() {
    let vector = &vectors::all()[0];
    assert_eq!(vector.file, "valid_single_message.bin");
    let whole = one_shot(vector);
    let n = vector.bytes.len();
    for a in 0..=n {
        for b in a..=n {
            let pieces = split_at_offsets(&vector.bytes, &[a, b]);
            let outcome = decode_pieces(vector.decoder(), pieces);
            assert_eq!(outcome.split_independent(), whole, "cuts at {a} and {b}");
        }
    }
}

#[test]
fn framed_read_over_a_reader_that_returns_pending_between_every_byte_matches_one_read() {
    for vector in small_vectors() {
        let whole = one_shot(&vector);
        let script = [ReadStep::Pending, ReadStep::Bytes(1)].repeat(vector.bytes.len() + 1);
        let outcome = decode_framed(
            vector.decoder(),
            ScriptedReader::new(vector.bytes.clone(), script),
        );
        assert_eq!(outcome.split_independent(), whole, "{}", vector.file);
    }
}

#[test]
fn framed_read_in_one_read_matches_the_sans_io_decoder_for_every_vector() {
    for vector in vectors::all() {
        let whole = one_shot(&vector);
        let outcome = decode_framed(vector.decoder(), &vector.bytes[..]);
        assert_eq!(outcome.split_independent(), whole, "{}", vector.file);
    }
}

fn read_script() -> impl Strategy<Value = Vec<ReadStep>> {
    prop::collection::vec(
        prop_oneof![
            1 => Just(ReadStep::Pending),
            4 => (1usize..48).prop_map(ReadStep::Bytes),
            1 => (48usize..4096).prop_map(ReadStep::Bytes),
        ],
        1..200,
    )
}

proptest! {
    #![proptest_config(common::proptest_config(64))]

    #[test]
    fn framed_read_over_a_reader_with_random_sizes_and_pending_matches_one_read(
        script in read_script(),
    ) {
        for vector in vectors::all() {
            let whole = one_shot(&vector);
            let reader = ScriptedReader::new(vector.bytes.clone(), script.clone());
            let outcome = decode_framed(vector.decoder(), reader);
            prop_assert_eq!(outcome.split_independent(), whole, "{}", vector.file);
        }
    }

    #[test]
    fn random_n_way_splits_of_every_vector_give_the_same_events(
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..24),
    ) {
        for vector in vectors::all() {
            let whole = one_shot(&vector);
            let mut offsets: Vec<usize> =
                cuts.iter().map(|c| c.index(vector.bytes.len() + 1)).collect();
            offsets.sort_unstable();
            let pieces = split_at_offsets(&vector.bytes, &offsets);
            let outcome = decode_pieces(vector.decoder(), pieces);
            prop_assert_eq!(outcome.split_independent(), whole, "{}", vector.file);
        }
    }
}
