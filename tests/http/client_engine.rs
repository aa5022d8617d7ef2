//! The client attempt engine that `RetryingClient` and `FramingHttpClient` share (issue 18):
//! verified bytes reach the caller unchanged, `auto_retry` works with rmcp's default (session)
//! server, every option reaches every attempt in any builder order, the contract is read from
//! the discovery results rmcp's handshake passes through the client, the compatible mapping is
//! the default, and every client hands its caller one outcome report (SPEC.md §11.7).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use futures_util::StreamExt;
use mcp_framing::client::{CallError, DiscoveringResolver, RetrySchedule, RetryingClient};
use mcp_framing::contract::{Deduplication, FramingContract};
use mcp_framing::mapping::Mapping;
use mcp_framing::{
    client::OUTCOME_DATA_KEY,
    rmcp_http::{FramingHttpClient, FramingLayer},
};
use rmcp::ServiceExt;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpPostResponse,
};
use serde_json::{Value, json};
use tower_layer::Layer;

use crate::support::cut_support;
use crate::support::rmcp_support;
use crate::support::scripted;
use scripted::{
    Scripted, ToolAnswer, call_tool, call_tool_with, framed, not_utf8_result, outcome_data,
    received, stalled, tool_result,
};

// ---------------------------------------------------------------------------------------------
// Fleet set-up.

/// The contract with `tools/call` deduplicated: keyed tool calls are retried.
fn deduplicating() -> FramingContract {
    FramingContract::v1().with_deduplication(Deduplication::new(Duration::from_secs(3600)))
}

/// A resolver over `endpoints`, taken in turn, discovering each before every attempt (the
/// scripted server declares its contract in its `server/discover` result).
fn discovering(endpoints: impl IntoIterator<Item = String>) -> DiscoveringResolver {
    DiscoveringResolver::new(reqwest::Client::new(), endpoints)
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/mcp")
}

/// Serves `app` on a loopback port of its own.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn schedule(attempts: u32) -> RetrySchedule {
    RetrySchedule::default()
        .max_attempts(attempts)
        .initial_backoff(Duration::from_millis(1))
}

fn tool_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "echo", "arguments": {}}})
}

/// A final response in spellings a re-serialization would change: members out of the usual
/// order, a number in exponent form, escapes, spaces.
fn unusual_response(id: &Value) -> String {
    format!(
        r#"{{"result" : {{"n": 1.0e2, "text": "caf\u00e9 \"quoted\" \/"}}, "id" : {id} ,"jsonrpc":"2.0"}}"#,
        id = serde_json::to_string(id).unwrap()
    )
}

/// A tool answer that cuts the first `cuts` attempts after `at` bytes, then answers `then`.
fn cut_then(
    cuts: usize,
    at: usize,
    then: impl Fn(&Value) -> String + Send + Sync + 'static,
) -> ToolAnswer {
    let attempts = AtomicUsize::new(0);
    Arc::new(move |id, headers| {
        let message = Bytes::from(then(&id));
        let response = framed(headers, vec![message]);
        if attempts.fetch_add(1, Ordering::SeqCst) < cuts {
            cut_support::cut_after(response, at)
        } else {
            response
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Defect 1: the retrying path altered verified bytes.

#[tokio::test]
async fn retrying_client_refuses_a_verified_response_that_is_not_utf8_instead_of_altering_it() {
    let (addr, _) = Scripted::new(not_utf8_result())
        .declaring(|_| Some(deduplicating()))
        .start()
        .await;
    // The compatible mapping cannot carry it (the server aborts): the two that can.
    for mapping in [Mapping::Sse, Mapping::Binary] {
        let resolver = discovering([url(addr)]);
        let client = RetryingClient::new(reqwest::Client::new(), resolver).mapping(mapping);
        let err = client.call(tool_call(1)).await.unwrap_err();
        let CallError::InvalidUtf8 {
            attempts, index, ..
        } = err
        else {
            panic!("{mapping:?}: expected InvalidUtf8, got {err}");
        };
        assert_eq!(
            (attempts, index),
            (1, 0),
            "not retried: the bytes would repeat"
        );
        assert_eq!(err.classification(), "invalid_message");
        assert_eq!(client.stats().snapshot().gave_up, 1);
    }
}

#[tokio::test]
async fn retrying_client_delivers_the_final_response_byte_for_byte() {
    let (addr, _) = Scripted::new(cut_then(0, 0, unusual_response))
        .start()
        .await;
    let resolver = discovering([url(addr)]);
    let client = RetryingClient::new(reqwest::Client::new(), resolver);
    let call = client.call(tool_call(7)).await.expect("a clean call");
    assert_eq!(call.attempts, 1);
    assert_eq!(call.response, unusual_response(&json!(7)).as_bytes());
    // The stream yields the same bytes.
    let mut stream = client.stream(tool_call(7), http::HeaderMap::new()).unwrap();
    let last = stream.next().await.expect("an item").expect("verified");
    assert_eq!(last, unusual_response(&json!(7)).as_bytes());
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn a_retried_response_gets_the_callers_id_back_by_an_edit_of_the_id_member_alone() {
    for id in [json!(7), json!("call-7"), json!({"a": [1, "b"]})] {
        let (addr, log) = Scripted::new(cut_then(2, 30, unusual_response))
            .declaring(|_| Some(deduplicating()))
            .start()
            .await;
        let resolver = discovering([url(addr)]);
        let client = RetryingClient::new(reqwest::Client::new(), resolver).schedule(schedule(3));
        let mut request = tool_call(0);
        request["id"] = id.clone();
        let call = client
            .call(request)
            .await
            .expect("the third attempt completes");
        assert_eq!(call.attempts, 3);
        // The server answered the third attempt under its own id; the caller gets every byte of
        // that answer with its own id in place of it.
        assert_eq!(call.response, unusual_response(&id).as_bytes(), "{id}");
        // The attempts carried new ids and the same key (SPEC.md §10).
        let calls = received(&log, "tools/call");
        assert_eq!(calls.len(), 3);
        let keys: Vec<_> = calls
            .iter()
            .map(|r| r.headers["mcp-framing-request-key"].clone())
            .collect();
        assert!(keys.iter().all(|k| *k == keys[0]));
    }
}

#[tokio::test]
async fn a_stream_that_goes_on_after_its_final_response_answers_nothing() {
    // SPEC.md §1: the final response is the stream's last message; a complete stream with a
    // message after it answers nothing, and neither client reports the request as answered.
    let late = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"late"}}"#;
    let (addr, _) = Scripted::new(Arc::new(move |id, headers| {
        framed(headers, vec![tool_result(&id, "early"), Bytes::from(late)])
    }))
    .start()
    .await;
    let resolver = discovering([url(addr)]);
    let err = RetryingClient::new(reqwest::Client::new(), resolver)
        .call(tool_call(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "MessageAfterFinalResponse", "{err}");
    assert_eq!(err.classification(), "abandoned");
    let data = outcome_data(&call_tool(addr, FramingHttpClient::new(reqwest::Client::new())).await);
    assert_eq!(data["kind"], "MessageAfterFinalResponse", "{data}");
    assert_eq!(data["retryDecision"], "surface_to_caller", "{data}");
}

// ---------------------------------------------------------------------------------------------
// Defect 2: auto_retry broke rmcp's default (session) server.

/// One backend: rmcp's default server (sessions on) behind `FramingLayer`, counting what reaches
/// it, and cutting the next `tools/list` response when told.
struct Backend {
    addr: SocketAddr,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    requests: AtomicUsize,
    lists: AtomicUsize,
    cut_next_list: AtomicBool,
}

async fn count_and_cut(
    State(counters): State<Arc<Counters>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    counters.requests.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let is_list =
        serde_json::from_slice::<Value>(&bytes).is_ok_and(|r| r["method"] == "tools/list");
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if is_list {
        counters.lists.fetch_add(1, Ordering::SeqCst);
        if counters.cut_next_list.swap(false, Ordering::SeqCst) {
            return cut_support::cut_after(response, 10);
        }
    }
    response
}

async fn session_backend() -> Backend {
    let counters = Arc::new(Counters::default());
    let service = FramingLayer::new().layer(rmcp_support::session_service());
    let app =
        Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(
                counters.clone(),
                count_and_cut,
            ));
    let addr = serve(app).await;
    Backend { addr, counters }
}

#[tokio::test]
async fn auto_retry_completes_the_handshake_with_rmcps_default_server_and_keeps_each_session_on_its_endpoint()
 {
    let (a, b) = (session_backend().await, session_backend().await);
    // Every resolution after the first would discover (and name) the other backend, which knows
    // no session.
    let resolver = discovering([url(a.addr), url(b.addr)]);
    let client = FramingHttpClient::new(reqwest::Client::new()).auto_retry(resolver, schedule(3));
    let retries = client.retry_stats().unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(url(a.addr)),
    );
    let peer = ().serve(transport).await.expect("the handshake completes");
    let tools = peer.list_tools(None).await.expect("tools/list");
    assert_eq!(tools.tools[0].name, "render_report");
    // A cut response of the session is retried on the session's endpoint, with the session.
    a.counters.cut_next_list.store(true, Ordering::SeqCst);
    let tools = peer
        .list_tools(None)
        .await
        .expect("tools/list after a retry");
    assert_eq!(tools.tools.len(), 1);
    assert_eq!(retries.snapshot().retries, 1);
    assert_eq!(a.counters.lists.load(Ordering::SeqCst), 3);
    let result = peer
        .call_tool(rmcp_support::render_report_call("Q3"))
        .await
        .expect("tools/call");
    let text = &result.content[0].as_text().expect("text").text;
    assert!(text.starts_with("# Q3\n00001 line 0"), "{text}");
    let _ = peer.cancel().await;
    assert_eq!(
        b.counters.requests.load(Ordering::SeqCst),
        0,
        "nothing of the session went to the other backend, not even a discovery"
    );
}

// ---------------------------------------------------------------------------------------------
// Defect 3: builder order changed behaviour.

#[tokio::test]
async fn the_mapping_the_idle_timeout_and_rmcps_limits_reach_every_attempt_in_any_builder_order() {
    type Build = fn(FramingHttpClient, DiscoveringResolver) -> FramingHttpClient;
    let orders: [(&str, Build); 2] = [
        ("options after auto_retry", |client, resolver| {
            client
                .auto_retry(resolver, schedule(2))
                .mapping(Mapping::Sse)
                .idle_timeout(Some(Duration::from_secs(2)))
        }),
        ("options before auto_retry", |client, resolver| {
            client
                .mapping(Mapping::Sse)
                .idle_timeout(Some(Duration::from_secs(2)))
                .auto_retry(resolver, schedule(2))
        }),
    ];
    for (order, build) in orders {
        // The first attempt sends nothing after its response headers: only the idle timeout
        // ends it.
        let attempts = Arc::new(AtomicUsize::new(0));
        let (addr, log) = Scripted::new(Arc::new(move |id, headers| {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                stalled(headers)
            } else {
                framed(headers, vec![tool_result(&id, "answered")])
            }
        }))
        .declaring(|_| Some(deduplicating()))
        .start()
        .await;
        let resolver = discovering([url(addr)]);
        let client = build(FramingHttpClient::new(reqwest::Client::new()), resolver);
        let retries = client.retry_stats().unwrap();
        // rmcp's per-call limits: 32 KiB events, hence §15 frames of at most
        // 32768 / 4 * 3 - 20 = 24556 bytes, and messages of at most 32 KiB.
        let call = call_tool_with(addr, client, |c| c.max_sse_event_size(32 * 1024));
        // Bounded well above the 2 s idle timeout (a loaded machine does not stall an answered
        // attempt that long), and well below the default one (60 s).
        let result = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .unwrap_or_else(|_| panic!("{order}: the idle timeout did not reach the attempt"));
        let result = result.unwrap_or_else(|err| panic!("{order}: {err}"));
        assert_eq!(result.content[0].as_text().unwrap().text, "answered");
        assert_eq!(retries.snapshot().retries, 1, "{order}");
        let calls = received(&log, "tools/call");
        assert_eq!(calls.len(), 2, "{order}");
        for (i, call) in calls.iter().enumerate() {
            assert_eq!(
                call.headers["mcp-framing-limits"], "frame=24556, message=32768",
                "{order}, attempt {i}"
            );
            assert!(
                call.headers.get("mcp-framing-mapping").is_none(),
                "{order}, attempt {i}: the §15 mapping asked for"
            );
        }
    }
}

#[tokio::test]
async fn every_request_asks_for_the_compatible_mapping_when_compat_follows_auto_retry() {
    // The order of issue 18: `auto_retry(..)` first, `compat(true)` after it.
    let (addr, log) = Scripted::new(cut_then(1, 30, |id| {
        String::from_utf8(tool_result(id, "ok").to_vec()).unwrap()
    }))
    .declaring(|_| Some(deduplicating()))
    .start()
    .await;
    let resolver = discovering([url(addr)]);
    let client = FramingHttpClient::new(reqwest::Client::new())
        .mapping(Mapping::Sse)
        .auto_retry(resolver, schedule(2))
        .compat(true);
    call_tool(addr, client).await.expect("the retry completes");
    let requests = log.lock().unwrap().clone();
    // Each request is resolved first: the resolver's own `server/discover` does not opt in.
    let asked: Vec<(&str, Option<&[u8]>)> = requests
        .iter()
        .filter(|r| r.method != "notifications/initialized")
        .map(|r| {
            let mapping = r.headers.get("mcp-framing-mapping").map(|v| v.as_bytes());
            (r.method.as_str(), mapping)
        })
        .collect();
    let compat = Some(b"compat".as_slice());
    assert_eq!(
        asked,
        [
            ("server/discover", None),
            ("initialize", compat),
            ("server/discover", None),
            ("tools/call", compat),
            ("server/discover", None),
            ("tools/call", compat)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Defect 4 (the client half): the contract on the rmcp path.

fn answered() -> ToolAnswer {
    Arc::new(|id, headers| framed(headers, vec![tool_result(&id, "answered")]))
}

#[tokio::test]
async fn a_server_that_declares_no_contract_fails_the_handshake_before_any_tool_call() {
    let (addr, log) = Scripted::new(answered()).declaring(|_| None).start().await;
    let transport = StreamableHttpClientTransport::with_client(
        FramingHttpClient::new(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(url(addr)),
    );
    let err = ().serve(transport).await.expect_err("Regime C is refused");
    let err = format!("{err:?}");
    assert!(err.contains("configuration error"), "{err}");
    assert!(err.contains("Regime C"), "{err}");
    assert!(err.contains("configuration_error"), "{err}");
    assert!(err.contains("NoContract"), "{err}");
    assert!(
        err.contains("put a framing layer in front of the server (mcp-frame proxy"),
        "{err}"
    );
    let methods: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.method.clone())
        .collect();
    assert_eq!(
        methods,
        ["initialize"],
        "nothing after the refused handshake"
    );
}

#[tokio::test]
async fn accepting_ambiguity_verifies_a_server_that_frames_without_declaring_its_contract() {
    let (addr, _) = Scripted::new(answered()).declaring(|_| None).start().await;
    let client = FramingHttpClient::new(reqwest::Client::new()).accept_ambiguity(true);
    let stats = client.stats();
    let result = call_tool(addr, client).await.expect("framed, verified");
    assert_eq!(result.content[0].as_text().unwrap().text, "answered");
    assert_eq!((stats.complete(), stats.failed()), (2, 0));
}

#[tokio::test]
async fn the_contract_of_the_initialize_result_sets_the_limits_of_every_later_request() {
    let contract = FramingContract::v1().with_limits(16 * 1024, 1 << 20);
    let (addr, log) = Scripted::new(answered())
        .declaring(move |_| Some(contract.clone()))
        .start()
        .await;
    call_tool(addr, FramingHttpClient::new(reqwest::Client::new()))
        .await
        .expect("a clean call");
    // The handshake went out with the client's own limits; the tool call with the negotiated
    // ones (the smaller of both, SPEC.md §11.3).
    let limits = |method| received(&log, method)[0].headers["mcp-framing-limits"].clone();
    assert_eq!(limits("initialize"), "frame=65536, message=16777216");
    assert_eq!(limits("tools/call"), "frame=16384, message=1048576");
}

/// Posts `message` through `client` as rmcp would, and collects the events of its response.
async fn post(client: &FramingHttpClient, addr: SocketAddr, message: Value) -> Vec<Value> {
    let message: ClientJsonRpcMessage = serde_json::from_value(message).unwrap();
    let response = client
        .post_message(url(addr).into(), message, None, None, Default::default())
        .await
        .expect("a response");
    let StreamableHttpPostResponse::Sse(events, _) = response else {
        panic!("an event stream");
    };
    events
        .map(|event| serde_json::from_str(&event.unwrap().data.unwrap()).unwrap())
        .collect()
        .await
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}})
}

#[tokio::test]
async fn a_server_discover_result_declares_the_contract_too() {
    let contract = FramingContract::v1().with_limits(8 * 1024, 1 << 19);
    let (addr, log) = Scripted::new(answered())
        .declaring(move |_| Some(contract.clone()))
        .start()
        .await;
    let client = FramingHttpClient::new(reqwest::Client::new());
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
    let events = post(&client, addr, discover).await;
    assert!(events[0]["result"]["capabilities"]["extensions"].is_object());
    let events = post(&client, addr, tool_call(2)).await;
    assert_eq!(events[0]["result"]["content"][0]["text"], "answered");
    let call = &received(&log, "tools/call")[0];
    assert_eq!(
        call.headers["mcp-framing-limits"],
        "frame=8192, message=524288"
    );

    // Without a contract the discovery result itself is refused, and no request may follow.
    let (addr, log) = Scripted::new(answered()).declaring(|_| None).start().await;
    let client = FramingHttpClient::new(reqwest::Client::new());
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
    let events = post(&client, addr, discover).await;
    let report = &events[0]["error"]["data"][OUTCOME_DATA_KEY];
    assert_eq!(report["classification"], "configuration_error", "{report}");
    assert_eq!(report["kind"], "NoContract", "{report}");
    let events = post(&client, addr, tool_call(2)).await;
    let report = &events[0]["error"]["data"][OUTCOME_DATA_KEY];
    assert_eq!(report["kind"], "NotDiscovered", "{report}");
    assert_eq!(report["attempts"], 0, "{report}");
    assert!(received(&log, "tools/call").is_empty());
}

#[tokio::test]
async fn a_reinitialization_that_drops_the_contract_fails_closed() {
    // An old instance behind the same URI after a redeploy declares nothing (SPEC.md §11.5).
    let (addr, _) = Scripted::new(answered())
        .declaring(|n| (n == 0).then(FramingContract::v1))
        .start()
        .await;
    let client = FramingHttpClient::new(reqwest::Client::new());
    let events = post(&client, addr, initialize(1)).await;
    assert!(events[0]["result"].is_object(), "{events:?}");
    let events = post(&client, addr, initialize(2)).await;
    assert_eq!(events[0]["id"], 2);
    let report = &events[0]["error"]["data"][OUTCOME_DATA_KEY];
    assert_eq!(report["classification"], "contract_violation", "{report}");
    assert_eq!(report["kind"], "Downgrade", "{report}");
    assert!(
        report["detail"]
            .as_str()
            .unwrap()
            .contains("framing downgrade detected"),
        "{report}"
    );
}

// ---------------------------------------------------------------------------------------------
// Defect 5: the costlier mapping was the default.

#[tokio::test]
async fn both_clients_ask_for_the_compatible_mapping_by_default() {
    let (addr, log) = Scripted::new(answered()).start().await;
    call_tool(addr, FramingHttpClient::new(reqwest::Client::new()))
        .await
        .expect("a clean call");
    let resolver = discovering([url(addr)]);
    RetryingClient::new(reqwest::Client::new(), resolver)
        .call(tool_call(1))
        .await
        .expect("a clean call");
    let requests = log.lock().unwrap().clone();
    let framed: Vec<_> = requests
        .iter()
        .filter(|r| r.headers.contains_key("mcp-framing"))
        .collect();
    assert_eq!(framed.len(), 3, "initialize and two tool calls");
    for request in framed {
        assert_eq!(
            request.headers["mcp-framing-mapping"], "compat",
            "{}",
            request.method
        );
    }
}

// ---------------------------------------------------------------------------------------------
// One outcome report, whichever client.

#[tokio::test]
async fn every_client_hands_its_caller_the_same_outcome_report() {
    // Cut inside the message event, after the record that carries the stream head (230 bytes
    // for one message in the compatible mapping, SPEC.md §18.4).
    let always_cut = cut_then(usize::MAX, 240, |id| {
        String::from_utf8(tool_result(id, "never whole").to_vec()).unwrap()
    });
    let (addr, _) = Scripted::new(always_cut).start().await;
    // No deduplication declared: the keyed tool call is surfaced after one attempt, by each.
    let single =
        outcome_data(&call_tool(addr, FramingHttpClient::new(reqwest::Client::new())).await);
    let resolver = discovering([url(addr)]);
    let retrying = FramingHttpClient::new(reqwest::Client::new()).auto_retry(resolver, schedule(4));
    let retried = outcome_data(&call_tool(addr, retrying).await);
    let resolver = discovering([url(addr)]);
    let err = RetryingClient::new(reqwest::Client::new(), resolver)
        .call(tool_call(1))
        .await
        .unwrap_err();
    let without_ids = |mut report: Value| {
        for member in ["requestKeyFingerprint", "attemptId"] {
            assert!(report[member].is_string(), "{member}: {report}");
            report.as_object_mut().unwrap().remove(member);
        }
        report
    };
    let single = without_ids(single);
    assert_eq!(single, without_ids(retried));
    assert_eq!(single["classification"], err.classification());
    assert_eq!(single["kind"], err.kind());
    assert_eq!(single["classification"], "abandoned");
    assert_eq!(single["kind"], "Truncated");
    assert_eq!(single["attempts"], 1);
    assert_eq!(single["retryDecision"], "surface_to_caller");
    assert_eq!(single["retryReason"], "not_deduplicated");
    assert_eq!(single["regime"], "B");
    let members: Vec<&str> = single
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        members,
        [
            "attempts",
            "bytesReceived",
            "classification",
            "detail",
            "framesReceived",
            "kind",
            "messagesVerified",
            "openMessageBytes",
            "regime",
            "retryDecision",
            "retryReason"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Per-request discovery against rmcp's own answer.

#[tokio::test]
async fn the_discovering_resolver_reads_the_contract_from_rmcps_own_server_discover_answer() {
    // rmcp answers `server/discover` itself (from `get_info`), on an event stream, and checks
    // the request's `MCP-Protocol-Version` header against its `_meta`; the layer declares its
    // contract in that answer: here with limits below the client's own, so that the limits the
    // call is sent with (the smaller of both, SPEC.md §11.3) show the contract was read.
    let layer = FramingLayer::new()
        .frame_size(4096)
        .max_message_size(1 << 20);
    assert_eq!(
        layer.contract(),
        FramingContract::v1().with_limits(4096, 1 << 20)
    );
    let opted_in: Arc<std::sync::Mutex<Vec<http::HeaderMap>>> = Arc::default();
    let record = opted_in.clone();
    let app = Router::new()
        .nest_service("/mcp", layer.layer(rmcp_support::unframed_service()))
        .layer(axum::middleware::from_fn(
            move |request: Request, next: axum::middleware::Next| {
                if request.headers().contains_key("mcp-framing") {
                    record.lock().unwrap().push(request.headers().clone());
                }
                next.run(request)
            },
        ));
    let addr = serve(app).await;
    let http = reqwest::Client::new();
    let call = RetryingClient::new(http.clone(), DiscoveringResolver::new(http, [url(addr)]))
        .call(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await
        .expect("tools/list");
    let response: Value = call.deserialize().unwrap();
    assert_eq!(response["result"]["tools"][0]["name"], "render_report");
    let opted_in = opted_in.lock().unwrap().clone();
    assert_eq!(
        opted_in.len(),
        1,
        "the call alone opts in, not its discovery"
    );
    assert_eq!(
        opted_in[0]["mcp-framing-limits"],
        "frame=4096, message=1048576"
    );

    // Without the layer, rmcp's answer declares no contract: the call is refused before it is
    // sent (SPEC.md §11.5).
    let app = Router::new().nest_service("/mcp", rmcp_support::unframed_service());
    let addr = serve(app).await;
    let http = reqwest::Client::new();
    let err = RetryingClient::new(http.clone(), DiscoveringResolver::new(http, [url(addr)]))
        .call(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await
        .unwrap_err();
    assert_eq!(err.classification(), "configuration_error", "{err}");
    assert_eq!(err.kind(), "NoContract", "{err}");
}

// ---------------------------------------------------------------------------------------------
// The Streamable HTTP headers of the engine's requests.

/// A tool that answers the `MCP-Protocol-Version` header of its own call, as rmcp received it.
#[derive(Clone)]
struct Revisions;

#[rmcp::tool_router(server_handler)]
impl Revisions {
    #[rmcp::tool(description = "The MCP-Protocol-Version header of this call")]
    async fn protocol_version(
        &self,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> String {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-protocol-version"))
            .and_then(|value| value.to_str().ok())
            .unwrap_or("none")
            .to_owned()
    }
}

#[tokio::test]
async fn rmcp_sees_the_retrying_clients_protocol_version_on_a_tools_call() {
    // rmcp reads a request without `MCP-Protocol-Version` as MCP 2025-03-26; the resolver's
    // `server/discover` names 2026-07-28, and so must every call the engine sends after it
    // (with `Mcp-Method` and `Mcp-Name`, which rmcp checks against the body for that revision).
    let service = FramingLayer::new().layer(rmcp_support::stateless_service(Revisions));
    let app = Router::new().nest_service("/mcp", service);
    let addr = serve(app).await;
    let http = reqwest::Client::new();
    let client = RetryingClient::new(http.clone(), DiscoveringResolver::new(http, [url(addr)]));
    let call = client
        .call(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "protocol_version", "arguments": {}}}))
        .await
        .expect("tools/call");
    let response: Value = call.deserialize().unwrap();
    assert_eq!(response["id"], 7, "{response}");
    assert_eq!(
        response["result"]["content"][0]["text"], "2026-07-28",
        "{response}"
    );
}
