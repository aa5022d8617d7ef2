//! Retry decisions: outcome + request traits -> retry / do not retry / surface to the caller.

use bytes::BytesMut;

use super::{RequestTraits, RetryDecision, RetryPolicy, RetryReason};
use crate::outcome::{DiscoveryMode, Outcome};
use crate::{Abort, AbortCode, DecodeError, RequestKey, StreamDecoder, StreamEncoder, StreamHead};

/// The outcome the decoder gives for `body`, read to its end.
fn outcome_of(body: &[u8]) -> Outcome {
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(body);
    while let Ok(Some(_)) = decoder.decode_eof(&mut buf) {}
    decoder.outcome()
}

/// A complete stream: one response, then the sentinel.
fn complete_stream() -> BytesMut {
    let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    let mut wire = BytesMut::new();
    enc.message(
        br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
        &mut wire,
    )
    .unwrap();
    enc.end(&mut wire).unwrap();
    wire
}

fn truncated() -> Outcome {
    outcome_of(b"")
}

fn aborted(code: AbortCode) -> Outcome {
    Outcome::from_error(&DecodeError::PeerAbort(Abort::new(code, "x")))
}

fn ambiguous(mode: DiscoveryMode) -> Outcome {
    Outcome::unframed_close(mode, 100)
}

const PLAIN: RequestTraits = RequestTraits {
    is_idempotent: false,
    request_key: None,
};

/// The decision against a server that declares request-key deduplication (SPEC.md §17.11).
fn decide(outcome: &Outcome, request: &RequestTraits) -> RetryDecision {
    RetryPolicy::default()
        .server_deduplicates(true)
        .decide(outcome, request)
}

#[test]
fn clean_outcome_is_never_retried() {
    let wire = complete_stream();
    let clean = outcome_of(&wire);
    assert!(clean.is_clean());
    for request in [
        PLAIN,
        RequestTraits::idempotent(),
        RequestTraits::keyed(RequestKey::random()),
    ] {
        assert_eq!(
            decide(&clean, &request),
            RetryDecision::DoNotRetry(RetryReason::Complete)
        );
    }
}

#[test]
fn abandoned_stream_is_retried_when_the_request_is_idempotent() {
    assert_eq!(
        decide(&truncated(), &RequestTraits::idempotent()),
        RetryDecision::Retry(RetryReason::Idempotent)
    );
}

#[test]
fn abandoned_stream_is_retried_when_the_request_carries_a_key_and_the_server_deduplicates() {
    assert_eq!(
        decide(&truncated(), &RequestTraits::keyed(RequestKey::random())),
        RetryDecision::Retry(RetryReason::Keyed)
    );
}

#[test]
fn keyed_request_is_surfaced_when_the_server_does_not_declare_deduplication() {
    let keyed = RequestTraits::keyed(RequestKey::random());
    for outcome in [truncated(), aborted(AbortCode::Overloaded)] {
        let decision = RetryPolicy::default().decide(&outcome, &keyed);
        assert_eq!(
            decision,
            RetryDecision::SurfaceToCaller(RetryReason::NotDeduplicated)
        );
        assert!(
            decision
                .to_string()
                .contains("does not declare deduplication")
        );
    }
    // Idempotent requests do not need it.
    assert!(
        RetryPolicy::default()
            .decide(&truncated(), &RequestTraits::idempotent())
            .is_retry()
    );
}

#[test]
fn abandoned_stream_of_a_plain_request_is_surfaced_as_outcome_unknown() {
    let decision = decide(&truncated(), &PLAIN);
    assert_eq!(
        decision,
        RetryDecision::SurfaceToCaller(RetryReason::OutcomeUnknown)
    );
    assert!(
        decision.to_string().contains("may have executed"),
        "{decision}"
    );
}

#[test]
fn ambiguous_close_is_never_retried_by_default_even_idempotent_and_keyed() {
    let both = RequestTraits {
        is_idempotent: true,
        request_key: Some(RequestKey::random()),
    };
    for mode in [DiscoveryMode::Sticky, DiscoveryMode::Stateless] {
        for request in [PLAIN, RequestTraits::idempotent(), both] {
            assert_eq!(
                decide(&ambiguous(mode), &request),
                RetryDecision::SurfaceToCaller(RetryReason::Ambiguous)
            );
        }
    }
}

#[test]
fn ambiguous_close_is_retried_only_for_idempotent_requests_after_an_explicit_opt_in() {
    let lenient = RetryPolicy::default().retry_ambiguous_if_idempotent(true);
    let close = ambiguous(DiscoveryMode::Stateless);
    assert_eq!(
        lenient.decide(&close, &RequestTraits::idempotent()),
        RetryDecision::Retry(RetryReason::Idempotent)
    );
    assert_eq!(
        lenient.decide(&close, &RequestTraits::keyed(RequestKey::random())),
        RetryDecision::SurfaceToCaller(RetryReason::Ambiguous)
    );
}

#[test]
fn server_abort_is_decided_by_its_code() {
    // SPEC.md §3.1 and §11.6: the code says whether a retry can help.
    let keyed = RequestTraits::keyed(RequestKey::random());
    let idempotent = RequestTraits::idempotent();
    // Transient: overloaded or shutting down, an upstream dependency failed. Retried when
    // repeating the request is harmless, surfaced otherwise.
    for code in [AbortCode::Overloaded, AbortCode::UpstreamFailed] {
        assert_eq!(
            decide(&aborted(code), &keyed),
            RetryDecision::Retry(RetryReason::Keyed)
        );
        assert_eq!(
            decide(&aborted(code), &idempotent),
            RetryDecision::Retry(RetryReason::Idempotent)
        );
        assert_eq!(
            decide(&aborted(code), &PLAIN),
            RetryDecision::SurfaceToCaller(RetryReason::OutcomeUnknown)
        );
    }
    // Deterministic server-side failures: a retry would fail the same way.
    for code in [AbortCode::InternalError, AbortCode::MessageTooLarge] {
        for request in [keyed, idempotent, PLAIN] {
            assert_eq!(
                decide(&aborted(code), &request),
                RetryDecision::DoNotRetry(RetryReason::WouldRepeat),
                "{code}"
            );
        }
    }
    for request in [keyed, idempotent, PLAIN] {
        assert_eq!(
            decide(&aborted(AbortCode::Cancelled), &request),
            RetryDecision::DoNotRetry(RetryReason::Cancelled)
        );
        // No known reason (unspecified, or a reserved code): neither a retry nor finality is
        // implied, so the caller decides.
        for code in [AbortCode::Unspecified, AbortCode::from(700)] {
            assert_eq!(
                decide(&aborted(code), &request),
                RetryDecision::SurfaceToCaller(RetryReason::UnknownAbort),
                "{code}"
            );
        }
    }
}

#[test]
fn contract_violation_is_not_retried() {
    let unframed = outcome_of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert_eq!(
        decide(&unframed, &RequestTraits::idempotent()),
        RetryDecision::DoNotRetry(RetryReason::ContractViolation)
    );
}

#[test]
fn corrupt_spliced_and_cross_wired_streams_follow_the_abandoned_rule() {
    let key = RequestKey::random();
    let cases = [
        DecodeError::InvalidAbort,
        DecodeError::ForeignFrame {
            expected: 1,
            found: 1 << 30,
        },
        DecodeError::RequestKeyMismatch {
            expected: key,
            found: None,
        },
    ];
    for err in cases {
        let o = Outcome::from_error(&err);
        assert_eq!(
            decide(&o, &RequestTraits::keyed(key)),
            RetryDecision::Retry(RetryReason::Keyed)
        );
        assert_eq!(
            decide(&o, &PLAIN),
            RetryDecision::SurfaceToCaller(RetryReason::OutcomeUnknown),
            "{:?}",
            o.verdict
        );
    }
}

#[test]
fn a_key_is_enough_to_retry_only_where_the_server_declares_deduplication() {
    // SPEC.md §17.11.
    let outcome = Outcome::from_error(&StreamDecoder::new().decode_all(b"").unwrap_err());
    let keyed = RequestTraits::keyed(RequestKey::random());
    let deduplicating = RetryPolicy::default().server_deduplicates(true);
    assert!(matches!(
        deduplicating.decide(&outcome, &keyed),
        RetryDecision::Retry(_)
    ));
    assert!(matches!(
        RetryPolicy::default().decide(&outcome, &keyed),
        RetryDecision::SurfaceToCaller(_)
    ));
    let plain = RequestTraits::default(); // a tools/call: not idempotent, no key
    assert!(matches!(
        RetryPolicy::default().decide(&outcome, &plain),
        RetryDecision::SurfaceToCaller(_)
    ));
}

#[test]
fn a_deduplication_refusal_is_read_back_from_a_json_rpc_error_with_its_retryability() {
    let error = serde_json::json!({"code": -32081, "message": "in progress", "data": {
        "io.github.mcp-framing/dedupe": {"reason": "in_progress", "retryable": true}}});
    assert_eq!(super::dedupe_refusal(&error), Some(("in_progress", true)));
    assert_eq!(
        super::dedupe_refusal(&serde_json::json!({"code": -32603, "message": "x"})),
        None
    );
}

#[test]
fn request_traits_say_idempotent_or_keyed() {
    let read = RequestTraits::idempotent(); // e.g. resources/read, tools/list
    assert!(read.is_idempotent && read.request_key.is_none());
    let key = RequestKey::random();
    assert_eq!(RequestTraits::keyed(key).request_key, Some(key));
    assert!(!RequestTraits::keyed(key).is_idempotent);
}

#[test]
fn an_ambiguous_close_of_an_idempotent_request_is_retried_only_by_a_lenient_policy() {
    let ambiguous = Outcome::unframed_close(DiscoveryMode::Stateless, 10);
    let read = RequestTraits::idempotent();
    assert_eq!(
        RetryPolicy::default().decide(&ambiguous, &read),
        RetryDecision::SurfaceToCaller(RetryReason::Ambiguous)
    );
    let lenient = RetryPolicy::default().retry_ambiguous_if_idempotent(true);
    assert_eq!(
        lenient.decide(&ambiguous, &read),
        RetryDecision::Retry(RetryReason::Idempotent)
    );
}

#[test]
fn a_contract_without_deduplication_gives_the_default_policy_for_tool_calls() {
    use crate::contract::discovery::ServerDiscovery;
    use crate::contract::policy::ClientPolicy;
    use crate::contract::{DiscoverySource, FramingContract};

    let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    FramingContract::v1()
        .declare_in(&mut result, DiscoverySource::Initialize)
        .unwrap();
    let policy = ClientPolicy::builder()
        .build(&ServerDiscovery::from_initialize(&result).unwrap())
        .unwrap();
    // No `deduplication` member: keyed tool calls are not retried.
    assert_eq!(
        RetryPolicy::for_method(&policy, "tools/call"),
        RetryPolicy::default()
    );
}
