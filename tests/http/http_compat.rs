//! The compatible SSE mapping (SPEC.md §18) end to end over loopback HTTP: rmcp's server behind
//! `FramingLayer` framing every response; the stock rmcp client reads it as a plain MCP stream;
//! `FramingHttpClient` asking for it verifies it, reports a cut at any offset as abandoned and a
//! gateway that strips the comments as a contract violation.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use bytes::BytesMut;
use mcp_framing::internals::sse::SseParser;
use mcp_framing::internals::sse_compat::CompatDecoder;
use mcp_framing::{StreamDecoder, outcome::Verdict};
use mcp_framing::{
    client::OUTCOME_DATA_KEY,
    rmcp_http::{FramingHttpClient, FramingLayer},
};
use rmcp::model::CallToolResult;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ServiceError, ServiceExt};
use tower_layer::Layer;

use crate::support::cut;
use crate::support::http_support::opt_in_headers_asking;
use crate::support::rmcp_support;
use cut::{Cut, cutting_proxy};
use rmcp_support::{Reports, render_report_call};

/// How the server answers.
#[derive(Clone, Copy, Debug)]
struct Setup {
    /// `FramingLayer::frame_all_responses`.
    all_responses: bool,
    /// rmcp answers with `application/json` bodies instead of SSE.
    json: bool,
    /// No layer at all: what a stock server sends.
    unframed: bool,
}

const EVERY_RESPONSE: Setup = Setup {
    all_responses: true,
    json: false,
    unframed: false,
};

fn rmcp_service(json: bool) -> StreamableHttpService<Reports, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    config.json_response = json;
    StreamableHttpService::new(
        || Ok(Reports),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// A server for `setup` behind the cutting proxy; with `drop_mapping_header`, the proxy also
/// removes the request's `Mcp-Framing-Mapping` header (a server that does not know the
/// compatible mapping then answers in the §15 one).
async fn server(setup: Setup, cut: Arc<Cut>, drop_mapping_header: bool) -> SocketAddr {
    let service = rmcp_service(setup.json);
    let app = if setup.unframed {
        Router::new().nest_service("/mcp", service)
    } else {
        Router::new().nest_service("/mcp", layer_of(setup).layer(service))
    };
    let app = app.layer(axum::middleware::from_fn_with_state(cut, cutting_proxy));
    let app = if drop_mapping_header {
        app.layer(axum::middleware::from_fn(
            |mut request: Request, next: axum::middleware::Next| async move {
                request.headers_mut().remove("mcp-framing-mapping");
                let response: Response = next.run(request).await;
                response
            },
        ))
    } else {
        app
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Calls the report tool over `transport`, the tool call's response cut at `limit`.
async fn call<T, E, A>(
    transport: T,
    cut: &Cut,
    limit: usize,
) -> (Result<CallToolResult, ServiceError>, usize)
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    cut::call_cut(transport, cut, limit, render_report_call("Q3")).await
}

fn framing_transport(
    addr: SocketAddr,
    client: FramingHttpClient,
) -> StreamableHttpClientTransport<FramingHttpClient> {
    StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")),
    )
}

fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().expect("text").text.clone()
}

#[tokio::test]
async fn the_stock_rmcp_client_reads_every_response_framed_in_the_compatible_mapping() {
    let mut results = Vec::new();
    for setup in [
        Setup {
            unframed: true,
            ..EVERY_RESPONSE
        },
        EVERY_RESPONSE,
        Setup {
            json: true,
            ..EVERY_RESPONSE
        },
    ] {
        let cut = Cut::new();
        let addr = server(setup, cut.clone(), false).await;
        // rmcp's own reqwest transport, which never opts in.
        let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
        let (result, _) = call(transport, &cut, usize::MAX).await;
        let result = result.unwrap_or_else(|err| panic!("{setup:?}: {err}"));
        assert!(text(&result).starts_with("# Q3\n00001 line 0 of a long report body"));
        results.push(text(&result));
    }
    assert!(results[0].len() > 20_000);
    assert_eq!(results[1], results[0], "framed in compat, the same result");
    assert_eq!(results[2], results[0], "a JSON answer framed in compat");
}

/// POSTs `initialize` without opting in; returns the response's `Mcp-Framing` header, content
/// type and body.
async fn plain_initialize(addr: SocketAddr) -> (Option<String>, String, Vec<u8>) {
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "plain", "version": "1"}}});
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let framing = header("mcp-framing");
    let content_type = header("content-type").unwrap_or_default();
    (
        framing,
        content_type,
        response.bytes().await.unwrap().to_vec(),
    )
}

/// The layer of `setup` (the one `server` mounts).
fn layer_of(setup: Setup) -> FramingLayer {
    FramingLayer::new()
        .frame_size(1024)
        .frame_all_responses(setup.all_responses)
}

/// `messages` with the declaration the layer of `setup` writes into an `initialize` result taken
/// out again: exactly the text `"experimental":{KEY:contract}` after the capabilities rmcp
/// declares (SPEC.md §11.2), every other byte as rmcp wrote it.
fn undeclared(messages: &[String], setup: Setup) -> Vec<String> {
    let contract = serde_json::to_string(&layer_of(setup).contract()).unwrap();
    let declared = format!(
        ",\"experimental\":{{\"{}\":{contract}}}",
        crate::support::EXTENSION_KEY
    );
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].matches(&declared).count(), 1, "{messages:?}");
    vec![messages[0].replacen(&declared, "", 1)]
}

/// The data of the `message` events a plain SSE parser reads.
fn stock_view(body: &[u8]) -> Vec<String> {
    let mut events = Vec::new();
    SseParser::with_max_event_data(1 << 24)
        .feed(body, &mut events)
        .unwrap();
    events
        .into_iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| e.data)
        .collect()
}

#[tokio::test]
async fn a_response_to_a_request_that_did_not_opt_in_carries_the_unframed_messages_and_verifies() {
    let unframed = server(
        Setup {
            unframed: true,
            ..EVERY_RESPONSE
        },
        Cut::new(),
        false,
    )
    .await;
    let (framing, content_type, plain) = plain_initialize(unframed).await;
    assert_eq!(
        (framing, content_type.as_str()),
        (None, "text/event-stream")
    );
    for setup in [
        EVERY_RESPONSE,
        Setup {
            json: true,
            ..EVERY_RESPONSE
        },
    ] {
        let addr = server(setup, Cut::new(), false).await;
        let (framing, content_type, body) = plain_initialize(addr).await;
        assert_eq!(framing.as_deref(), Some("1; mapping=compat"), "{setup:?}");
        assert_eq!(content_type, "text/event-stream");
        // What a stock client reads: the very messages of the unframed server, the layer's
        // contract declared in the result (SPEC.md §11.2).
        assert_eq!(
            undeclared(&stock_view(&body), setup),
            stock_view(&plain),
            "{setup:?}"
        );
        assert!(body.starts_with(b":mcp-framing "), "{setup:?}");
        // What a framing client verifies: the same message, complete (no key: not opted in).
        let mut compat = CompatDecoder::new();
        let mut frames = BytesMut::new();
        compat.feed(&body, &mut frames).unwrap();
        compat.finish();
        let stream = StreamDecoder::new().decode_all(&frames).unwrap();
        assert_eq!(stream.head.request_key, None);
        let messages: Vec<String> = stream
            .messages
            .iter()
            .map(|m| String::from_utf8(m.bytes().to_vec()).unwrap())
            .collect();
        assert_eq!(undeclared(&messages, setup), stock_view(&plain));
    }
    // Without the switch, a request that did not opt in is answered unframed, as before, its
    // result declaring the contract.
    let opt_in_only = Setup {
        all_responses: false,
        ..EVERY_RESPONSE
    };
    let (framing, _, body) = plain_initialize(server(opt_in_only, Cut::new(), false).await).await;
    assert_eq!(framing, None);
    assert_eq!(
        undeclared(&stock_view(&body), opt_in_only),
        stock_view(&plain)
    );
    assert!(!body.windows(12).any(|w| w == b":mcp-framing"));
}

#[tokio::test]
async fn the_framing_client_verifies_compat_responses_and_reports_every_cut_as_abandoned() {
    for setup in [
        EVERY_RESPONSE,
        Setup {
            all_responses: false,
            ..EVERY_RESPONSE
        },
        Setup {
            json: true,
            ..EVERY_RESPONSE
        },
    ] {
        let cut = Cut::new();
        let addr = server(setup, cut.clone(), false).await;
        let client = || FramingHttpClient::new(reqwest::Client::new()).compat(true);
        let clean = client();
        let stats = clean.stats();
        let (result, total) = call(framing_transport(addr, clean), &cut, usize::MAX).await;
        let result = result.unwrap_or_else(|err| panic!("{setup:?}: {err}"));
        assert!(text(&result).len() > 20_000);
        assert!(stats.complete() >= 2, "{setup:?}: {stats:?}");
        assert_eq!(stats.abandoned(), 0);
        // Cut at 60 offsets spread over the body, and next to its end: always abandoned.
        let mut limits: Vec<usize> = (0..60).map(|i| i * total / 60).collect();
        limits.extend([1, 13, 14, total - 2, total - 1]);
        for limit in limits {
            let client = client();
            let stats = client.stats();
            let (result, _) = call(framing_transport(addr, client), &cut, limit).await;
            let Err(ServiceError::McpError(error)) = result else {
                panic!(
                    "{setup:?}, cut at {limit} of {total}: expected our classification, got {result:?}"
                );
            };
            let outcome = &error.data.as_ref().expect("data")[OUTCOME_DATA_KEY];
            assert_eq!(
                (outcome["classification"].as_str(), outcome["kind"].as_str()),
                (Some("abandoned"), Some("Truncated")),
                "{setup:?}, cut at {limit} of {total}: {error:?}"
            );
            // Keyed, but the server declares no deduplication: surfaced, not retried (§11.6).
            assert_eq!(outcome["retryDecision"], "surface_to_caller");
            assert_eq!(stats.abandoned(), 1);
        }
    }
}

#[tokio::test]
async fn a_request_that_opts_in_for_compat_gets_it_with_its_request_key() {
    let opt_in_only = Setup {
        all_responses: false,
        ..EVERY_RESPONSE
    };
    for setup in [opt_in_only, EVERY_RESPONSE] {
        let addr = server(setup, Cut::new(), false).await;
        let key = mcp_framing::RequestKey::random();
        let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "framing", "version": "1"}}});
        let response = reqwest::Client::new()
            .post(format!("http://{addr}/mcp"))
            .headers(opt_in_headers_asking(
                key,
                mcp_framing::mapping::Mapping::Compat,
            ))
            .header("content-type", "application/json")
            .body(initialize.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(
            mcp_framing::mapping::Mapping::from_response_headers(response.headers()),
            Some(mcp_framing::mapping::Mapping::Compat),
            "{setup:?}"
        );
        let body = response.bytes().await.unwrap();
        let mut compat = CompatDecoder::new();
        let mut frames = BytesMut::new();
        compat.feed(&body, &mut frames).unwrap();
        compat.finish();
        let stream = StreamDecoder::builder()
            .expect_request_key(key)
            .build()
            .decode_all(&frames)
            .unwrap();
        assert_eq!(stream.messages.len(), 1, "the initialize result, verified");
        assert_eq!(
            compat.records(),
            1,
            "HEAD, the DATA headers, MESSAGE_END and STREAM_END"
        );
    }
}

#[tokio::test]
async fn a_gateway_that_strips_the_comments_is_a_contract_violation_not_a_clean_response() {
    let cut = Cut::new();
    let addr = server(EVERY_RESPONSE, cut.clone(), false).await;
    cut.strip_comments.store(true, Ordering::SeqCst);
    // A stock client does not notice: the messages are all there.
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let (result, _) = call(transport, &cut, usize::MAX).await;
    assert!(result.is_ok(), "{result:?}");
    // A framing client fails closed on the handshake's response, and records why.
    let client = FramingHttpClient::new(reqwest::Client::new()).compat(true);
    let stats = client.stats();
    let err = ().serve(framing_transport(addr, client)).await.unwrap_err();
    let err = format!("{err:?}");
    assert!(err.contains("contract_violation"), "{err}");
    assert!(
        err.contains("Compat") && err.contains("not announced"),
        "{err}"
    );
    assert_eq!((stats.verified_messages(), stats.failed()), (0, 1));
}

#[tokio::test]
async fn a_client_asking_for_compat_reads_the_sse_mapping_of_a_server_without_it() {
    // The proxy drops `Mcp-Framing-Mapping`: the layer answers in the §15 mapping.
    let cut = Cut::new();
    let addr = server(
        Setup {
            all_responses: false,
            ..EVERY_RESPONSE
        },
        cut.clone(),
        true,
    )
    .await;
    let client = FramingHttpClient::new(reqwest::Client::new()).compat(true);
    let stats = client.stats();
    let (result, _) = call(framing_transport(addr, client), &cut, usize::MAX).await;
    assert!(text(&result.expect("clean call")).len() > 20_000);
    assert!(stats.complete() >= 2);
}

#[test]
fn a_compat_mapping_violation_is_not_retried() {
    let err = mcp_framing::mapping::CompatError::UnframedEvent { event: 0 };
    let outcome = mcp_framing::http::ReceiveError::<std::io::Error>::Invalid(
        mcp_framing::BodyError::Compat(err),
    )
    .outcome()
    .unwrap();
    assert!(matches!(outcome.verdict, Verdict::MappingViolation(_)));
    assert_eq!(outcome.verdict.name(), "contract_violation");
}

#[tokio::test]
async fn framed_body_writes_the_compatible_mapping_that_verified_response_reads() {
    use futures_util::StreamExt;
    use mcp_framing::{Outgoing, StreamEncoder, StreamHead};
    use mcp_framing::{
        http::{Delivery, FramedBody, VerifiedResponse, response_headers},
        mapping::Mapping,
    };

    let progress =
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
    let result = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
    let items = vec![
        Outgoing::Message(bytes::Bytes::from_static(progress)),
        Outgoing::KeepAlive,
        Outgoing::Chunk(bytes::Bytes::from_static(&result[..20])),
        Outgoing::Chunk(bytes::Bytes::from_static(&result[20..])),
        Outgoing::FinishMessage,
    ];
    let source = futures_util::stream::iter(items.into_iter().map(Ok::<_, std::io::Error>));
    let encoder = StreamEncoder::builder()
        .frame_size(16)
        .build(StreamHead::for_request(None));
    let pieces: Vec<bytes::Bytes> = FramedBody::new(source, encoder, Mapping::Compat)
        .map(|piece| piece.unwrap())
        .collect()
        .await;
    let body = pieces.concat();
    // A stock client reads the two messages; the keep-alive is a comment.
    assert_eq!(
        stock_view(&body),
        [
            String::from_utf8_lossy(progress),
            String::from_utf8_lossy(result)
        ]
    );
    let headers = response_headers(Mapping::Compat);
    for cut in 0..=body.len() {
        let chunks = body[..cut]
            .chunks(7)
            .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c)))
            .collect::<Vec<_>>();
        let mut verified = VerifiedResponse::from_headers(
            futures_util::stream::iter(chunks),
            &headers,
            StreamDecoder::new(),
        )
        .unwrap();
        let mut messages = 0;
        let mut complete = false;
        let mut abandoned = false;
        while let Some(item) = verified.next().await {
            match item {
                Ok(Delivery::Message(_)) => messages += 1,
                Ok(Delivery::Complete(_)) => complete = true,
                Ok(_) => {}
                Err(err) => abandoned = err.is_abandoned(),
            }
        }
        if cut == body.len() {
            assert!(complete && messages == 2);
        } else {
            assert!(!complete && abandoned, "cut at {cut}");
        }
    }
}
