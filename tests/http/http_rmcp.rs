//! An rmcp client (with `FramingHttpClient`) calling a tool on an rmcp server (behind
//! `FramingLayer`) over loopback HTTP: clean, and cut by a proxy at every few KiB.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use mcp_framing::mapping::Mapping;
use mcp_framing::{client::OUTCOME_DATA_KEY, rmcp_http::FramingHttpClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};

use crate::support::cut;
use crate::support::metrics_support;
use crate::support::rmcp_support;
use cut::{Cut, cutting_proxy};
use metrics_support::Recorded;
use rmcp_support::{framed_service, render_report_call};

async fn server(cut: Arc<Cut>) -> SocketAddr {
    let app = Router::new()
        .nest_service("/mcp", framed_service(1024))
        .layer(axum::middleware::from_fn_with_state(cut, cutting_proxy));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Calls the tool once over a fresh client; the proxy cuts the tool call's response (only) at
/// `limit`. Returns the result and the bytes the proxy forwarded for the tool call.
async fn call(
    addr: SocketAddr,
    client: FramingHttpClient,
    cut: &Cut,
    limit: usize,
) -> (Result<rmcp::model::CallToolResult, ServiceError>, usize) {
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")),
    );
    cut::call_cut(transport, cut, limit, render_report_call("Q3")).await
}

fn new_cut() -> Arc<Cut> {
    Cut::new()
}

#[tokio::test]
async fn rmcp_client_gets_a_verified_result_through_the_layer() {
    let cut = new_cut();
    let addr = server(cut.clone()).await;
    for mapping in Mapping::ALL {
        let metrics = Recorded::new();
        let _recording = metrics.install_local(); // this runtime's tasks run on this thread
        let client = FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
        let stats = client.stats();
        let result = call(addr, client, &cut, usize::MAX)
            .await
            .0
            .expect("clean call");
        let text = result.content[0].as_text().expect("text").text.clone();
        assert!(text.starts_with("# Q3\n00001 line 0 of a long report body"));
        assert!(text.len() > 20_000, "the result spans many frames");
        assert!(
            stats.complete() >= 2,
            "handshake and call were framed and complete: {stats:?}"
        );
        assert_eq!(stats.abandoned(), 0);
        // The tool's log notification came before its result, verified on the same stream.
        assert_eq!(stats.verified_messages(), stats.complete() + 1, "{stats:?}");
        // Through the metrics facade: every response clean, one tool call timed, no error.
        let port = addr.port().to_string();
        assert_eq!(
            metrics.counter("mcp_framing.client.responses", &[("outcome", "clean")]),
            stats.complete()
        );
        assert_eq!(metrics.counter("mcp_framing.client.truncations", &[]), 0);
        let call = [
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "render_report"),
            ("server.address", "127.0.0.1"),
            ("server.port", port.as_str()),
        ];
        let durations = metrics.histogram("mcp.client.operation.duration", &call);
        assert_eq!(durations.len(), 1, "one tools/call timed");
        assert!(durations[0] > 0.0);
        assert!(
            metrics
                .histogram(
                    "mcp.client.operation.duration",
                    &[("error.type", "abandoned")]
                )
                .is_empty()
        );
    }
}

#[tokio::test]
async fn rmcp_client_reports_a_cut_response_as_abandoned_not_as_a_parse_error() {
    let cut = new_cut();
    let addr = server(cut.clone()).await;
    for mapping in Mapping::ALL {
        let client = || FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
        let (clean, total) = call(addr, client(), &cut, usize::MAX).await;
        let clean = clean.expect("clean call");
        // The STREAM_END sentinel is the last 28 bytes (binary) or its 65-byte event (SSE):
        // cutting at it or inside it leaves the final result verified and only the sentinel
        // missing: the result is delivered (SPEC.md §7 row 4), clean in Regime B, counted apart.
        // In the compatible mapping it travels in the record before the final message's event,
        // so every cut lands before the final message is verified.
        let sentinel = match mapping {
            Mapping::Binary => Some(28),
            Mapping::Sse => Some(65),
            _ => None,
        };
        for limit in sentinel.map_or(vec![], |sentinel| vec![total - sentinel, total - 1]) {
            let metrics = Recorded::new();
            let _recording = metrics.install_local();
            let client = client();
            let stats = client.stats();
            let (result, _) = call(addr, client, &cut, limit).await;
            let result =
                result.unwrap_or_else(|err| panic!("{mapping:?}, cut at {limit}: {err:?}"));
            assert_eq!(result, clean, "cut at {limit}: the verified result");
            assert_eq!(stats.abandoned(), 0, "cut at {limit}");
            assert_eq!(
                metrics.counter(
                    "mcp_framing.client.responses",
                    &[("outcome", "clean"), ("regime", "B")]
                ),
                1,
                "cut at {limit}"
            );
            assert_eq!(
                metrics.counter(
                    "mcp_framing.client.sentinel_missing",
                    &[("mcp.method.name", "tools/call")]
                ),
                1,
                "cut at {limit}"
            );
            assert_eq!(
                metrics.counter("mcp_framing.client.truncations", &[]),
                0,
                "cut at {limit}"
            );
        }
        // Cut anywhere before the result's MESSAGE_END is whole: abandoned.
        let last = sentinel.map_or(total - 1, |sentinel| total - sentinel - 1);
        for limit in [0, 100, 1500, 9000, total / 2, last] {
            let metrics = Recorded::new();
            let _recording = metrics.install_local(); // this runtime's tasks run on this thread
            let client = client();
            let stats = client.stats();
            let (result, _) = call(addr, client, &cut, limit).await;
            let Err(ServiceError::McpError(error)) = result else {
                panic!("{mapping:?}, cut at {limit}: expected our classification, got {result:?}");
            };
            let outcome = &error.data.as_ref().expect("data")[OUTCOME_DATA_KEY];
            assert_eq!(
                outcome["classification"], "abandoned",
                "cut at {limit}: {error:?}"
            );
            assert_eq!(outcome["kind"], "Truncated");
            assert!(error.message.starts_with("mcp-framing: response abandoned"));
            // Keyed, but this client was given no contract saying the server deduplicates
            // (SPEC.md §17.11): surfaced, not retried.
            assert_eq!(outcome["retryDecision"], "surface_to_caller");
            assert_eq!(stats.abandoned(), 1, "cut at {limit}");
            // Through the metrics facade: the handshake was clean, the cut call abandoned,
            // counted as a truncation, surfaced (no deduplication declared to this client),
            // and timed with `error.type`.
            let responses =
                |outcome| metrics.counter("mcp_framing.client.responses", &[("outcome", outcome)]);
            assert_eq!(
                (responses("clean"), responses("abandoned")),
                (1, 1),
                "cut at {limit}"
            );
            assert_eq!(
                metrics.counter(
                    "mcp_framing.client.truncations",
                    &[("mcp.method.name", "tools/call")]
                ),
                1
            );
            assert_eq!(
                metrics.counter(
                    "mcp_framing.client.retry_decisions",
                    &[
                        ("decision", "surface_to_caller"),
                        ("reason", "not_deduplicated")
                    ]
                ),
                1
            );
            let failed = metrics.histogram(
                "mcp.client.operation.duration",
                &[
                    ("mcp.method.name", "tools/call"),
                    ("gen_ai.tool.name", "render_report"),
                    ("error.type", "abandoned"),
                ],
            );
            assert_eq!(failed.len(), 1, "cut at {limit}");
        }
    }
}

#[tokio::test]
async fn rmcp_client_fails_closed_against_a_server_that_ignores_the_opt_in() {
    // The same rmcp server without the layer: it answers unframed JSON / SSE.
    let app = Router::new().nest_service("/mcp", rmcp_support::unframed_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = FramingHttpClient::new(reqwest::Client::new());
    let stats = client.stats();
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")),
    );
    // The handshake's response is not framed: nothing in it is handed to rmcp.
    let err = ().serve(transport).await.unwrap_err();
    // rmcp answers this POST as plain SSE `message` events: a contract violation, not retried.
    let err = format!("{err:?}");
    assert!(
        err.contains("contract_violation") || err.contains("NotFramed"),
        "{err}"
    );
    assert!(
        err.contains("do_not_retry") || err.contains("NotFramed"),
        "{err}"
    );
    // The error says what to do about a server that does not frame.
    assert!(
        err.contains(
            "put a framing layer in front of the server (mcp-frame proxy, or FramingLayer in a \
             Rust server), or connect without mcp-framing"
        ),
        "{err}"
    );
    assert_eq!(stats.verified_messages(), 0);
    assert_eq!(stats.failed(), 1);
}

#[tokio::test]
async fn the_layer_answers_a_request_that_did_not_opt_in_exactly_as_before() {
    let addr = server(new_cut()).await;
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "plain", "version": "1"}}});
    let post = |framed: bool| {
        let mut request = reqwest::Client::new()
            .post(format!("http://{addr}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize.to_string());
        if framed {
            request = request.headers(mcp_framing::http::opt_in_headers(
                mcp_framing::RequestKey::random(),
                true,
            ));
        }
        request.send()
    };
    let plain = post(false).await.unwrap();
    assert!(plain.headers().get("mcp-framing").is_none());
    let body = plain.text().await.unwrap();
    assert!(body.contains(r#""jsonrpc":"2.0""#), "{body}");
    let framed = post(true).await.unwrap();
    assert_eq!(
        framed.headers()["content-type"],
        "application/vnd.mcp-framing"
    );
    assert_eq!(framed.headers()["mcp-framing"], "1");
    let bytes = framed.bytes().await.unwrap();
    let stream = mcp_framing::StreamDecoder::new()
        .decode_all(&bytes)
        .unwrap();
    assert_eq!(stream.messages.len(), 1, "the initialize result, verified");
}

#[tokio::test]
async fn rmcp_server_behind_the_layer_aborts_a_result_over_the_limit_the_client_announced() {
    // The client's transport accepts JSON-RPC messages of at most 16 KiB; the tool's result is
    // about 34 KiB. The client says so with its opt-in (`Mcp-Framing-Limits`, SPEC.md §11.3),
    // so the layer aborts with code 5 (message too large, not retried) instead of sending a
    // message the client would have to refuse and blame on the server.
    let addr = server(new_cut()).await;
    for mapping in Mapping::ALL {
        let transport = StreamableHttpClientTransport::with_client(
            FramingHttpClient::new(reqwest::Client::new()).mapping(mapping),
            StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
                .max_json_response_size(16 * 1024),
        );
        let peer = ().serve(transport).await.expect("the handshake fits");
        let result = peer.call_tool(render_report_call("Q3")).await;
        let _ = peer.cancel().await;
        let Err(ServiceError::McpError(error)) = result else {
            panic!("{mapping:?}: expected our classification, got an Ok or another error");
        };
        let outcome = &error.data.as_ref().expect("data")[OUTCOME_DATA_KEY];
        assert_eq!(outcome["classification"], "aborted", "{outcome}");
        assert_eq!(outcome["kind"], "PeerAbort", "{outcome}");
        assert!(
            outcome["detail"]
                .as_str()
                .unwrap()
                .contains("message too large"),
            "{outcome}"
        );
        assert_eq!(outcome["retryDecision"], "do_not_retry");
    }
}
