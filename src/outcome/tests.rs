//! The regime decision table (SPEC.md §11.4) on all 16 combinations of the four observations.

use super::{
    Completion, DiscoveryMode, Observations, Regime, StreamCompletionAmbiguousError, classify,
};

/// What a row of the table expects.
#[derive(Debug, PartialEq)]
enum Expected {
    Clean(Regime),
    Abandoned(Regime),
    Ambiguous(DiscoveryMode),
}

use DiscoveryMode::{Stateless, Sticky};
use Expected::{Abandoned, Ambiguous, Clean};
use Regime::{A, B};

/// The table written out row by row (sentinel, self-delimiting, integrity ok, sticky) => result,
/// independently of the implementation.
const TABLE: [(bool, bool, bool, bool, Expected); 16] = [
    (false, false, false, false, Ambiguous(Stateless)),
    (false, false, false, true, Ambiguous(Sticky)),
    (false, false, true, false, Ambiguous(Stateless)),
    (false, false, true, true, Ambiguous(Sticky)),
    (false, true, false, false, Abandoned(B)),
    (false, true, false, true, Abandoned(B)),
    (false, true, true, false, Clean(B)),
    (false, true, true, true, Clean(B)),
    (true, false, false, false, Clean(A)),
    (true, false, false, true, Clean(A)),
    (true, false, true, false, Clean(A)),
    (true, false, true, true, Clean(A)),
    (true, true, false, false, Clean(A)),
    (true, true, false, true, Clean(A)),
    (true, true, true, false, Clean(A)),
    (true, true, true, true, Clean(A)),
];

fn observe(sentinel: bool, delimiting: bool, integrity: bool, sticky: bool) -> Observations {
    Observations {
        sentinel_seen: sentinel,
        self_delimiting: delimiting,
        integrity_ok: integrity,
        sticky_discovery: sticky,
    }
}

#[test]
fn every_one_of_the_sixteen_combinations_follows_the_decision_table() {
    let mut seen = std::collections::HashSet::new();
    for (sentinel, delimiting, integrity, sticky, expected) in TABLE {
        let obs = observe(sentinel, delimiting, integrity, sticky);
        assert!(seen.insert(obs), "row {obs:?} listed twice");
        let got = match classify(&obs) {
            Ok(Completion::Clean(regime)) => Clean(regime),
            Ok(Completion::Abandoned(regime)) => Abandoned(regime),
            Err(err) => Ambiguous(err.discovery),
        };
        assert_eq!(got, expected, "row {obs:?}");
    }
    assert_eq!(seen.len(), 16);
}

#[test]
fn a_seen_sentinel_is_clean_even_if_the_integrity_observation_failed() {
    let obs = observe(true, true, false, false);
    assert_eq!(classify(&obs), Ok(Completion::Clean(Regime::A)));
}

#[test]
fn regime_c_raises_the_ambiguity_error_even_with_sticky_discovery() {
    let err = classify(&observe(false, false, true, true)).unwrap_err();
    assert_eq!(err, StreamCompletionAmbiguousError::new(Sticky));
    assert!(!err.is_retryable());
}

#[test]
fn ambiguity_message_names_the_ambiguity_and_the_sticky_case() {
    let msg = classify(&observe(false, false, false, true))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("indistinguishable"), "{msg}");
    assert!(msg.contains("sticky discovery"), "{msg}");
    assert!(!msg.contains("stateless"), "{msg}");
}

#[test]
fn ambiguity_message_names_the_stateless_per_request_case() {
    let msg = classify(&observe(false, false, false, false))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("ambiguous"), "{msg}");
    assert!(msg.contains("stateless per-request discovery"), "{msg}");
    assert!(!msg.contains("sticky"), "{msg}");
}

#[test]
fn ambiguity_error_is_its_own_type_not_an_io_error() {
    fn is_std_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let err = StreamCompletionAmbiguousError::new(Stateless);
    is_std_error(&err);
    // Not a transient network error: nothing converts it into io::Error (this would not
    // compile: `let _: std::io::Error = err.into();`), and its source is none.
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn a_seen_sentinel_is_clean_in_regime_a() {
    let obs = Observations {
        sentinel_seen: true,
        ..Observations::default()
    };
    assert_eq!(classify(&obs), Ok(Completion::Clean(Regime::A)));
}

#[test]
fn a_completion_says_whether_it_is_clean_and_which_regime_decided() {
    assert!(Completion::Clean(Regime::A).is_clean());
    assert!(!Completion::Abandoned(Regime::B).is_clean());
    assert_eq!(Completion::Abandoned(Regime::B).regime(), Regime::B);
}

#[test]
fn a_cut_framed_stream_is_abandoned_in_regime_b_and_an_unframed_close_ambiguous() {
    let cut = Observations {
        self_delimiting: true,
        ..Observations::default()
    };
    assert_eq!(classify(&cut), Ok(Completion::Abandoned(Regime::B)));
    let unframed = Observations {
        sticky_discovery: true,
        integrity_ok: true,
        ..Observations::default()
    };
    assert_eq!(
        classify(&unframed).unwrap_err().discovery,
        DiscoveryMode::Sticky
    );
}

#[test]
fn every_verdict_kind_has_its_stable_snake_case_name() {
    use super::verdict::VerdictKind as K;
    for (kind, name) in [
        (K::Clean, "clean"),
        (K::Abandoned, "abandoned"),
        (K::Aborted, "aborted"),
        (K::Corrupt, "corrupt"),
        (K::Spliced, "spliced"),
        (K::CrossWired, "cross_wired"),
        (K::ContractViolation, "contract_violation"),
        (K::Ambiguous, "ambiguous"),
    ] {
        assert_eq!(kind.name(), name);
    }
}
