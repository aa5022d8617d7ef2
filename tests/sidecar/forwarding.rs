//! The sidecar in front of a real Rust MCP server (rmcp, stateless, SSE or JSON answers): stock
//! and framing clients, the contract declared, headers both ways, health, deduplication across a
//! cut, graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_framing::http::opt_in_headers;
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;
use mcp_framing::{AbortCode, BodyError, DecodeError, RequestKey};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleClient, ServiceExt, tool, tool_router};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};

use crate::support::{
    LAST_CHUNK, Proxy, Step, chunk, chunked_head, decode, http, scripted_upstream, tools_call,
    without_records,
};

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct SizedArgs {
    /// Bytes of text in the result.
    bytes: usize,
}

/// A tool server that counts its executions; `slow` waits until the test releases it.
#[derive(Clone)]
struct Counter {
    executions: Arc<AtomicUsize>,
    started: Arc<Notify>,
    /// A permit a `slow` call to finish.
    release: Arc<Semaphore>,
}

impl Default for Counter {
    fn default() -> Self {
        Self {
            executions: Arc::default(),
            started: Arc::default(),
            release: Arc::new(Semaphore::new(0)),
        }
    }
}

#[tool_router(server_handler)]
impl Counter {
    #[tool(description = "A text of `bytes` bytes")]
    async fn sized(&self, Parameters(args): Parameters<SizedArgs>) -> String {
        self.executions.fetch_add(1, Ordering::SeqCst);
        text(args.bytes.min(4 << 20))
    }

    #[tool(description = "Waits until released, then answers")]
    async fn slow(&self) -> String {
        self.executions.fetch_add(1, Ordering::SeqCst);
        self.started.notify_one();
        self.release.acquire().await.expect("never closed").forget();
        "finished".to_owned()
    }
}

/// A deterministic text of `len` bytes, with JSON escapes and multi-byte UTF-8 in it.
fn text(len: usize) -> String {
    let unit = "line \"quoted\" back\\slash\ttab café ✓\n";
    let mut out = String::with_capacity(len + unit.len());
    while out.len() < len {
        out.push_str(unit);
    }
    while out.len() > len {
        out.pop();
    }
    out
}

/// rmcp (stateless, no keep-alives; JSON answers with `json`) on loopback, at `/mcp`.
async fn rmcp_upstream(counter: Counter, json: bool) -> SocketAddr {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    config.json_response = json;
    let service = StreamableHttpService::new(
        move || Ok(counter.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

fn sized_call(bytes: usize) -> CallToolRequestParams {
    CallToolRequestParams::new("sized")
        .with_arguments(json!({"bytes": bytes}).as_object().unwrap().clone())
}

/// Calls `sized` for each of `sizes` on `peer`, then disconnects: the results' texts.
async fn sized_texts(peer: RunningService<RoleClient, ()>, sizes: &[usize]) -> Vec<String> {
    let mut texts = Vec::new();
    for &bytes in sizes {
        let result = peer
            .call_tool(sized_call(bytes))
            .await
            .expect("the call succeeds");
        texts.push(result.content[0].as_text().expect("text").text.clone());
    }
    let _ = peer.cancel().await;
    texts
}

/// [`sized_texts`] through rmcp's stock client at `url`.
async fn stock_calls(url: &str, sizes: &[usize]) -> Vec<String> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    sized_texts(
        ().serve(transport).await.expect("the handshake succeeds"),
        sizes,
    )
    .await
}

/// [`sized_texts`] through the crate's framing client, which verifies every response.
async fn framing_calls(url: &str, sizes: &[usize]) -> Vec<String> {
    let transport = StreamableHttpClientTransport::with_client(
        FramingHttpClient::new(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    sized_texts(
        ().serve(transport).await.expect("the handshake succeeds"),
        sizes,
    )
    .await
}

const SIZES: [usize; 4] = [0, 1024, 65_536, 1 << 20];

#[tokio::test(flavor = "multi_thread")]
async fn stock_and_framing_clients_get_every_result_through_the_proxy() {
    for json_answers in [false, true] {
        let upstream = rmcp_upstream(Counter::default(), json_answers).await;
        let direct = stock_calls(&format!("http://{upstream}/mcp"), &SIZES).await;
        assert_eq!(direct.iter().map(String::len).collect::<Vec<_>>(), SIZES);
        for frame_all in ["off", "compat"] {
            for dedupe in ["on", "off"] {
                let proxy = Proxy::start(
                    &format!("http://{upstream}/mcp"),
                    &["--frame-all", frame_all, "--dedupe", dedupe],
                );
                let what =
                    format!("json {json_answers}, --frame-all {frame_all}, --dedupe {dedupe}");
                assert_eq!(
                    stock_calls(&proxy.url("/mcp"), &SIZES).await,
                    direct,
                    "stock: {what}"
                );
                assert_eq!(
                    framing_calls(&proxy.url("/mcp"), &SIZES).await,
                    direct,
                    "framing: {what}"
                );
            }
        }
    }
}

/// A raw POST through the proxy: status, headers and body.
async fn post(url: &str, headers: http::HeaderMap, body: String) -> reqwest::Response {
    http()
        .post(url)
        .headers(headers)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await
        .expect("the proxy answers")
}

#[tokio::test(flavor = "multi_thread")]
async fn framed_responses_verify_in_every_mapping_and_unframed_ones_are_the_servers_bytes() {
    let upstream = rmcp_upstream(Counter::default(), false).await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &[]);
    let call = tools_call(3, "sized", json!({"bytes": 70_000}));
    for mapping in [Mapping::Binary, Mapping::Sse, Mapping::Compat] {
        let mut headers = opt_in_headers(RequestKey::random(), mapping == Mapping::Binary);
        if mapping == Mapping::Compat {
            headers.insert("mcp-framing-mapping", "compat".parse().unwrap());
        }
        let response = post(&proxy.url("/mcp"), headers, call.clone()).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-accel-buffering"], "no", "{mapping:?}");
        let body = response.bytes().await.unwrap();
        let decoded = decode(mapping, &body);
        decoded
            .end
            .unwrap_or_else(|err| panic!("{mapping:?}: {err}"));
        let result: Value = serde_json::from_str(decoded.messages.last().unwrap()).unwrap();
        assert_eq!(result["id"], 3);
        assert_eq!(
            result["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .len(),
            70_000
        );
    }
    // Not opted in, no --frame-all: what rmcp wrote.
    let response = post(&proxy.url("/mcp"), http::HeaderMap::new(), call.clone()).await;
    assert!(response.headers().get("mcp-framing").is_none());
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let through = response.bytes().await.unwrap();
    let direct = post(
        &format!("http://{upstream}/mcp"),
        http::HeaderMap::new(),
        call,
    )
    .await
    .bytes()
    .await
    .unwrap();
    assert_eq!(through, direct);
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_results_declare_the_contract_always_framed_and_deduplication() {
    let upstream = rmcp_upstream(Counter::default(), true).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    for (args, always, dedupe) in [
        (&["--frame-all", "compat"][..], Some("compat"), true),
        (&["--dedupe", "off"][..], None, false),
    ] {
        let proxy = Proxy::start(&format!("http://{upstream}/mcp"), args);
        let response = post(
            &proxy.url("/mcp"),
            http::HeaderMap::new(),
            initialize.clone(),
        )
        .await;
        let body = response.bytes().await.unwrap();
        let text = String::from_utf8(without_records(&body)).unwrap();
        let json_text = text
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or(&text);
        let result: Value = serde_json::from_str(json_text).unwrap();
        let contract =
            &result["result"]["capabilities"]["experimental"]["io.github.mcp-framing/framing"];
        assert_eq!(contract["versions"], json!([1]), "{args:?}: {result}");
        assert_eq!(contract["alwaysFramed"].as_str(), always, "{args:?}");
        assert_eq!(contract["deduplication"].is_object(), dedupe, "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keyed_call_whose_client_went_away_completes_once_and_its_retry_gets_the_result() {
    let counter = Counter::default();
    let upstream = rmcp_upstream(counter.clone(), false).await;
    // Each attempt on a connection of its own, whichever worker accepts it: the store is shared.
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--workers", "3"]);
    let key = RequestKey::random();
    let call = tools_call(11, "slow", json!({}));
    // The first attempt: the client goes away while the tool runs (both official SDKs would
    // cancel the tool on that disconnect; the sidecar keeps the upstream call going).
    let started = counter.started.notified();
    let first = tokio::spawn({
        let (url, call) = (proxy.url("/mcp"), call.clone());
        async move { post(&url, opt_in_headers(key, true), call).await }
    });
    started.await;
    first.abort();
    let _ = first.await;
    counter.release.add_permits(1);
    // The retry, same key: the recorded result, under the retry's own framing.
    let retry = post(
        &proxy.url("/mcp"),
        opt_in_headers(key, true),
        tools_call(12, "slow", json!({})),
    )
    .await;
    assert_eq!(retry.headers()["mcp-framing-dedupe"], "replay");
    let decoded = decode(Mapping::Binary, &retry.bytes().await.unwrap());
    decoded.end.unwrap();
    let result: Value = serde_json::from_str(&decoded.messages[0]).unwrap();
    assert_eq!(result["id"], 12);
    assert_eq!(result["result"]["content"][0]["text"], "finished");
    assert_eq!(counter.executions.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shutdown_lets_the_calls_in_flight_on_every_worker_finish_and_exits_cleanly() {
    const CALLS: usize = 6;
    let counter = Counter::default();
    let upstream = rmcp_upstream(counter.clone(), false).await;
    let mut proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--shutdown-timeout", "60s", "--workers", "3"],
    );
    // Each call on a connection of its own: the workers accept them as they come.
    let calls: Vec<_> = (0..CALLS)
        .map(|id| {
            let url = proxy.url("/mcp");
            tokio::spawn(async move {
                let response = post(
                    &url,
                    opt_in_headers(RequestKey::random(), true),
                    tools_call(5 + id as u64, "slow", json!({})),
                )
                .await;
                response.bytes().await.unwrap()
            })
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while counter.executions.load(Ordering::SeqCst) < CALLS {
        assert!(tokio::time::Instant::now() < deadline, "the calls run");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let addr = proxy.addr;
    let exit = tokio::task::spawn_blocking(move || {
        let status = proxy.terminate(Duration::from_secs(60));
        // Every line, once the last one came.
        (status, proxy.log_with("every connection closed").join("\n"))
    });
    // The listener closes once the signal is handled: then the tools may finish.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener stays open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    counter.release.add_permits(CALLS);
    for call in calls {
        let decoded = decode(Mapping::Binary, &call.await.unwrap());
        decoded.end.unwrap();
        assert!(decoded.messages[0].contains("finished"));
    }
    let (status, log) = exit.await.unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
    assert!(log.contains("shutting down"), "{log}");
    // Once, when every worker's connections closed.
    assert_eq!(log.matches("every connection closed").count(), 1, "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn end_to_end_headers_pass_hop_by_hop_ones_do_not_and_the_client_is_named() {
    let (upstream, seen) = scripted_upstream(|_| {
        vec![
            Step::Write(bytes::Bytes::from_static(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s-1\r\n\
                  connection: keep-alive, x-hop\r\nx-hop: dropped\r\nkeep-alive: timeout=5\r\n\
                  x-end-to-end: kept\r\nx-accel-buffering: yes\r\n\
                  transfer-encoding: chunked\r\n\r\n",
            )),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
            )),
            Step::Write(bytes::Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--dedupe", "off"]);
    let response = http()
        .post(proxy.url("/mcp?x=1"))
        .header("authorization", "Bearer t0ken")
        .header("mcp-session-id", "s-1")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "sized")
        .header("connection", "keep-alive, x-client-hop")
        .header("x-client-hop", "dropped")
        .header("x-forwarded-for", "203.0.113.9")
        .header("origin", "http://app.example")
        .header("content-type", "application/json")
        .body(tools_call(1, "sized", json!({"bytes": 1})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["mcp-session-id"], "s-1");
    assert_eq!(response.headers()["x-end-to-end"], "kept");
    // The upstream's own `yes` replaced: a streamed answer is never to be buffered.
    let buffering: Vec<_> = response
        .headers()
        .get_all("x-accel-buffering")
        .iter()
        .collect();
    assert_eq!(buffering, ["no"]);
    assert!(response.headers().get("x-hop").is_none());
    assert!(response.headers().get("keep-alive").is_none());
    let _ = response.bytes().await;
    let head = seen.lock().unwrap()[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /mcp?x=1 http/1.1\r\n"), "{head}");
    for kept in [
        "authorization: bearer t0ken",
        "mcp-session-id: s-1",
        "mcp-protocol-version: 2025-11-25",
        "mcp-method: tools/call",
        "mcp-name: sized",
        "origin: http://app.example",
        &format!("host: {}", proxy.addr),
        "x-forwarded-for: 203.0.113.9, 127.0.0.1",
        "x-forwarded-proto: http",
        &format!(
            "forwarded: for=127.0.0.1;proto=http;host=\"{}\"",
            proxy.addr
        ),
    ] {
        assert!(
            head.contains(&format!("{kept}\r\n")),
            "{kept:?} missing in:\n{head}"
        );
    }
    assert!(!head.contains("x-client-hop"), "{head}");
}

/// An upstream answering every request with one SSE event for id 1.
async fn one_event_upstream() -> (SocketAddr, Arc<std::sync::Mutex<Vec<crate::support::Seen>>>) {
    scripted_upstream(|_| {
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
            )),
            Step::Write(bytes::Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_speaking_http2_without_tls_is_served_and_its_authority_is_the_host() {
    use http_body_util::BodyExt;
    let (upstream, seen) = one_event_upstream().await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--dedupe", "off"]);
    let stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 connection (prior knowledge)");
    tokio::spawn(connection);
    for id in 0..2 {
        let request = http::Request::post(proxy.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(http_body_util::Full::new(bytes::Bytes::from(tools_call(
                id,
                "t",
                json!({}),
            ))))
            .unwrap();
        let response = sender.send_request(request).await.expect("answered");
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), http::Version::HTTP_2);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            &body[..],
            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
        );
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        let head = request.head.to_ascii_lowercase();
        assert!(head.starts_with("post /mcp http/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("\r\nhost: {}\r\n", proxy.addr)),
            "{head}"
        );
        assert!(
            head.contains("\r\nmcp-protocol-version: 2025-11-25\r\n"),
            "{head}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_whose_first_bytes_come_one_at_a_time_is_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (upstream, _) = one_event_upstream().await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--dedupe", "off"]);
    // "P" and "PR" could begin HTTP/2's preface: the sidecar waits for the bytes that decide.
    for request_line in ["POST /mcp HTTP/1.1", "PRI /mcp HTTP/1.1"] {
        let body = tools_call(1, "t", json!({}));
        let request = format!(
            "{request_line}\r\nhost: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            proxy.addr,
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (first, rest) = request.as_bytes().split_at(8);
        for byte in first {
            stream.write_all(&[*byte]).await.unwrap();
            stream.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stream.write_all(rest).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        if request_line.starts_with("POST") {
            assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
            assert!(answer.contains("\"result\":{}"), "{answer}");
        } else {
            // Not a method the upstream knows, but HTTP/1.1 all the same: forwarded.
            assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_that_sends_nothing_is_closed_at_the_idle_bound() {
    let (upstream, _) = one_event_upstream().await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--dedupe", "off", "--idle-timeout", "1s"],
    );
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    closed_by_the_sidecar(&mut stream, std::time::Instant::now()).await;
}

/// Waits for the sidecar to close `stream` (a sidecar with `--idle-timeout 1s`), and checks
/// that it did not before the bound had passed after `since`.
async fn closed_by_the_sidecar(stream: &mut tokio::net::TcpStream, since: std::time::Instant) {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    // Generous bound for a loaded machine; the close ends the wait.
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut byte))
        .await
        .expect("the sidecar closes the connection");
    assert!(matches!(read, Ok(0)), "{read:?}");
    let elapsed = since.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kept_alive_connection_is_closed_at_the_idle_bound_after_its_answer_not_during_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An answer that streams for longer than the bound (each silence shorter than it).
    let (upstream, _) = scripted_upstream(|_| {
        let event = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n";
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(event)),
            Step::Pause(Duration::from_millis(700)),
            Step::Write(chunk(event)),
            Step::Pause(Duration::from_millis(700)),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
            )),
            Step::Write(bytes::Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--dedupe", "off", "--idle-timeout", "1s"],
    );
    let body = tools_call(1, "t", json!({}));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        proxy.addr,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // The whole answer (its last chunk), on a connection kept alive.
    while !answer.ends_with(b"0\r\n\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buf))
            .await
            .expect("the answer comes")
            .unwrap();
        assert!(
            read > 0,
            "closed during the answer: {:?}",
            String::from_utf8_lossy(&answer)
        );
        answer.extend_from_slice(&buf[..read]);
    }
    let answered = std::time::Instant::now();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("\"result\":{}"), "{answer}");
    // Then idle: closed once the bound passed.
    closed_by_the_sidecar(&mut stream, answered).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn get_streams_and_deletes_are_forwarded_with_their_headers() {
    let (upstream, seen) = scripted_upstream(|request| {
        if request.head.starts_with("GET") {
            vec![
                Step::Write(chunked_head("text/event-stream")),
                Step::Write(chunk(b"id: 8\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\r\n\r\n")),
                Step::Write(bytes::Bytes::from_static(LAST_CHUNK)),
            ]
        } else {
            vec![Step::Write(bytes::Bytes::from_static(
                b"HTTP/1.1 204 No Content\r\n\r\n",
            ))]
        }
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--frame-all", "compat"],
    );
    let get = http()
        .get(proxy.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("last-event-id", "7")
        .send()
        .await
        .unwrap();
    assert_eq!(get.headers()["x-accel-buffering"], "no");
    assert!(
        get.headers().get("mcp-framing").is_none(),
        "GET streams are not framed"
    );
    assert_eq!(
        get.bytes().await.unwrap(),
        "id: 8\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\r\n\r\n"
    );
    let delete = http()
        .delete(proxy.url("/mcp"))
        .header("mcp-session-id", "s-2")
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 204);
    let seen = seen.lock().unwrap();
    assert!(
        seen[0]
            .head
            .to_ascii_lowercase()
            .contains("last-event-id: 7\r\n")
    );
    assert!(seen[1].head.starts_with("DELETE /mcp HTTP/1.1"));
    assert!(
        seen[1]
            .head
            .to_ascii_lowercase()
            .contains("mcp-session-id: s-2\r\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn health_reports_the_upstream_and_the_store() {
    let upstream = rmcp_upstream(Counter::default(), false).await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &[]);
    let health = http().get(proxy.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let report: Value = health.json().await.unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["upstream"]["reachable"], true);
    assert_eq!(report["store"]["kind"], "memory");
    // An upstream that is gone: 503, and why.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let proxy = Proxy::start(&format!("http://{gone}/mcp"), &["--dedupe", "off"]);
    let health = http().get(proxy.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 503);
    let report: Value = health.json().await.unwrap();
    assert_eq!(report["status"], "unavailable");
    assert_eq!(report["upstream"]["reachable"], false);
    assert!(
        report["upstream"]["error"]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{report}"
    );
    assert_eq!(report["store"]["kind"], "off");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sidecar_enforces_allowed_hosts_and_origins_and_can_send_the_upstreams_host() {
    let (upstream, seen) = scripted_upstream(|_| {
        vec![Step::Write(bytes::Bytes::from_static(
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
        ))]
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &[
            "--allowed-hosts",
            "localhost:*,127.0.0.1:*",
            "--allowed-origins",
            "http://localhost:3000",
            "--rewrite-host",
        ],
    );
    let notification = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let send = |host: &'static str, origin: Option<&'static str>| {
        let request = http()
            .post(proxy.url("/mcp"))
            .header("host", host)
            .header("content-type", "application/json")
            .body(notification);
        let request = match origin {
            Some(origin) => request.header("origin", origin),
            None => request,
        };
        async move { request.send().await.unwrap() }
    };
    let refused = send("evil.example:9000", None).await;
    assert_eq!(refused.status(), 421);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["data"]["cause"], "host_not_allowed");
    let refused = send("localhost:9000", Some("http://evil.example")).await;
    assert_eq!(refused.status(), 403);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["data"]["cause"], "origin_not_allowed");
    assert!(
        seen.lock().unwrap().is_empty(),
        "refused requests never reach the upstream"
    );
    assert_eq!(
        send("localhost:9000", Some("http://localhost:3000"))
            .await
            .status(),
        202
    );
    assert_eq!(send("127.0.0.1:1", None).await.status(), 202);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let head = seen[0].head.to_ascii_lowercase();
    assert!(head.contains(&format!("host: {upstream}\r\n")), "{head}");
    assert!(
        head.contains("x-forwarded-host: localhost:9000\r\n"),
        "{head}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_ends_before_the_final_response_is_an_abort_of_code_4() {
    let (upstream, _) = scripted_upstream(|_| {
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n")),
            Step::Write(bytes::Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--frame-all", "compat", "--dedupe", "off"],
    );
    for (mapping, headers) in [
        (Mapping::Binary, opt_in_headers(RequestKey::random(), true)),
        (Mapping::Compat, http::HeaderMap::new()),
    ] {
        let response = post(
            &proxy.url("/mcp"),
            headers,
            tools_call(2, "sized", json!({})),
        )
        .await;
        let decoded = decode(mapping, &response.bytes().await.unwrap());
        match decoded.end {
            Err(BodyError::Decode(DecodeError::PeerAbort(abort))) => {
                assert_eq!(abort.code, AbortCode::UpstreamFailed, "{mapping:?}");
                assert!(
                    abort.reason.contains("ended before its final response"),
                    "{}",
                    abort.reason
                );
            }
            other => panic!("{mapping:?}: {other:?}"),
        }
    }
}
