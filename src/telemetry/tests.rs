//! Telemetry: a `tracing` event with structured fields per outcome, and metrics through the
//! `metrics` facade.

use std::collections::BTreeMap;

use super::client::{
    self as telemetry, AttemptContext, CLIENT_INCOMPLETE_BYTES, CLIENT_OPEN_MESSAGE_BYTES,
    CLIENT_RESPONSES, CLIENT_RETRIES, CLIENT_RETRY_DECISIONS, CLIENT_SENTINEL_MISSING,
    CLIENT_TRUNCATIONS,
};
use crate::outcome::{DiscoveryMode, Outcome};
use crate::retry::{RequestTraits, RetryPolicy};
use crate::test_support::metrics_support::Recorded;
use crate::test_support::outcome_support::{self, complete_stream, final_result};
use crate::{RequestKey, StreamDecoder};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// One captured event: level, target and every field as text.
#[derive(Debug, Clone)]
struct Captured {
    level: tracing::Level,
    target: String,
    fields: BTreeMap<String, String>,
}

thread_local! {
    /// The events of the current thread, while a [`capture`] runs on it.
    static CAPTURED: std::cell::RefCell<Option<Vec<Captured>>> =
        const { std::cell::RefCell::new(None) };
}

/// The one subscriber of the crate's unit tests (global, installed once), which keeps the events of a
/// thread that is inside [`capture`]. A global subscriber is interested in every callsite at all
/// times, so no test's interest cache can be computed while another test's scoped subscriber comes
/// or goes (with per-test scoped subscribers a callsite first hit by a test running without one
/// could cache "no interest" under load, and a capture then saw no event).
struct Capture;

struct FieldText<'a>(&'a mut BTreeMap<String, String>);

impl Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        CAPTURED.with(|captured| {
            if let Some(events) = captured.borrow_mut().as_mut() {
                let mut fields = BTreeMap::new();
                event.record(&mut FieldText(&mut fields));
                events.push(Captured {
                    level: *event.metadata().level(),
                    target: event.metadata().target().to_owned(),
                    fields,
                });
            }
        });
    }
}

/// Runs `f` and returns the events it emitted on this thread.
fn capture(f: impl FnOnce()) -> Vec<Captured> {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture))
            .expect("the test binary's one subscriber");
    });
    CAPTURED.with(|captured| *captured.borrow_mut() = Some(Vec::new()));
    f();
    CAPTURED.with(|captured| captured.borrow_mut().take().unwrap_or_default())
}

/// A stream for `key` cut after its two messages, before STREAM_END, read by a decoder that
/// checks no key: abandoned `BetweenMessages` (a decoder that expects the key would deliver the
/// final response, SPEC.md §7 row 4: see
/// `a_final_response_delivered_without_its_sentinel_warns_and_counts_apart`).
fn truncated_outcome(key: RequestKey) -> (Outcome, crate::StreamHead) {
    let (head, wire) = complete_stream(Some(key));
    let mut decoder = StreamDecoder::new();
    let cut = &wire[..wire.len() - 28]; // drop STREAM_END
    let _ = final_result(&mut decoder, cut);
    (decoder.outcome(), head)
}

#[test]
fn abandoned_outcome_emits_a_warning_with_every_structured_field() {
    let key = RequestKey::random();
    let (outcome, head) = truncated_outcome(key);
    let ctx = AttemptContext::default()
        .request_key(key)
        .endpoint("https://mcp.example.com/mcp")
        .method("tools/call")
        .attempt(1);
    let events = capture(|| telemetry::record_outcome(&outcome, &ctx));
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e.level, tracing::Level::WARN);
    assert_eq!(e.target, "mcp_framing");
    let f = &e.fields;
    assert_eq!(f["outcome"], "abandoned");
    assert_eq!(f["regime"], "B");
    assert_eq!(f["frames"], "6");
    assert_eq!(f["bytes"], outcome.received.bytes.to_string());
    assert_eq!(f["messages"], "2");
    assert_eq!(f["message_bytes"], "0");
    assert_eq!(
        f["last_sequence"],
        head.initial_sequence().wrapping_add(5).to_string()
    );
    assert_eq!(f["request_key"], key.fingerprint().to_string());
    assert_eq!(f["attempt_id"], head.attempt_id.to_string());
    assert_eq!(f["endpoint"], "https://mcp.example.com/mcp");
    assert_eq!(f["method"], "tools/call");
    assert_eq!(f["attempt"], "1");
    assert!(
        f["detail"].contains("truncated between messages"),
        "{}",
        f["detail"]
    );
    assert!(f.contains_key("message"));
}

#[test]
fn request_key_falls_back_to_the_echo_in_the_stream_head() {
    let key = RequestKey::random();
    let (outcome, _) = truncated_outcome(key);
    let events = capture(|| telemetry::record_outcome(&outcome, &AttemptContext::default()));
    assert_eq!(
        events[0].fields["request_key"],
        key.fingerprint().to_string()
    );
    assert!(
        !events[0].fields.contains_key("endpoint"),
        "unknown endpoint is left empty"
    );
}

#[test]
fn clean_outcome_is_recorded_at_debug_level() {
    let (_, wire) = complete_stream(None);
    let mut decoder = StreamDecoder::new();
    let _ = final_result(&mut decoder, &wire);
    let outcome = decoder.outcome();
    let metrics = Recorded::new();
    let events =
        capture(|| metrics.run(|| telemetry::record_outcome(&outcome, &AttemptContext::default())));
    assert_eq!(events[0].level, tracing::Level::DEBUG);
    assert_eq!(events[0].fields["outcome"], "clean");
    assert_eq!(events[0].fields["regime"], "A");
    assert_eq!(events[0].fields["sentinel_seen"], "true");
    assert_eq!(
        metrics.counter(CLIENT_RESPONSES, &[("outcome", "clean")]),
        1
    );
    assert_eq!(metrics.counter(CLIENT_RESPONSES, &[("regime", "A")]), 1);
    assert_eq!(metrics.counter(CLIENT_INCOMPLETE_BYTES, &[]), 0);
    assert_eq!(metrics.counter(CLIENT_TRUNCATIONS, &[]), 0);
    assert_eq!(metrics.counter(CLIENT_SENTINEL_MISSING, &[]), 0);
}

#[test]
fn a_final_response_delivered_without_its_sentinel_warns_and_counts_apart() {
    // SPEC.md §7 row 4, §11.6: clean in Regime B, not retried, but the cut is recorded.
    let key = RequestKey::random();
    let (head, wire) = complete_stream(Some(key));
    let mut decoder = StreamDecoder::builder().expect_request_key(key).build();
    let _ = final_result(&mut decoder, &wire[..wire.len() - 28]); // drop STREAM_END
    let outcome = decoder.outcome();
    assert!(outcome.is_clean() && !outcome.sentinel_seen);
    let ctx = AttemptContext::default()
        .request_key(key)
        .method("tools/call")
        .attempt(1);
    let metrics = Recorded::new();
    let events = capture(|| metrics.run(|| telemetry::record_outcome(&outcome, &ctx)));
    assert_eq!(events.len(), 1);
    let f = &events[0].fields;
    assert_eq!(events[0].level, tracing::Level::WARN);
    assert_eq!(
        (
            f["outcome"].as_str(),
            f["regime"].as_str(),
            f["sentinel_seen"].as_str()
        ),
        ("clean", "B", "false")
    );
    assert_eq!(f["request_key"], key.fingerprint().to_string());
    assert_eq!(f["attempt_id"], head.attempt_id.to_string());
    assert!(f["message"].contains("without its sentinel"), "{f:?}");
    assert_eq!(
        metrics.counter(CLIENT_RESPONSES, &[("outcome", "clean"), ("regime", "B")]),
        1
    );
    assert_eq!(
        metrics.counter(
            CLIENT_SENTINEL_MISSING,
            &[("mcp.method.name", "tools/call")]
        ),
        1
    );
    assert_eq!(metrics.counter(CLIENT_TRUNCATIONS, &[]), 0);
    assert_eq!(metrics.counter(CLIENT_INCOMPLETE_BYTES, &[]), 0);
    // Not retried, whatever the request (SPEC.md §11.6: clean).
    let decision = RetryPolicy::default()
        .server_deduplicates(true)
        .decide(&outcome, &RequestTraits::keyed(key));
    assert!(!decision.is_retry(), "{decision:?}");
}

#[test]
fn ambiguous_close_emits_a_warning_naming_regime_c() {
    let outcome = Outcome::unframed_close(DiscoveryMode::Stateless, 77);
    let events = capture(|| telemetry::record_outcome(&outcome, &AttemptContext::default()));
    assert_eq!(events[0].level, tracing::Level::WARN);
    assert_eq!(events[0].fields["outcome"], "ambiguous");
    assert_eq!(events[0].fields["regime"], "C");
    assert_eq!(events[0].fields["bytes"], "77");
    assert!(events[0].fields["detail"].contains("stateless per-request discovery"));
}

#[test]
fn truncation_still_counts_when_the_retry_succeeds() {
    let key = RequestKey::random();
    let metrics = Recorded::new();
    let request = RequestTraits::keyed(key);
    let (first, _) = truncated_outcome(key);
    metrics.run(|| {
        // Attempt 1: truncated, recorded, retried.
        let ctx = AttemptContext::default()
            .request_key(key)
            .method("tools/call")
            .attempt(1);
        telemetry::record_outcome(&first, &ctx);
        // Against a server that declares deduplication (SPEC.md §17.11).
        let policy = RetryPolicy::default().server_deduplicates(true);
        let decision = policy.decide(&first, &request);
        assert!(decision.is_retry());
        telemetry::record_decision(&decision, &ctx);
        telemetry::record_retry(&decision, &ctx.attempt(2));
        // Attempt 2: complete.
        let (_, wire) = complete_stream(Some(key));
        let mut decoder = StreamDecoder::builder().expect_request_key(key).build();
        let _ = final_result(&mut decoder, &wire);
        let second = decoder.outcome();
        telemetry::record_outcome(&second, &ctx.attempt(2));
    });
    let counter = |name, labels: &[(&str, &str)]| metrics.counter(name, labels);
    assert_eq!(counter(CLIENT_RESPONSES, &[("outcome", "abandoned")]), 1);
    assert_eq!(counter(CLIENT_RESPONSES, &[("outcome", "clean")]), 1);
    assert_eq!(
        counter(CLIENT_TRUNCATIONS, &[("at", "between_messages")]),
        1
    );
    assert_eq!(
        counter(
            CLIENT_RETRY_DECISIONS,
            &[("decision", "retry"), ("reason", "keyed")]
        ),
        1
    );
    assert_eq!(
        counter(
            CLIENT_RETRIES,
            &[("reason", "keyed"), ("mcp.method.name", "tools/call")]
        ),
        1
    );
    assert_eq!(
        counter(CLIENT_INCOMPLETE_BYTES, &[("outcome", "abandoned")]),
        first.received.bytes
    );
    assert_eq!(
        counter(CLIENT_OPEN_MESSAGE_BYTES, &[]),
        0,
        "cut between messages"
    );
}

#[test]
fn every_verdict_has_its_own_outcome_label() {
    use crate::{Abort, AbortCode, DecodeError};
    let key = RequestKey::random();
    let outcomes = [
        {
            let mut decoder = StreamDecoder::new();
            outcome_support::outcome_of(&mut decoder, &complete_stream(None).1)
        },
        Outcome::from_error(
            &(DecodeError::Truncated {
                at: crate::Truncation::NoFrame,
                progress: Default::default(),
            }),
        ),
        Outcome::from_error(&(DecodeError::PeerAbort(Abort::new(AbortCode::Cancelled, "")))),
        Outcome::from_error(&(DecodeError::InvalidAbort)),
        Outcome::from_error(
            &(DecodeError::ForeignFrame {
                expected: 0,
                found: 1 << 31,
            }),
        ),
        Outcome::from_error(
            &(DecodeError::RequestKeyMismatch {
                expected: key,
                found: None,
            }),
        ),
        Outcome::from_error(
            &(DecodeError::BadMagic {
                found: *b"{\"",
                offset: 0,
            }),
        ),
        Outcome::unframed_close(DiscoveryMode::Sticky, 0),
    ];
    let metrics = Recorded::new();
    metrics.run(|| {
        for (i, outcome) in outcomes.iter().enumerate() {
            for _ in 0..=i {
                telemetry::record_outcome(outcome, &AttemptContext::default());
            }
        }
    });
    let names = [
        "clean",
        "abandoned",
        "aborted",
        "corrupt",
        "spliced",
        "cross_wired",
        "contract_violation",
        "ambiguous",
    ];
    let got: Vec<u64> = names
        .iter()
        .map(|name| metrics.counter(CLIENT_RESPONSES, &[("outcome", name)]))
        .collect();
    assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(
        metrics.counter(CLIENT_TRUNCATIONS, &[("at", "no_frame")]),
        2
    );
}

#[test]
fn request_keys_are_traced_as_fingerprints_never_in_full() {
    // With deduplication a request key can replay a stored result: logs must not carry it.
    let key = RequestKey::random();
    let (outcome, _) = truncated_outcome(key);
    for ctx in [
        AttemptContext::default().request_key(key),
        AttemptContext::default(), // the key echoed in the stream head
    ] {
        let events = capture(|| {
            telemetry::record_outcome(&outcome, &ctx);
            let decision = RetryPolicy::default().decide(&outcome, &RequestTraits::keyed(key));
            telemetry::record_decision(&decision, &ctx);
            telemetry::record_retry(&decision, &ctx.attempt(2));
        });
        assert_eq!(events.len(), 3);
        for event in &events {
            for (name, value) in &event.fields {
                assert!(
                    !value.contains(&key.to_string()),
                    "field {name} shows the full request key: {value}"
                );
            }
        }
        assert_eq!(
            events[0].fields["request_key"],
            key.fingerprint().to_string()
        );
    }
}

/// SPEC.md §15, §11.7: an unframed response and an SSE error are contract violations, which no
/// request retries, counted under their own outcome label.
#[cfg(feature = "http")]
#[test]
fn unframed_responses_and_sse_errors_are_contract_violations_that_are_not_retried() {
    use crate::http::{ReceiveError, VerifiedResponse};
    use crate::mapping::{MappingViolation, SseError};
    use crate::outcome::Verdict;
    use crate::retry::{RetryDecision, RetryReason};
    use crate::{BodyError, StreamDecoder};
    use bytes::Bytes;
    use futures::stream;

    let not_framed = ReceiveError::<std::io::Error>::NotFramed {
        content_type: Some("application/json".into()),
    };
    let sse = ReceiveError::<std::io::Error>::Invalid(BodyError::Sse(SseError::InvalidBase64 {
        event: 3,
    }));
    let metrics = Recorded::new();
    for err in [not_framed, sse] {
        let outcome = err.outcome().expect("every receive error has an outcome");
        assert!(
            matches!(outcome.verdict, Verdict::MappingViolation(_)),
            "{outcome:?}"
        );
        assert_eq!(outcome.verdict.name(), "contract_violation");
        assert!(!outcome.is_clean());
        assert!(
            outcome
                .verdict
                .to_string()
                .starts_with("framing contract violated: "),
            "{}",
            outcome.verdict
        );
        for request in [
            RequestTraits::idempotent(),
            RequestTraits::keyed(RequestKey::random()),
            RequestTraits::default(),
        ] {
            assert_eq!(
                RetryPolicy::default().decide(&outcome, &request),
                RetryDecision::DoNotRetry(RetryReason::ContractViolation)
            );
        }
        metrics.run(|| telemetry::record_outcome(&outcome, &AttemptContext::default()));
    }
    assert_eq!(
        metrics.counter(CLIENT_RESPONSES, &[("outcome", "contract_violation")]),
        2
    );

    // Through `from_headers`, as a client sees a backend that ignored the opt-in.
    let body = stream::empty::<Result<Bytes, std::io::Error>>();
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    let err = VerifiedResponse::from_headers(body, &headers, StreamDecoder::new()).unwrap_err();
    assert_eq!(
        err.outcome().unwrap().verdict,
        Verdict::MappingViolation(MappingViolation::NotFramed {
            content_type: Some("application/json".into())
        })
    );
}

#[test]
fn an_attempt_context_is_built_field_by_field() {
    let key = RequestKey::random();
    let ctx = AttemptContext::default()
        .request_key(key)
        .endpoint("https://a.example/mcp")
        .method("tools/call")
        .tool("send_email")
        .attempt(2);
    assert_eq!(
        ctx,
        AttemptContext {
            request_key: Some(key),
            endpoint: Some("https://a.example/mcp"),
            method: Some("tools/call"),
            tool: Some("send_email"),
            attempt: 2,
        }
    );
}

#[test]
fn a_response_whose_sentinel_was_cut_counts_in_sentinel_missing_through_any_recorder() {
    use crate::{StreamEncoder, StreamHead};
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let key = RequestKey::random();
    let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    let mut wire = bytes::BytesMut::new();
    enc.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, &mut wire)
        .unwrap(); // no STREAM_END
    let mut decoder = StreamDecoder::builder().expect_request_key(key).build();
    while let Some(_event) = decoder.decode_eof(&mut wire).unwrap() {}

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        telemetry::record_outcome(
            &decoder.outcome(),
            &AttemptContext::default().request_key(key),
        );
    });
    let missing = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .any(|(key, _, _, value)| {
            key.key().name() == CLIENT_SENTINEL_MISSING && value == DebugValue::Counter(1)
        });
    assert!(missing);
}

#[test]
fn a_retry_decision_is_counted_by_decision_and_reason() {
    use crate::retry::{RetryDecision, RetryReason};

    let metrics = Recorded::new();
    let ctx = AttemptContext::default().method("tools/call").attempt(1);
    metrics.run(|| {
        telemetry::record_decision(&RetryDecision::Retry(RetryReason::Keyed), &ctx);
        telemetry::record_decision(
            &RetryDecision::DoNotRetry(RetryReason::ContractViolation),
            &ctx,
        );
    });
    let decisions = |labels: &[(&str, &str)]| metrics.counter(CLIENT_RETRY_DECISIONS, labels);
    assert_eq!(decisions(&[("decision", "retry"), ("reason", "keyed")]), 1);
    assert_eq!(decisions(&[("reason", "contract_violation")]), 1);
    assert_eq!(decisions(&[]), 2);
    assert_eq!(metrics.counter(CLIENT_RETRIES, &[]), 0, "decided, not sent");
}

#[test]
fn a_request_sent_again_is_counted_by_reason_and_method() {
    use crate::retry::{RetryDecision, RetryReason};

    let metrics = Recorded::new();
    let decision = RetryDecision::Retry(RetryReason::Keyed);
    let ctx = AttemptContext::default().method("tools/call").attempt(2);
    metrics.run(|| telemetry::record_retry(&decision, &ctx));
    assert_eq!(
        metrics.counter(
            CLIENT_RETRIES,
            &[("reason", "keyed"), ("mcp.method.name", "tools/call")]
        ),
        1
    );
    assert_eq!(metrics.counter(CLIENT_RETRY_DECISIONS, &[]), 0);
}

#[test]
fn an_operation_is_timed_with_the_server_address_and_its_error_type() {
    use super::client::CLIENT_OPERATION_DURATION;
    use std::time::Duration;

    let metrics = Recorded::new();
    let ctx = AttemptContext::default()
        .endpoint("http://127.0.0.1:8080/mcp")
        .method("tools/call")
        .tool("search");
    metrics.run(|| telemetry::record_operation(&ctx, Duration::from_millis(12), Some("abandoned")));
    let times = metrics.histogram(
        CLIENT_OPERATION_DURATION,
        &[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "search"),
            ("error.type", "abandoned"),
            ("server.address", "127.0.0.1"),
            ("server.port", "8080"),
        ],
    );
    assert_eq!(times, [0.012]);
}
