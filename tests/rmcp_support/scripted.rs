//! A hand-scripted MCP server for `FramingHttpClient` tests: it answers `initialize` with a framed
//! result, notifications with `202`, a GET with `405` (or a scripted SSE body), and hands every
//! `tools/call` to a test's closure, which answers with whatever response (framed, unframed,
//! stalled) the test needs.
// Each includer uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use mcp_framing::http::{FramedBody, OptIn, response_headers};
use mcp_framing::rmcp_http::FramingHttpClient;
use mcp_framing::{FramingContract, Outgoing, StreamEncoder};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

/// How the scripted server answers a `tools/call`: given the JSON-RPC id and the request headers.
pub(crate) type ToolAnswer = Arc<dyn Fn(Value, &HeaderMap) -> Response + Send + Sync>;

#[derive(Clone)]
struct Script {
    answer: ToolAnswer,
    /// The body of the standalone GET stream (`text/event-stream`); `None`: GET is `405`.
    get: Option<&'static str>,
}

async fn handle(
    State(Script { answer, get }): State<Script>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::GET {
        return match get {
            Some(body) => ([("content-type", "text/event-stream")], body).into_response(),
            None => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        };
    }
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let request: Value = serde_json::from_slice(&body).expect("a JSON-RPC message");
    let Some(id) = request.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    match request["method"].as_str() {
        Some("initialize") => {
            let version = request["params"]["protocolVersion"].clone();
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}, "experimental": {
                    mcp_framing::EXTENSION_KEY: FramingContract::v1()}},
                "serverInfo": {"name": "scripted", "version": "1"}}});
            framed(&headers, vec![Bytes::from(result.to_string())])
        }
        Some("tools/call") => answer(id, &headers),
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

/// Starts the scripted server on loopback.
pub(crate) async fn scripted_server(answer: ToolAnswer) -> SocketAddr {
    scripted_server_with_get(answer, None).await
}

/// Starts the scripted server on loopback, answering a GET with the SSE body `get`.
pub(crate) async fn scripted_server_with_get(
    answer: ToolAnswer,
    get: Option<&'static str>,
) -> SocketAddr {
    let app = Router::new()
        .route("/mcp", axum::routing::any(handle))
        .with_state(Script { answer, get });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
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
    error.data.as_ref().expect("error data")[mcp_framing::rmcp_http::OUTCOME_DATA_KEY].clone()
}
