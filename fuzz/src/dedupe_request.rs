//! `dedupe_request`: a deduplicating server's peer input (SPEC.md §17.1–§17.3, §17.10): request
//! bodies through the strict JSON reader, request identification, canonical JSON, and
//! `DedupeLayer` itself.
//!
//! Input: one mode byte (bit 0: an `Mcp-Framing-Request-Key` header equal to the `_meta` key;
//! bit 1: one that differs; bits 2-7: the seed of a member order and whitespace), then a
//! request body (the seeds are keyed and unkeyed `tools/call` requests; the fuzzer mutates
//! them).
//!
//! Oracle:
//! - no panic on any input;
//! - `parse_request_json` accepts exactly what `serde_json` accepts, with the same value, except
//!   objects with a duplicate member name (refused, and only when `serde_json` accepts the text)
//!   and objects with a member named like one of `serde_json`'s private tokens (with its
//!   `raw_value` feature, which the crate enables, `serde_json` reads an object whose first
//!   member is `"$serde_json::private::RawValue"` as the JSON text in that member's string; the
//!   strict reader reads every member name literally, and the value-level checks below, which
//!   read text back with `serde_json`, are skipped for such a request);
//! - canonical JSON is valid JSON that reads back as the same value, is its own canonical form
//!   (idempotent), has no whitespace outside strings, and does not depend on the member order
//!   or whitespace of the text it came from (the value written out with members in another
//!   order and with whitespace has the same canonical form and the same fingerprint);
//! - `KeyedCall::from_request` refuses what it cannot identify (not an object, no string
//!   `method`: `NotARequest`; a malformed `_meta` key: `InvalidKey`; a header key that differs
//!   from the `_meta` one: `KeyMismatch`), answers `None` exactly when no key is present, and
//!   otherwise carries the key, the method and (for `tools/call`) the tool name of the request;
//! - `DedupeLayer` answers every body: `400` with a JSON-RPC parse error when the strict reader
//!   refuses it; a keyed `tools/call` posted twice executes once (the second attempt is
//!   replayed under its own id); anything else reaches the inner service every time.

use std::cell::RefCell;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcp_framing::RequestKey;
use mcp_framing::dedupe::{Deduplicator, FingerprintRules, MemoryStore, Principal};
use mcp_framing::http::DedupeLayer;
use mcp_framing::internals::dedupe::{
    KeyedCall, KeyedCallError, RequestJsonError, canonical_json, parse_request_json,
};
use mcp_framing::internals::http::DEDUPE_HEADER;
use serde_json::Value;
use tower_layer::Layer;
use tower_service::Service;

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When the server's input handling breaks the oracle.
pub fn run(data: &[u8]) {
    let [mode, body @ ..] = data else {
        return;
    };
    let strict = parse_request_json(body);
    let lenient = serde_json::from_slice::<Value>(body);
    if let Ok(value) = &strict {
        if names_a_private_token(value) {
            layer(body, true);
            return;
        }
    }
    match (&strict, &lenient) {
        (Ok(strict), Ok(lenient)) => assert_eq!(strict, lenient, "the strict reader's value"),
        (Err(RequestJsonError::DuplicateMember { .. }), Ok(_)) => {}
        (Err(_), Err(_)) => {}
        (strict, lenient) => panic!("strict {strict:?} but serde_json {lenient:?}"),
    }
    if let Ok(value) = &lenient {
        canonical(value, *mode >> 2);
        identification(value, *mode);
    }
    layer(body, strict.is_ok());
}

/// Whether an object in `value` has a member named like one of `serde_json`'s private tokens
/// (`$serde_json::private::RawValue`, `$serde_json::private::Number`), which `serde_json` does
/// not read as a member name.
fn names_a_private_token(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(name, member)| {
            name.starts_with("$serde_json::private::") || names_a_private_token(member)
        }),
        Value::Array(items) => items.iter().any(names_a_private_token),
        _ => false,
    }
}

fn canonical(value: &Value, seed: u8) {
    let text = canonical_json(value);
    let again: Value = serde_json::from_slice(&text).expect("canonical JSON is JSON");
    assert_eq!(&again, value, "canonical JSON reads back as the same value");
    assert_eq!(canonical_json(&again), text, "canonical JSON is idempotent");
    assert!(
        outside_strings(&text).all(|b| !b" \t\r\n".contains(&b)),
        "no whitespace outside strings"
    );
    let mut other = String::new();
    let mut state = u64::from(seed) | 1;
    write_shuffled(value, &mut state, &mut other);
    let reordered: Value = serde_json::from_str(&other).expect("shuffled JSON is JSON");
    assert_eq!(
        canonical_json(&reordered),
        text,
        "member order and whitespace do not count"
    );
    let rules = FingerprintRules::default();
    assert_eq!(rules.fingerprint(&reordered), rules.fingerprint(value));
}

/// The bytes of `json` outside string literals.
fn outside_strings(json: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let (mut in_string, mut escaped) = (false, false);
    json.iter().copied().filter(move |&b| {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            false
        } else {
            in_string = b == b'"';
            !in_string
        }
    })
}

fn next(state: &mut u64) -> u64 {
    // xorshift64
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `value` as JSON text with every object's members in a shuffled order and whitespace around
/// the tokens.
fn write_shuffled(value: &Value, state: &mut u64, out: &mut String) {
    let space = |state: &mut u64, out: &mut String| {
        out.push_str([" ", "", "\n  ", "\t", "\r\n"][(next(state) % 5) as usize]);
    };
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            for i in (1..members.len()).rev() {
                members.swap(i, (next(state) % (i as u64 + 1)) as usize);
            }
            out.push('{');
            for (i, (name, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(state, out);
                out.push_str(&serde_json::to_string(name).expect("a string serializes"));
                space(state, out);
                out.push(':');
                space(state, out);
                write_shuffled(member, state, out);
            }
            space(state, out);
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(state, out);
                write_shuffled(item, state, out);
            }
            out.push(']');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn identification(request: &Value, mode: u8) {
    let meta = mcp_framing::request::request_key(request);
    let other = RequestKey::from_bytes([0x5a; 16]);
    let header = match (mode & 3, &meta) {
        (1, Ok(Some(key))) => Some(*key),
        (1 | 3, _) => Some(other),
        (2, Ok(Some(key))) => Some(RequestKey::from_bytes(key.as_bytes().map(|b| !b))),
        (2, _) => Some(other),
        _ => None,
    };
    let rules = FingerprintRules::default();
    let principal = Principal::from_id("fuzz");
    let identified = KeyedCall::from_request(principal, header, request, &rules);
    let method = request.get("method").and_then(Value::as_str);
    match identified {
        Err(KeyedCallError::NotARequest) => assert!(method.is_none(), "refused a request"),
        Err(KeyedCallError::InvalidKey) => {
            assert!(method.is_some());
            assert!(meta.is_err(), "refused a well-formed key");
        }
        Err(KeyedCallError::KeyMismatch) => {
            let (Some(header), Ok(Some(meta))) = (header, &meta) else {
                panic!("a mismatch needs two keys")
            };
            assert_ne!(header, *meta);
        }
        Ok(None) => {
            assert!(method.is_some());
            assert!(
                header.is_none() && matches!(meta, Ok(None)),
                "a key was ignored"
            );
        }
        Ok(Some(call)) => {
            let method = method.expect("a request has a method");
            let key = header.or(meta.ok().flatten()).expect("a key");
            assert_eq!(call.request_key(), key);
            assert_eq!(call.scope().method(), method);
            let tool = (method == "tools/call")
                .then(|| request["params"]["name"].as_str())
                .flatten();
            assert_eq!(call.scope().tool(), tool);
            let params = request.get("params").unwrap_or(&Value::Null);
            assert_eq!(call.fingerprint(), rules.fingerprint(params));
        }
        Err(other) => panic!("an error the oracle does not know: {other:?}"),
    }
}

/// An inner service that answers every request with a final result under its id, and counts.
#[derive(Clone)]
struct Tool(Arc<AtomicUsize>);

impl Service<http::Request<Full<Bytes>>> for Tool {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let bytes = request.into_body().collect().await?.to_bytes();
            let id = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .unwrap_or(Value::Null);
            let response = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
            Ok(http::Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(response)))
                .expect("a response"))
        })
    }
}

thread_local! {
    static RUNTIME: RefCell<tokio::runtime::Runtime> = RefCell::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime"),
    );
}

fn layer(body: &[u8], well_formed: bool) {
    let executions = Arc::new(AtomicUsize::new(0));
    let dedup = Deduplicator::new(MemoryStore::new()).wait(std::time::Duration::ZERO);
    let mut service = DedupeLayer::new(dedup.clone()).layer(Tool(executions.clone()));
    let keyed_call = parse_request_json(body).ok().is_some_and(|v| {
        v.get("id").is_some()
            && v["method"] == "tools/call"
            && matches!(mcp_framing::request::request_key(&v), Ok(Some(_)))
    });
    let mut answers = Vec::new();
    RUNTIME.with(|runtime| {
        runtime.borrow().block_on(async {
            for _ in 0..2 {
                let request = http::Request::post("/mcp")
                    .body(Full::new(Bytes::copy_from_slice(body)))
                    .expect("a request");
                let response = service.call(request).await.expect("infallible");
                let status = response.status().as_u16();
                let decision = response
                    .headers()
                    .get(DEDUPE_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let bytes = response
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                answers.push((status, decision, bytes));
                // The result is recorded after the answer, in a task of its own: let it run.
                for _ in 0..100 {
                    if dedup.stats().snapshot().completed > 0 {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            }
        });
    });
    let ran = executions.load(Ordering::SeqCst);
    if !well_formed {
        for (status, _, bytes) in &answers {
            assert_eq!(*status, 400, "a body the strict reader refuses");
            let error: Value = serde_json::from_slice(bytes).expect("a JSON-RPC error");
            assert_eq!(error["error"]["code"], -32700);
        }
        assert_eq!(ran, 0, "nothing runs");
    } else if keyed_call {
        // Executed once and replayed, or refused before running (both times) for a key the
        // request carries in a form the layer rejects.
        match (&answers[0].1, &answers[1].1) {
            (Some(first), Some(second)) => {
                assert_eq!((first.as_str(), second.as_str()), ("execute", "replay"));
                assert_eq!(ran, 1, "executed once");
            }
            (None, None) => {
                assert_eq!((answers[0].0, answers[1].0), (400, 400));
                assert_eq!(ran, 0);
            }
            other => panic!("decisions {other:?}"),
        }
    } else {
        assert!(
            answers.iter().all(|(_, decision, _)| decision.is_none()),
            "not deduplicated"
        );
        let passed = answers
            .iter()
            .filter(|(status, _, _)| *status == 200)
            .count();
        assert_eq!(ran, passed, "everything else reaches the inner service");
    }
}
