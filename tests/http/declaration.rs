//! `FramingLayer` declares what it does (issue 18, defect 4; SPEC.md §11.2): its framing contract
//! is in every `initialize` and `server/discover` result that passes through it, framed or not,
//! behind rmcp's stateful (legacy session) and stateless services answering SSE or JSON, and the
//! result's other bytes are the handler's. Before, the layer declared nothing: a client that did
//! not opt in could not learn that the server frames, and a server had to answer discovery itself
//! in a middleware of its own (as `examples/fleet.rs` did).

use crate::support::EXTENSION_KEY;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::Router;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use mcp_framing::dedupe::{Deduplicator, MemoryStore};
use mcp_framing::internals::sse::SseParser;
use mcp_framing::rmcp_http::{FramingHttpClient, FramingLayer};
use mcp_framing::{
    RequestKey, StreamDecoder, contract::FramingContract, internals::contract::ServerDiscovery,
};
use mcp_framing::{
    http::{Delivery, VerifiedResponse},
    mapping::Mapping,
};
use rmcp::ServiceExt;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tower_layer::Layer;
use tower_service::Service;

use crate::support::http_support::opt_in_headers_asking;
use crate::support::rmcp_support;
use rmcp_support::Reports;

/// rmcp's service for the report tool: with legacy sessions (`StreamableHttpServerConfig`'s
/// default) or stateless, answering SSE or JSON.
fn rmcp_service(stateful: bool, json: bool) -> StreamableHttpService<Reports, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = stateful;
    config.sse_keep_alive = None;
    config.json_response = json;
    StreamableHttpService::new(
        || Ok(Reports),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// rmcp behind `layer` (or alone), on loopback.
async fn server(layer: Option<FramingLayer>, stateful: bool, json: bool) -> SocketAddr {
    let service = rmcp_service(stateful, json);
    serve(match layer {
        Some(layer) => Router::new().nest_service("/mcp", layer.layer(service)),
        None => Router::new().nest_service("/mcp", service),
    })
    .await
}

/// The layers under test: framing only requests that opt in, and framing every response.
fn layers() -> [FramingLayer; 2] {
    [
        FramingLayer::new().frame_size(4096),
        FramingLayer::new()
            .frame_size(4096)
            .frame_all_responses(true),
    ]
}

/// The contract under `field` of a capabilities map, if any.
fn contract_in(capabilities: &Value, field: &str) -> Option<FramingContract> {
    let declared = capabilities.get(field)?.get(EXTENSION_KEY)?;
    Some(serde_json::from_value(declared.clone()).expect("a contract that parses"))
}

#[tokio::test]
async fn the_stock_rmcp_client_finds_the_contract_in_initialize_and_in_server_discover() {
    for layer in layers() {
        for stateful in [true, false] {
            for json in [false, true] {
                let what = format!("{layer:?}, stateful {stateful}, json {json}");
                let addr = server(Some(layer), stateful, json).await;
                let url = format!("http://{addr}/mcp");
                // The legacy handshake: `initialize`, without any opt-in.
                let client = ().serve(StreamableHttpClientTransport::from_uri(url.clone()));
                let client = client.await.unwrap_or_else(|e| panic!("{what}: {e}"));
                let info = serde_json::to_value(client.peer_info().expect("initialized")).unwrap();
                let found = contract_in(&info["capabilities"], "experimental");
                assert_eq!(found, Some(layer.contract()), "{what}: {info}");
                // The tool still answers, through the same layer.
                let tools = client.list_all_tools().await.unwrap();
                assert_eq!(tools.len(), 1, "{what}");
                client.cancel().await.unwrap();
                if stateful {
                    continue;
                }
                // MCP 2026-07-28: `server/discover`, where extensions are declared.
                let lifecycle = ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                };
                let transport = StreamableHttpClientTransport::from_uri(url);
                let client = ().serve_with_lifecycle(transport, lifecycle).await;
                let client = client.unwrap_or_else(|e| panic!("{what}, discover: {e}"));
                let info = serde_json::to_value(client.peer_info().expect("discovered")).unwrap();
                let found = contract_in(&info["capabilities"], "extensions");
                assert_eq!(found, Some(layer.contract()), "{what}: {info}");
                client.cancel().await.unwrap();
            }
        }
    }
}

#[tokio::test]
async fn the_framing_client_finds_the_contract_in_the_framed_initialize_result() {
    for layer in layers() {
        for stateful in [true, false] {
            let addr = server(Some(layer), stateful, false).await;
            let transport = StreamableHttpClientTransport::with_client(
                FramingHttpClient::new(reqwest::Client::new()),
                StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")),
            );
            let client = ().serve(transport).await.unwrap();
            let info = serde_json::to_value(client.peer_info().expect("initialized")).unwrap();
            let found = contract_in(&info["capabilities"], "experimental");
            assert_eq!(
                found,
                Some(layer.contract()),
                "{layer:?}, stateful {stateful}"
            );
            client.cancel().await.unwrap();
        }
    }
}

/// An `initialize` request of the 2025 protocol.
fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "plain", "version": "1"}}})
}

/// A `server/discover` request of MCP 2026-07-28.
fn discover() -> Value {
    json!({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// The protocol version a request names.
fn version_of(request: &Value) -> &str {
    request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        .as_str()
        .or(request["params"]["protocolVersion"].as_str())
        .unwrap_or_default()
}

/// The data of the message events of an SSE body.
fn messages_of(body: &[u8]) -> Vec<String> {
    let mut events = Vec::new();
    SseParser::with_max_event_data(1 << 20)
        .feed(body, &mut events)
        .unwrap();
    events
        .into_iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| e.data)
        .collect()
}

/// POSTs `request` to `addr` with `headers`; returns the response's JSON-RPC messages: the body
/// of a JSON answer, the message events of an SSE one, the verified messages of a framed one.
async fn exchange(addr: SocketAddr, request: &Value, headers: http::HeaderMap) -> Vec<String> {
    let key = headers
        .get("mcp-framing-request-key")
        .map(|v| v.to_str().unwrap().parse::<RequestKey>().unwrap());
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        // MCP 2026-07-28: a request's version and method also go in headers.
        .header("mcp-protocol-version", version_of(request))
        .header("mcp-method", request["method"].as_str().unwrap())
        .headers(headers)
        .body(request.to_string())
        .send()
        .await
        .unwrap();
    let headers = response.headers().clone();
    if response.status() != 200 {
        panic!(
            "{request}: {} {:?}",
            response.status(),
            response.text().await
        );
    }
    let decoder = match key {
        Some(key) => StreamDecoder::builder().expect_request_key(key).build(),
        None => StreamDecoder::new(),
    };
    if Mapping::from_response_headers(&headers).is_some() {
        let mut verified =
            VerifiedResponse::from_headers(response.bytes_stream(), &headers, decoder).unwrap();
        let mut messages = Vec::new();
        while let Some(item) = verified.next().await {
            match item.unwrap() {
                Delivery::Message(m) => {
                    messages.push(String::from_utf8(m.bytes().to_vec()).unwrap())
                }
                _ => return messages,
            }
        }
        unreachable!("a verified response ends with Complete or an error")
    }
    let body = response.bytes().await.unwrap();
    if headers["content-type"] == "application/json" {
        vec![String::from_utf8(body.to_vec()).unwrap()]
    } else {
        messages_of(&body)
    }
}

/// `declared` is `plain` with exactly the contract written in where SPEC.md §11.2 puts it: the
/// text `"{field}":{KEY:contract}` after the capabilities rmcp declares, every other byte as rmcp
/// wrote it.
fn assert_declared(declared: &str, plain: &str, field: &str, contract: &FramingContract) {
    let contract = serde_json::to_string(contract).unwrap();
    let written = format!(",\"{field}\":{{\"{EXTENSION_KEY}\":{contract}}}");
    assert_eq!(declared.matches(&written).count(), 1, "{declared}");
    assert_eq!(declared.replacen(&written, "", 1), plain);
}

#[tokio::test]
async fn the_result_of_initialize_and_server_discover_is_the_handlers_but_for_the_contract() {
    let framed_mappings = [
        None,
        Some(Mapping::Binary),
        Some(Mapping::Sse),
        Some(Mapping::Compat),
    ];
    for stateful in [true, false] {
        for json in [false, true] {
            let plain = server(None, stateful, json).await;
            for layer in layers() {
                let addr = server(Some(layer), stateful, json).await;
                let requests: &[(Value, &str)] = if stateful {
                    &[(initialize(), "experimental")]
                } else {
                    &[(initialize(), "experimental"), (discover(), "extensions")]
                };
                for (request, field) in requests {
                    let expected = exchange(plain, request, http::HeaderMap::new()).await;
                    assert_eq!(expected.len(), 1);
                    for mapping in framed_mappings {
                        let what = format!(
                            "{layer:?}, stateful {stateful}, json {json}, {mapping:?}, {field}"
                        );
                        let headers = match mapping {
                            None => http::HeaderMap::new(),
                            Some(mapping) => opt_in_headers_asking(RequestKey::random(), mapping),
                        };
                        let got = exchange(addr, request, headers).await;
                        assert_eq!(got.len(), 1, "{what}: {got:?}");
                        assert_declared(&got[0], &expected[0], field, &layer.contract());
                        // And a client reads it as the contract (SPEC.md §11.3).
                        let value: Value = serde_json::from_str(&got[0]).unwrap();
                        let discovery = match field {
                            &"experimental" => ServerDiscovery::from_initialize(&value),
                            _ => ServerDiscovery::from_discover(&value),
                        };
                        assert_eq!(
                            discovery.unwrap().contract,
                            Some(layer.contract()),
                            "{what}"
                        );
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn the_contract_says_what_the_layer_does() {
    let contract = FramingLayer::new().contract();
    assert_eq!(
        contract,
        FramingContract::v1().with_limits(16 * 1024, 16 << 20)
    );
    assert_eq!(contract.always_framed, None);
    assert_eq!(contract.transports, ["binary", "sse", "compat"]);
    let every = FramingLayer::new().frame_all_responses(true).contract();
    assert_eq!(every.always_framed.as_deref(), Some("compat"));
    let small = FramingLayer::new()
        .frame_size(100)
        .max_message_size(5000)
        .contract();
    assert_eq!(
        (small.max_frame_payload, small.max_message_size),
        (1026, 5000)
    );
    // With deduplication, the contract declares it: what a retrying client relies on (§17.11).
    let dedupe = FramingLayer::new().dedupe(Deduplicator::new(MemoryStore::new()));
    let declared = dedupe.contract();
    assert_eq!(
        declared.deduplication,
        Some(dedupe.dedupe_layer().declaration())
    );
    let addr =
        serve(Router::new().nest_service("/mcp", dedupe.layer(rmcp_service(false, false)))).await;
    let got = exchange(addr, &discover(), http::HeaderMap::new()).await;
    let value: Value = serde_json::from_str(&got[0]).unwrap();
    let found = ServerDiscovery::from_discover(&value).unwrap().contract;
    assert_eq!(found, Some(declared));
}

/// An inner server answering every request with `body` as `content_type`.
#[derive(Clone)]
struct Scripted {
    content_type: &'static str,
    body: String,
}

impl<B> Service<Request<B>> for Scripted
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Debug,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let response = Response::builder()
            .header("content-type", self.content_type)
            .body(Full::new(Bytes::from(self.body.clone())))
            .unwrap();
        Box::pin(async move {
            // As any MCP server does, it reads the request before it answers.
            request.into_body().collect().await.unwrap();
            Ok(response)
        })
    }
}

/// Sends `request` (not opted in) through the layer to an inner server answering `body`;
/// returns the body the client gets.
async fn through_layer(request: &Value, content_type: &'static str, body: String) -> Bytes {
    through_layer_raw(request.to_string(), content_type, body).await
}

/// [`through_layer`] with the request's text as given.
async fn through_layer_raw(request: String, content_type: &'static str, body: String) -> Bytes {
    let request = Request::post("/mcp")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(request)))
        .unwrap();
    let inner = Scripted { content_type, body };
    let response = FramingLayer::new()
        .layer(inner)
        .call(request)
        .await
        .unwrap();
    response.into_body().collect().await.unwrap().to_bytes()
}

/// Warnings logged while `run` runs (current thread), with their fields.
async fn warnings_during<F: std::future::Future>(run: F) -> (F::Output, Vec<String>) {
    #[derive(Clone, Default)]
    struct Warnings(Arc<Mutex<Vec<String>>>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if *event.metadata().level() == tracing::Level::WARN {
                struct Fields(String);
                impl tracing::field::Visit for Fields {
                    fn record_debug(
                        &mut self,
                        field: &tracing::field::Field,
                        value: &dyn std::fmt::Debug,
                    ) {
                        self.0.push_str(&format!("{}={value:?} ", field.name()));
                    }
                }
                let mut fields = Fields(String::new());
                event.record(&mut fields);
                self.0.lock().unwrap().push(fields.0);
            }
        }
    }
    use tracing_subscriber::layer::SubscriberExt;
    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let output = run.await;
    let logged = warnings.0.lock().unwrap().clone();
    (output, logged)
}

#[tokio::test(flavor = "current_thread")]
async fn a_contract_the_handler_declared_stays_when_it_is_the_layers_and_is_replaced_otherwise() {
    let layer = FramingLayer::new().contract();
    // The layer's values, written otherwise: member order, spacing, escapes.
    let same = format!(
        "{{ \"transports\": [\"binary\", \"sse\", \"compat\"], \"messageDigest\": \"sha256\", \
         \"frameChecksum\": \"crc32\", \"sentinelRequired\": true, \"versions\": [1], \
         \"maxFramePayload\": {}, \"maxMessageSize\": {}, \"x-note\": \"caf\\u00e9\" }}",
        layer.max_frame_payload, layer.max_message_size
    );
    let narrower = serde_json::to_string(&FramingContract::v1().with_transports(["sse"])).unwrap();
    let weaker = r#"{"versions":[1],"sentinelRequired":false,"frameChecksum":"crc32","messageDigest":"sha256","transports":["binary"]}"#;
    let malformed = r#"{"versions":"one"}"#;
    let result = |contract: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"protocolVersion\":\"2025-06-18\",\
             \"capabilities\":{{\"experimental\":{{\"{EXTENSION_KEY}\":{contract},\"other/x\":{{}}}},\
             \"tools\":{{}}}},\"serverInfo\":{{\"name\":\"s\",\"version\":\"1.0\"}}}}}}"
        )
    };
    let written = serde_json::to_string(&layer).unwrap();
    for (declared, kept) in [
        (same.as_str(), true),
        (&narrower, false),
        (weaker, false),
        (malformed, false),
    ] {
        for sse in [false, true] {
            let text = result(declared);
            let (content_type, body) = if sse {
                (
                    "text/event-stream",
                    format!("id: 0\nretry: 100\n\nevent: message\ndata: {text}\n\n"),
                )
            } else {
                ("application/json", text.clone())
            };
            let (got, warnings) =
                warnings_during(through_layer(&initialize(), content_type, body.clone())).await;
            let got = String::from_utf8(got.to_vec()).unwrap();
            if kept {
                assert_eq!(got, body, "{declared}");
                assert!(warnings.is_empty(), "{warnings:?}");
                continue;
            }
            // Replaced where it stood, the rest as the handler wrote it, and said so in the log.
            let expected = body.replacen(declared, &written, 1);
            assert_eq!(got, expected, "{declared}");
            assert_eq!(warnings.len(), 1, "{declared}: {warnings:?}");
            assert!(warnings[0].contains("handler="), "{warnings:?}");
            let value: Value = serde_json::from_str(&messages_or_json(&got, sse)).unwrap();
            let found = ServerDiscovery::from_initialize(&value).unwrap().contract;
            assert_eq!(found, Some(layer.clone()));
        }
    }
}

/// The one JSON-RPC message of a body: the body, or its one message event's data.
fn messages_or_json(body: &str, sse: bool) -> String {
    if sse {
        messages_of(body.as_bytes()).remove(0)
    } else {
        body.to_owned()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn only_the_result_of_a_discovery_request_is_declared_in() {
    // A result shaped as an initialize result, answering another request: left alone.
    let lookalike =
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "initialize"}});
    let notification = json!({"jsonrpc": "2.0", "method": "initialize"});
    // An `initialize` over 64 KiB is no discovery request either (SPEC.md §11.2).
    let mut huge = initialize();
    huge["params"]["clientInfo"]["name"] = json!("x".repeat(64 * 1024));
    for request in [call, notification, huge] {
        let got = through_layer(&request, "application/json", lookalike.to_owned()).await;
        assert_eq!(got, lookalike.as_bytes(), "{}", &request.to_string()[..80]);
    }
    // An error answering `initialize`, and a result the contract cannot go into: unchanged,
    // the second one logged.
    let error =
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unsupported version"}}"#;
    let got = through_layer(&initialize(), "application/json", error.to_owned()).await;
    assert_eq!(got, error.as_bytes());
    let odd = r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"experimental":[]}}}"#;
    let (got, warnings) = warnings_during(through_layer(
        &initialize(),
        "application/json",
        odd.to_owned(),
    ))
    .await;
    assert_eq!(got, odd.as_bytes());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // A result without capabilities of its own gets them, with the contract.
    let bare = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}"#;
    let got = through_layer(&initialize(), "application/json", bare.to_owned()).await;
    let value: Value = serde_json::from_slice(&got).unwrap();
    let found = ServerDiscovery::from_initialize(&value).unwrap().contract;
    assert_eq!(found, Some(FramingLayer::new().contract()));
}

#[tokio::test]
async fn a_discovery_request_is_known_however_its_method_is_spelled() {
    let result = r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{}}}"#;
    for (request, field) in [
        (
            r#"{"method":"initi\u0061lize","jsonrpc":"2.0","id":1,"params":{}}"#,
            "experimental",
        ),
        (
            r#"{"id":1,"jsonrpc":"2.0","method":"server\/discover"}"#,
            "extensions",
        ),
        (
            r#" {"jsonrpc" : "2.0", "id" : 1, "method" : "server/discover"} "#,
            "extensions",
        ),
    ] {
        let got =
            through_layer_raw(request.to_owned(), "application/json", result.to_owned()).await;
        let value: Value = serde_json::from_slice(&got).unwrap();
        let found = contract_in(&value["result"]["capabilities"], field);
        assert_eq!(found, Some(FramingLayer::new().contract()), "{request}");
    }
}
