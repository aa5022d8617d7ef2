//! A hand-scripted MCP server for `FramingHttpClient` and `RetryingClient` tests: it answers
//! `initialize` and `server/discover` with a framed result declaring the framing contract (or the
//! one a test chooses, or none; `server/discover` unframed when the request does not opt in), notifications with `202`, a GET with `405` (or a scripted SSE
//! body), and hands every `tools/call` to a test's closure, which answers with whatever response
//! (framed, unframed, stalled) the test needs. It logs every POST's method and headers.
// Each includer uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use mcp_framing::http::{FramedBody, OptIn, response_headers};
use mcp_framing::rmcp_http::FramingHttpClient;
use mcp_framing::{Outgoing, StreamEncoder, contract::FramingContract};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

/// How the scripted server answers a `tools/call`: given the JSON-RPC id and the request headers.
pub(crate) type ToolAnswer = Arc<dyn Fn(Value, &HeaderMap) -> Response + Send + Sync>;

/// The contract the `n`th discovery result (0 for the first `initialize` or `server/discover`)
/// declares; `None`: none.
pub(crate) type Declared = Arc<dyn Fn(usize) -> Option<FramingContract> + Send + Sync>;

/// A POST the scripted server received.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    /// The JSON-RPC method.
    pub(crate) method: String,
    /// The request headers.
    pub(crate) headers: HeaderMap,
}

/// Every POST the scripted server received, in order.
pub(crate) type Log = Arc<Mutex<Vec<Received>>>;

/// The requests of `log` with `method`.
pub(crate) fn received(log: &Log, method: &str) -> Vec<Received> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|r| r.method == method)
        .cloned()
        .collect()
}

#[derive(Clone)]
struct Script {
    answer: ToolAnswer,
    /// The body of the standalone GET stream (`text/event-stream`); `None`: GET is `405`.
    get: Option<&'static str>,
    declared: Declared,
    discoveries: Arc<AtomicUsize>,
    log: Log,
}

async fn handle(
    State(script): State<Script>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::GET {
        return match script.get {
            Some(body) => ([("content-type", "text/event-stream")], body).into_response(),
            None => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        };
    }
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let request: Value = serde_json::from_slice(&body).expect("a JSON-RPC message");
    script.log.lock().unwrap().push(Received {
        method: request["method"].as_str().unwrap_or_default().to_owned(),
        headers: headers.clone(),
    });
    let Some(id) = request.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let declared = || {
        let n = script.discoveries.fetch_add(1, Ordering::SeqCst);
        (script.declared)(n)
    };
    match request["method"].as_str() {
        Some("initialize") => {
            let version = request["params"]["protocolVersion"].clone();
            let mut capabilities = json!({"tools": {}});
            if let Some(contract) = declared() {
                capabilities["experimental"] = json!({super::EXTENSION_KEY: contract});
            }
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": capabilities,
                "serverInfo": {"name": "scripted", "version": "1"}}});
            framed(&headers, vec![Bytes::from(result.to_string())])
        }
        Some("server/discover") => {
            let mut capabilities = json!({"tools": {}});
            if let Some(contract) = declared() {
                capabilities["extensions"] = json!({super::EXTENSION_KEY: contract});
            }
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": capabilities, "ttlMs": 0, "cacheScope": "private"}});
            // Framed for a client that opts in; plain JSON for one that does not (a
            // `DiscoveringResolver` discovering the endpoint before each attempt), as a framing
            // server answers it.
            match OptIn::from_headers(&headers).expect("a valid opt-in") {
                Some(_) => framed(&headers, vec![Bytes::from(result.to_string())]),
                None => {
                    ([("content-type", "application/json")], result.to_string()).into_response()
                }
            }
        }
        Some("tools/call") => (script.answer)(id, &headers),
        _ => framed(
            &headers,
            vec![Bytes::from(
                json!({"jsonrpc": "2.0", "id": id,
                       "error": {"code": -32601, "message": "method not found"}})
                .to_string(),
            )],
        ),
    }
}

/// The scripted server, configured before it starts.
pub(crate) struct Scripted {
    script: Script,
}

impl Scripted {
    /// A server answering tool calls with `answer`, declaring `FramingContract::v1()`.
    pub(crate) fn new(answer: ToolAnswer) -> Self {
        Self {
            script: Script {
                answer,
                get: None,
                declared: Arc::new(|_| Some(FramingContract::v1())),
                discoveries: Arc::default(),
                log: Log::default(),
            },
        }
    }

    /// Answers a GET with the SSE body `get`.
    pub(crate) fn get(mut self, get: &'static str) -> Self {
        self.script.get = Some(get);
        self
    }

    /// Declares what `declared` says in each discovery result.
    pub(crate) fn declaring(
        mut self,
        declared: impl Fn(usize) -> Option<FramingContract> + Send + Sync + 'static,
    ) -> Self {
        self.script.declared = Arc::new(declared);
        self
    }

    /// Starts it on loopback: its address, and the log of what it receives.
    pub(crate) async fn start(self) -> (SocketAddr, Log) {
        let log = self.script.log.clone();
        let app = Router::new()
            .route("/mcp", axum::routing::any(handle))
            .with_state(self.script);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (addr, log)
    }
}

/// Starts the scripted server on loopback.
pub(crate) async fn scripted_server(answer: ToolAnswer) -> SocketAddr {
    Scripted::new(answer).start().await.0
}

/// Starts the scripted server on loopback, answering a GET with the SSE body `get`.
pub(crate) async fn scripted_server_with_get(
    answer: ToolAnswer,
    get: Option<&'static str>,
) -> SocketAddr {
    let scripted = Scripted::new(answer);
    match get {
        Some(get) => scripted.get(get),
        None => scripted,
    }
    .start()
    .await
    .0
}

/// A framed response carrying `messages` then the sentinel, in the mapping the request asked for
/// and within the limits it announced (a message over them is an ABORT with code 5).
pub(crate) fn framed(headers: &HeaderMap, messages: Vec<Bytes>) -> Response {
    framed_items(
        headers,
        messages.into_iter().map(Outgoing::Message).collect(),
    )
}

/// A framed response of the given items (the sentinel follows them).
pub(crate) fn framed_items(headers: &HeaderMap, items: Vec<Outgoing>) -> Response {
    let opt_in = OptIn::from_headers(headers)
        .expect("a valid opt-in")
        .expect("the client opts in");
    let encoder = opt_in.encoder(StreamEncoder::builder());
    let body = FramedBody::new(
        stream::iter(items.into_iter().map(Ok::<_, std::io::Error>)),
        encoder,
        opt_in.mapping(),
    );
    (response_headers(opt_in.mapping()), Body::from_stream(body)).into_response()
}

/// A framed response that sends its HEAD frame, then nothing: a server that hangs.
pub(crate) fn stalled(headers: &HeaderMap) -> Response {
    let opt_in = OptIn::from_headers(headers).unwrap().unwrap();
    let encoder = opt_in.encoder(StreamEncoder::builder());
    let never = stream::pending::<Result<Outgoing, std::io::Error>>();
    let body = FramedBody::new(never, encoder, opt_in.mapping());
    (response_headers(opt_in.mapping()), Body::from_stream(body)).into_response()
}

/// The framed body pieces of `items`, without the response around them (for tests that cut or
/// stall a body).
pub(crate) async fn framed_pieces(headers: &HeaderMap, items: Vec<Outgoing>) -> Vec<Bytes> {
    let opt_in = OptIn::from_headers(headers).unwrap().unwrap();
    let encoder = opt_in.encoder(StreamEncoder::builder());
    FramedBody::new(
        stream::iter(items.into_iter().map(Ok::<_, std::io::Error>)),
        encoder,
        opt_in.mapping(),
    )
    .map(|piece| piece.expect("infallible"))
    .collect()
    .await
}

/// A `tools/call` result message with `text` as its only content.
pub(crate) fn tool_result(id: &Value, text: &str) -> Bytes {
    Bytes::from(
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": text}]}})
        .to_string(),
    )
}

/// A tool answer whose result text holds a lone 0xFF byte: verified by its digest, yet not
/// UTF-8.
pub(crate) fn not_utf8_result() -> ToolAnswer {
    Arc::new(|id, headers| {
        let mut message = tool_result(&id, "caf\u{e9}").to_vec();
        let at = message
            .windows(2)
            .position(|w| w == "\u{e9}".as_bytes())
            .unwrap();
        message.splice(at..at + 2, [0xff]);
        framed(headers, vec![Bytes::from(message)])
    })
}

/// Connects `client` to `addr` (transport configured by `config`), calls the tool `echo` once
/// and disconnects.
pub(crate) async fn call_tool_with(
    addr: SocketAddr,
    client: FramingHttpClient,
    config: impl FnOnce(StreamableHttpClientTransportConfig) -> StreamableHttpClientTransportConfig,
) -> Result<CallToolResult, ServiceError> {
    let transport = StreamableHttpClientTransport::with_client(
        client,
        config(StreamableHttpClientTransportConfig::with_uri(format!(
            "http://{addr}/mcp"
        ))),
    );
    let peer = ().serve(transport).await.expect("the handshake succeeds");
    let result = peer.call_tool(CallToolRequestParams::new("echo")).await;
    let _ = peer.cancel().await;
    result
}

/// [`call_tool_with`] with the transport's default configuration.
pub(crate) async fn call_tool(
    addr: SocketAddr,
    client: FramingHttpClient,
) -> Result<CallToolResult, ServiceError> {
    call_tool_with(addr, client, |config| config).await
}

/// The classification data `FramingHttpClient` put in a failed call's JSON-RPC error.
pub(crate) fn outcome_data(result: &Result<CallToolResult, ServiceError>) -> Value {
    let Err(ServiceError::McpError(error)) = result else {
        let got = format!("{result:?}");
        panic!(
            "expected a JSON-RPC error carrying the classification, got {}",
            &got[..got.len().min(500)]
        );
    };
    error.data.as_ref().expect("error data")[mcp_framing::client::OUTCOME_DATA_KEY].clone()
}
