//! End-to-end cost of framing, as a user meets it (issue 14, issue 13 §5): a `tools/call` round
//! trip over loopback, medians of many calls, release build.
//!
//! Servers, in a child process of this bench (so that its CPU time is its own):
//! - `rmcp`: rmcp's stateless `StreamableHttpService` with one tool, `blob`, whose result is a
//!   text of the requested size; mounted with `axum::serve`, once bare (`/mcp`, the unframed
//!   baseline), once behind `FramingLayer` with 16 KiB frames (`/mcp-framed`), and once behind
//!   `FramingLayer::frame_all_responses` (`/mcp-all`: every response in the compatible SSE
//!   mapping, opted in or not);
//! - `plain`: an axum handler answering the same JSON-RPC response itself (`/plain`):
//!   `application/json` unframed, or a `FramedBody` when the request opted in (the non-rmcp
//!   path), in the mapping the request asked for.
//!
//! Each is served twice: by `axum::serve` as is (Nagle's algorithm on, `nagle` in the results)
//! and with TCP_NODELAY set on every accepted socket (`nodelay`).
//!
//! The client (this process, one thread) posts `tools/call` with reqwest. Unframed, it reads the
//! response as a stock client does: SSE events with `sse-stream` (rmcp's parser), or the JSON
//! body, without parsing the JSON (the strictest baseline). Framed, it opts in with a fresh
//! request key, asks for the mapping measured (base64 SSE, compatible SSE, binary), checks that
//! the response declares it, and verifies the body with `VerifiedResponse` (CRC-32s, length,
//! SHA-256, sentinel, request key); a call that does not verify fails the configuration. One
//! more configuration reads `/mcp-all` as a stock client (not opted in, `sse-stream`): what the
//! compatible mapping costs the clients that do not frame.
//!
//! Measured, for every (server, framing, size, TCP_NODELAY):
//! - latency: wall time of one call (calls in sequence on a kept-alive connection), median;
//! - server CPU per call: the server process's on-CPU time (the sum over its threads of
//!   `/proc/<pid>/task/<tid>/schedstat`, nanoseconds) across a batch, divided by the batch;
//! - client CPU per call: this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) across a batch;
//! - bytes per call: the response body as the client received it, and the bytes the server wrote
//!   to the socket (HTTP head, chunked framing and body; counted by the server's listener);
//! - the tail (issue 21): the time from the last body byte the client received before the
//!   response was in hand to the response in hand (unframed: its event or body complete; framed:
//!   the final response verified), median: what the client still does once the transfer is over;
//!
//! and, at 64 KiB and 1 MiB, throughput with 32 calls in flight (calls per second, median of
//! rounds).
//!
//! Configurations are interleaved: every round runs a batch of each configuration of a
//! (size, TCP_NODELAY) block in turn, so that a noisy neighbour weighs on all of them alike and
//! the ratios (framed / unframed, from the same run) stay meaningful on a shared machine.
//! Criterion is not used: it measures one closure at a time (no interleaving) and reports one
//! quantity, where this bench needs the server's CPU time beside each latency.
//!
//! Run: `cargo bench --features rmcp,demo,internals --bench e2e` (or `bash scripts/bench-report --e2e`,
//! which also writes `docs/perf/e2e.md` and the plot). Options after `--`:
//! `--rounds N` (default 20), `--batch N` calls per round and configuration (default 5),
//! `--sizes 1KiB,64KiB`, `--only SUBSTRING` (configuration names such as `rmcp/binary/64KiB/nagle`),
//! `--no-latency`, `--no-throughput`, `--no-floors`, `--tp-rounds N` (default 5),
//! `--tp-sizes 64KiB,1MiB` (the throughput measurement's result sizes), `--out PATH`
//! (default `target/e2e/latest.json`). Set `E2E_SERVER_WRAPPER` (e.g.
//! `valgrind --tool=callgrind`) to run the server under a profiler.

// The opt-in headers of each mapping, as the tests write them.
#[path = "../tests/support/http_support.rs"]
#[allow(dead_code)] // the bench writes its own requests: only the headers are shared
mod http_support;

use std::fmt;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use http_support::opt_in_headers_asking;
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::{Outgoing, RequestKey, StreamDecoder, StreamEncoder, StreamHead};
use mcp_framing::{
    http::{Delivery, FramedBody, OptIn, VerifiedResponse, response_headers},
    mapping::Mapping,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};
use serde_json::{Value, json};
use tower_layer::Layer;

/// The DATA frame size of every framed response (the encoder's default).
const FRAME_SIZE: usize = 16 * 1024;
/// Environment variable that turns this binary into the server process.
const SERVER_ENV: &str = "MCP_FRAMING_E2E_SERVER";
/// Result sizes measured (issue 14's table, issue 13 §5's 1 KiB / 64 KiB / 1 MiB).
const SIZES: [usize; 5] = [1024, 64 * 1024, 128 * 1024, 200 * 1024, 1024 * 1024];
/// Calls in flight in the throughput measurement, and its result sizes (issue 14's 64 KiB, issue
/// 13 §5's 1 MiB).
const CONCURRENCY: usize = 32;
const THROUGHPUT_SIZES: [usize; 2] = [64 * 1024, 1024 * 1024];
const THROUGHPUT_CALLS_PER_TASK: usize = 10;

// ---------------------------------------------------------------------------------------------
// What is measured: servers and framings. A new mapping is one more `Framing` variant.

/// Which server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    /// rmcp's `StreamableHttpService` (bare for unframed calls, behind `FramingLayer` otherwise).
    Rmcp,
    /// A plain axum handler (`FramedBody` for framed calls).
    Plain,
}

/// How the response travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// No opt-in, no layer: the baseline.
    Unframed,
    /// No opt-in, through `FramingLayer` (rmcp only): what the layer costs a client that does
    /// not frame.
    PassThrough,
    /// The base64 SSE mapping (`event: mcp-frame`).
    Sse,
    /// The compatible SSE mapping (`message` events, `:mcp-framing` records), opted in.
    Compat,
    /// The binary mapping (`application/vnd.mcp-framing`).
    Binary,
    /// No opt-in, through `FramingLayer::frame_all_responses` (rmcp only): the compatible
    /// mapping read by a stock client, which skips the records.
    CompatStock,
}

impl Framing {
    /// Every framing, in report order. A new mapping goes here and in the methods below.
    const ALL: [Framing; 6] = [
        Self::Unframed,
        Self::PassThrough,
        Self::Sse,
        Self::Compat,
        Self::Binary,
        Self::CompatStock,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Unframed => "unframed",
            Self::PassThrough => "layer-not-opted-in",
            Self::Sse => "sse",
            Self::Compat => "compat",
            Self::Binary => "binary",
            Self::CompatStock => "compat-stock-client",
        }
    }

    /// The mapping a call with this framing opts in to and verifies (`None`: not opted in).
    fn mapping(self) -> Option<Mapping> {
        match self {
            Self::Unframed | Self::PassThrough | Self::CompatStock => None,
            Self::Sse => Some(Mapping::Sse),
            Self::Compat => Some(Mapping::Compat),
            Self::Binary => Some(Mapping::Binary),
        }
    }

    /// The mapping the response must declare (`Mcp-Framing` and `Content-Type`).
    fn declared(self) -> Option<Mapping> {
        match self {
            Self::CompatStock => Some(Mapping::Compat),
            framing => framing.mapping(),
        }
    }

    fn applies_to(self, server: Server) -> bool {
        !matches!(self, Self::PassThrough | Self::CompatStock) || server == Server::Rmcp
    }
}

impl Server {
    const ALL: [Server; 2] = [Self::Rmcp, Self::Plain];

    fn name(self) -> &'static str {
        match self {
            Self::Rmcp => "rmcp",
            Self::Plain => "plain",
        }
    }

    fn path(self, framing: Framing) -> &'static str {
        match (self, framing) {
            (Self::Rmcp, Framing::Unframed) => "/mcp",
            (Self::Rmcp, Framing::CompatStock) => "/mcp-all",
            (Self::Rmcp, _) => "/mcp-framed",
            (Self::Plain, _) => "/plain",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    server: Server,
    framing: Framing,
    size: usize,
    nodelay: bool,
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.server.name(),
            self.framing.name(),
            size_name(self.size),
            if self.nodelay { "nodelay" } else { "nagle" }
        )
    }
}

fn size_name(size: usize) -> String {
    if size >= 1024 * 1024 && size % (1024 * 1024) == 0 {
        format!("{}MiB", size / (1024 * 1024))
    } else {
        format!("{}KiB", size / 1024)
    }
}

fn parse_size(text: &str) -> usize {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let number: usize = number.parse().expect("a size such as 64KiB");
    number
        * match unit {
            "" | "B" => 1,
            "KiB" => 1024,
            "MiB" => 1024 * 1024,
            _ => panic!("unknown size unit {unit:?}"),
        }
}

// ---------------------------------------------------------------------------------------------
// The server process.

/// `size` bytes of prose (no character that JSON escapes).
fn text(size: usize) -> &'static str {
    static PROSE: OnceLock<String> = OnceLock::new();
    let prose = PROSE.get_or_init(|| {
        let line = "The quick brown fox jumps over the lazy dog; 0123456789 tokens stream by. ";
        let mut prose = line.repeat(4 * 1024 * 1024 / line.len() + 1);
        prose.truncate(4 * 1024 * 1024);
        prose
    });
    &prose[..size]
}

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct BlobArgs {
    /// Bytes of text to return.
    size: usize,
}

#[derive(Clone)]
struct Blob;

#[tool_router(server_handler)]
impl Blob {
    #[tool(description = "Returns a text of the requested size")]
    async fn blob(&self, Parameters(args): Parameters<BlobArgs>) -> String {
        text(args.size.min(4 * 1024 * 1024)).to_owned()
    }
}

fn rmcp_service() -> StreamableHttpService<Blob, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    StreamableHttpService::new(
        || Ok(Blob),
        std::sync::Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// The non-rmcp path: answers `tools/call` of `blob` itself, framed with `FramedBody` when the
/// request opted in.
async fn plain(headers: HeaderMap, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let size = request["params"]["arguments"]["size"]
        .as_u64()
        .map_or(0, |s| s.min(4 * 1024 * 1024) as usize);
    let response = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "content": [{"type": "text", "text": text(size)}], "isError": false}});
    let response = serde_json::to_vec(&response).expect("serializable");
    match OptIn::from_headers(&headers) {
        Ok(Some(opt_in)) => {
            let mapping = opt_in.mapping();
            let encoder = StreamEncoder::builder()
                .frame_size(FRAME_SIZE)
                .build(StreamHead::for_request(opt_in.request_key));
            let source = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(
                Outgoing::Message(Bytes::from(response)),
            )]);
            let mut answer =
                Response::new(Body::from_stream(FramedBody::new(source, encoder, mapping)));
            answer.headers_mut().extend(response_headers(mapping));
            answer
        }
        Ok(None) => ([(header::CONTENT_TYPE, "application/json")], response).into_response(),
        Err(err) => (StatusCode::BAD_REQUEST, err.to_string()).into_response(),
    }
}

fn app() -> Router {
    Router::new()
        .nest_service("/mcp", rmcp_service())
        .nest_service(
            "/mcp-framed",
            FramingLayer::new()
                .frame_size(FRAME_SIZE)
                .layer(rmcp_service()),
        )
        .nest_service(
            "/mcp-all",
            FramingLayer::new()
                .frame_size(FRAME_SIZE)
                .frame_all_responses(true)
                .layer(rmcp_service()),
        )
        .route("/plain", post(plain))
}

/// A server socket that counts the bytes written to it (HTTP head, chunked framing, body).
///
/// A write is counted before the system call and what it did not write is taken back after it:
/// counted after the call, the bytes of a response could still be missing from the count when the
/// client, woken by them (and possibly preempting the server's thread), already asks for it.
struct CountedIo {
    io: tokio::net::TcpStream,
    written: Arc<AtomicU64>,
}

impl CountedIo {
    fn write(
        &mut self,
        len: usize,
        write: impl FnOnce(Pin<&mut tokio::net::TcpStream>) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        self.written.fetch_add(len as u64, Ordering::SeqCst);
        let result = write(Pin::new(&mut self.io));
        let unwritten = match &result {
            Poll::Ready(Ok(n)) => len - n,
            _ => len,
        };
        self.written.fetch_sub(unwritten as u64, Ordering::SeqCst);
        result
    }
}

impl tokio::io::AsyncRead for CountedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for CountedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write(buf.len(), |io| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let len = bufs.iter().map(|buf| buf.len()).sum();
        self.write(len, |io| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A loopback listener whose sockets count what the server writes, with TCP_NODELAY set on every
/// accepted socket or not (`axum::serve` as is).
struct CountingListener {
    listener: tokio::net::TcpListener,
    nodelay: bool,
    written: Arc<AtomicU64>,
}

impl axum::serve::Listener for CountingListener {
    type Io = CountedIo;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (CountedIo, std::net::SocketAddr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        if self.nodelay {
            let _ = io.set_nodelay(true);
        }
        let written = self.written.clone();
        (CountedIo { io, written }, addr)
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

/// Serves on two loopback listeners (as is, and TCP_NODELAY) and prints their addresses; then
/// answers each `written` line on stdin with the bytes written to all sockets so far, and exits
/// when stdin closes (the bench process ended).
fn server_main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let as_is = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let nodelay = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        println!(
            "listening {} {}",
            as_is.local_addr().expect("addr"),
            nodelay.local_addr().expect("addr")
        );
        std::io::stdout().flush().expect("stdout");
        let written = Arc::new(AtomicU64::new(0));
        for (listener, nodelay) in [(as_is, false), (nodelay, true)] {
            let listener = CountingListener {
                listener,
                nodelay,
                written: written.clone(),
            };
            tokio::spawn(axum::serve(listener, app()).into_future());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                match line.as_deref() {
                    Ok("written") => {
                        println!("written {}", written.load(Ordering::SeqCst));
                        std::io::stdout().flush().expect("stdout");
                    }
                    Ok(other) => panic!("unknown command {other:?}"),
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        });
        let _ = rx.await;
    });
}

// ---------------------------------------------------------------------------------------------
// The client (this process).

struct ServerProcess {
    child: Child,
    /// Commands to the server process (closed: the server exits).
    stdin: Option<ChildStdin>,
    /// Its answers.
    stdout: std::io::BufReader<ChildStdout>,
    /// Base URLs: `axum::serve` as is, and with TCP_NODELAY.
    urls: [String; 2],
}

impl ServerProcess {
    fn start() -> Self {
        let exe = std::env::current_exe().expect("current exe");
        let wrapper = std::env::var("E2E_SERVER_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(words).arg(&exe);
                command
            }
            None => Command::new(&exe),
        };
        let mut child = command
            .env(SERVER_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server process");
        let mut line = String::new();
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        stdout.read_line(&mut line).expect("server address");
        let addrs: Vec<&str> = line
            .trim()
            .strip_prefix("listening ")
            .expect("listening line")
            .split(' ')
            .collect();
        Self {
            urls: [
                format!("http://{}", addrs[0]),
                format!("http://{}", addrs[1]),
            ],
            stdin: child.stdin.take(),
            stdout,
            child,
        }
    }

    /// The bytes the server wrote to its sockets so far.
    fn written(&mut self) -> u64 {
        let stdin = self.stdin.as_mut().expect("server stdin");
        stdin.write_all(b"written\n").expect("ask the server");
        stdin.flush().expect("ask the server");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("server answer");
        line.trim()
            .strip_prefix("written ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected server answer {line:?}"))
    }

    /// The server process's CPU time so far: the sum over its threads of the on-CPU time in
    /// `/proc/<pid>/task/<tid>/schedstat` (nanoseconds; the threads are a fixed tokio pool).
    fn cpu(&self) -> Duration {
        let tasks = format!("/proc/{}/task", self.child.id());
        let mut total = 0u64;
        for entry in std::fs::read_dir(&tasks).expect("server tasks") {
            let path = entry.expect("task").path().join("schedstat");
            if let Ok(text) = std::fs::read_to_string(path) {
                total += text
                    .split_whitespace()
                    .next()
                    .and_then(|ns| ns.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        Duration::from_nanos(total)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Closing stdin ends the server; wait so that a profiler wrapper writes its output.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A failed call: what went wrong.
#[derive(Debug)]
struct CallError(String);

impl<E: fmt::Display> From<E> for CallError {
    fn from(err: E) -> Self {
        Self(err.to_string())
    }
}

/// When a call's response was in hand, from the start of the call.
#[derive(Clone, Copy, Debug)]
struct Timing {
    /// The final response usable: unframed, its SSE event (or JSON body) complete, which is when
    /// a stock client hands it over; framed, the stream verified complete (sentinel and body
    /// end), which is when a framing client hands it over.
    response: Duration,
    /// The body ended.
    body_end: Duration,
    /// From the last body byte received before the response was in hand to the response in
    /// hand (issue 21): what the client still does after the transfer. A client that verifies
    /// frames as they arrive has only its digest comparison left; one that hashes after the
    /// transfer, the hashing of the whole message.
    tail: Duration,
    /// Bytes of the response body.
    body_bytes: usize,
}

/// One `tools/call` of `blob` (whose SSE response carries no notification, so its first data
/// event is the final response).
async fn call(
    client: &reqwest::Client,
    base: &str,
    config: Config,
    id: u64,
) -> Result<Timing, CallError> {
    let start = Instant::now();
    let key = RequestKey::random();
    let mut request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "blob", "arguments": {"size": config.size}}});
    let mut builder = client
        .post(format!("{base}{}", config.server.path(config.framing)))
        .header(header::CONTENT_TYPE, "application/json");
    let framed = match config.framing.mapping() {
        Some(mapping) => {
            mcp_framing::request::set_request_key(&mut request, key)?;
            builder = builder.headers(opt_in_headers_asking(key, mapping));
            true
        }
        None => {
            builder = builder.header(header::ACCEPT, "application/json, text/event-stream");
            false
        }
    };
    let response = builder.body(serde_json::to_vec(&request)?).send().await?;
    if response.status() != StatusCode::OK {
        let status = response.status();
        return Err(CallError(format!(
            "HTTP {status}: {}",
            response.text().await?
        )));
    }
    let headers = response.headers().clone();
    let declared = Mapping::from_response_headers(&headers);
    if declared != config.framing.declared() {
        return Err(CallError(format!(
            "the response declares the mapping {declared:?}, not {:?}",
            config.framing.declared()
        )));
    }
    let is_sse = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let body_bytes = Arc::new(AtomicUsize::new(0));
    let counter = body_bytes.clone();
    // When the last body bytes so far were received (ns since `start`).
    let last_byte = Arc::new(AtomicU64::new(0));
    let last_byte_at = last_byte.clone();
    let body = response.bytes_stream().inspect(move |chunk| {
        if let Ok(chunk) = chunk {
            if !chunk.is_empty() {
                let at = start.elapsed().as_nanos() as u64;
                last_byte_at.store(at, Ordering::Relaxed);
            }
            counter.fetch_add(chunk.len(), Ordering::Relaxed);
        }
    });
    // The time from the last byte received to `at`, when the response is in hand.
    let tail =
        |at: Duration| at.saturating_sub(Duration::from_nanos(last_byte.load(Ordering::Relaxed)));
    let (received, response, body_end, tail) = if framed {
        let decoder = StreamDecoder::builder().expect_request_key(key).build();
        let mut verified = VerifiedResponse::from_headers(body, &headers, decoder)?;
        let (mut last, mut verified_tail) = (0, Duration::ZERO);
        loop {
            match verified.next().await {
                Some(Ok(Delivery::Message(message))) => {
                    // The final response (`blob` sends no notification), verified.
                    verified_tail = tail(start.elapsed());
                    last = message.bytes().len();
                }
                Some(Ok(Delivery::Complete(_))) => {
                    let at = start.elapsed();
                    break (last, at, at, verified_tail);
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(CallError(err.to_string())),
                None => return Err(CallError("verified stream ended early".into())),
            }
        }
    } else if is_sse {
        // As the stock rmcp client reads it: `sse-stream` events, the message when its event ends
        // (the compatible mapping's records are comments, which it skips).
        let mut events = sse_stream::SseStream::from_bytes_stream(body);
        let mut message = None;
        while let Some(event) = events.next().await {
            let event = event?;
            if message.is_none() {
                if let Some(data) = event.data.filter(|d| !d.is_empty()) {
                    let at = start.elapsed();
                    message = Some((data.len(), at, tail(at)));
                }
            }
        }
        let (len, response, tail) = message.ok_or_else(|| CallError("no message event".into()))?;
        (len, response, start.elapsed(), tail)
    } else {
        // The JSON body in hand, in one buffer (as reqwest's `Response::bytes`).
        let mut body = std::pin::pin!(body);
        let mut json = Vec::new();
        while let Some(chunk) = body.next().await {
            json.extend_from_slice(&chunk?);
        }
        let at = start.elapsed();
        (json.len(), at, at, tail(at))
    };
    let timing = Timing {
        response,
        body_end,
        tail,
        body_bytes: body_bytes.load(Ordering::Relaxed),
    };
    if received < config.size {
        return Err(CallError(format!(
            "{received} bytes received for a {} byte result",
            config.size
        )));
    }
    Ok(timing)
}

#[derive(Default)]
struct Samples {
    wall: Vec<f64>,
    body_end: Vec<f64>,
    /// `Timing::tail`, ms.
    tail: Vec<f64>,
    server_cpu: Vec<f64>,
    client_cpu: Vec<f64>,
    /// Response body bytes, per call.
    body_bytes: Vec<f64>,
    /// Bytes the server wrote to the socket per call, one value per batch.
    wire_bytes: Vec<f64>,
    failure: Option<String>,
}

fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 0.5)
}

fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = p * (sorted.len() - 1) as f64;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    Some(sorted[low] + (sorted[high] - sorted[low]) * (at - low as f64))
}

struct Bench {
    server: ServerProcess,
    clients: [reqwest::Client; 2],
    next_id: u64,
}

impl Bench {
    fn base(&self, config: Config) -> &str {
        &self.server.urls[usize::from(config.nodelay)]
    }

    fn client(&self, config: Config) -> &reqwest::Client {
        &self.clients[usize::from(config.nodelay)]
    }

    /// Runs `calls` calls of `config` in sequence into `samples` (one CPU sample per batch).
    async fn batch(&mut self, config: Config, calls: usize, samples: &mut Samples) {
        if samples.failure.is_some() {
            return;
        }
        let written_before = self.server.written();
        let server_before = self.server.cpu();
        let client_before = cpu_time::ThreadTime::now();
        let mut walls = Vec::with_capacity(calls);
        for _ in 0..calls {
            self.next_id += 1;
            match call(self.client(config), self.base(config), config, self.next_id).await {
                Ok(timing) => walls.push(timing),
                Err(err) => {
                    eprintln!("{config}: {}", err.0);
                    samples.failure = Some(err.0);
                    return;
                }
            }
        }
        let client_cpu = client_before.elapsed();
        let server_cpu = self.server.cpu().saturating_sub(server_before);
        let written = self.server.written() - written_before;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        samples.wall.extend(walls.iter().map(|t| ms(t.response)));
        samples
            .body_end
            .extend(walls.iter().map(|t| ms(t.body_end)));
        samples.tail.extend(walls.iter().map(|t| ms(t.tail)));
        samples
            .body_bytes
            .extend(walls.iter().map(|t| t.body_bytes as f64));
        samples.wire_bytes.push(written as f64 / calls as f64);
        samples
            .server_cpu
            .push(server_cpu.as_secs_f64() * 1e6 / calls as f64);
        samples
            .client_cpu
            .push(client_cpu.as_secs_f64() * 1e6 / calls as f64);
    }

    /// `CONCURRENCY` tasks, each making `THROUGHPUT_CALLS_PER_TASK` calls in sequence: calls per
    /// second, server and client CPU per call (µs), bytes the server wrote per call.
    async fn throughput(&mut self, config: Config) -> Result<[f64; 4], CallError> {
        let base = self.base(config).to_owned();
        let client = self.client(config).clone();
        let first_id = self.next_id;
        self.next_id += (CONCURRENCY * THROUGHPUT_CALLS_PER_TASK) as u64;
        let written_before = self.server.written();
        let server_before = self.server.cpu();
        let client_before = cpu_time::ThreadTime::now();
        let start = Instant::now();
        let tasks = (0..CONCURRENCY).map(|task| {
            let (client, base) = (&client, &base);
            async move {
                for i in 0..THROUGHPUT_CALLS_PER_TASK {
                    let id = first_id + (task * THROUGHPUT_CALLS_PER_TASK + i) as u64;
                    call(client, base, config, id).await?;
                }
                Ok::<(), CallError>(())
            }
        });
        for result in futures::future::join_all(tasks).await {
            result?;
        }
        let elapsed = start.elapsed().as_secs_f64();
        let client_cpu = client_before.elapsed();
        let server_cpu = self.server.cpu().saturating_sub(server_before);
        let written = self.server.written() - written_before;
        let calls = (CONCURRENCY * THROUGHPUT_CALLS_PER_TASK) as f64;
        Ok([
            calls / elapsed,
            server_cpu.as_secs_f64() * 1e6 / calls,
            client_cpu.as_secs_f64() * 1e6 / calls,
            written as f64 / calls,
        ])
    }
}

struct Options {
    rounds: usize,
    batch: usize,
    tp_rounds: usize,
    sizes: Vec<usize>,
    tp_sizes: Vec<usize>,
    only: Option<String>,
    latency: bool,
    throughput: bool,
    floors: bool,
    out: String,
}

impl Options {
    fn from_args() -> Self {
        let mut options = Self {
            rounds: 20,
            batch: 5,
            tp_rounds: 5,
            sizes: SIZES.to_vec(),
            tp_sizes: THROUGHPUT_SIZES.to_vec(),
            only: None,
            latency: true,
            throughput: true,
            floors: true,
            out: "target/e2e/latest.json".to_owned(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
            match arg.as_str() {
                "--rounds" => options.rounds = value().parse().expect("--rounds N"),
                "--batch" => options.batch = value().parse().expect("--batch N"),
                "--tp-rounds" => options.tp_rounds = value().parse().expect("--tp-rounds N"),
                "--sizes" => options.sizes = value().split(',').map(parse_size).collect(),
                "--tp-sizes" => options.tp_sizes = value().split(',').map(parse_size).collect(),
                "--only" => options.only = Some(value()),
                "--out" => options.out = value(),
                "--no-latency" => options.latency = false,
                "--no-throughput" => options.throughput = false,
                "--no-floors" => options.floors = false,
                // What `cargo bench` passes.
                "--bench" => {}
                other => panic!("unknown option {other}"),
            }
        }
        options
    }

    fn selects(&self, config: Config) -> bool {
        self.only
            .as_deref()
            .is_none_or(|only| config.to_string().contains(only))
    }
}

fn configs(size: usize, nodelay: bool) -> Vec<Config> {
    Server::ALL
        .iter()
        .flat_map(|&server| {
            Framing::ALL
                .iter()
                .filter(move |f| f.applies_to(server))
                .map(move |&framing| Config {
                    server,
                    framing,
                    size,
                    nodelay,
                })
        })
        .collect()
}

fn entry(config: Config) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("server".into(), config.server.name().into());
    map.insert("framing".into(), config.framing.name().into());
    map.insert("size".into(), config.size.into());
    map.insert("nodelay".into(), config.nodelay.into());
    map
}

/// The physical cost of framing one result of `size` bytes, measured in this process (thread CPU
/// time, median of repetitions, µs): CRC-32 + SHA-256 (what each side pays at least), and the
/// base64 encoding and decoding of the SSE mapping (with `base64-simd`, what the crate uses).
fn floors(size: usize) -> serde_json::Map<String, Value> {
    use sha2::Digest as _;
    let payload = text(size).as_bytes();
    let b64 = base64_simd::STANDARD;
    let encoded = b64.encode_to_string(payload);
    let time = |f: &mut dyn FnMut()| {
        let reps = (4 * 1024 * 1024 / size).clamp(8, 512);
        let mut samples = Vec::with_capacity(15);
        for _ in 0..15 {
            let start = cpu_time::ThreadTime::now();
            for _ in 0..reps {
                f();
            }
            samples.push(start.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
        median(&samples).expect("samples")
    };
    let mut map = serde_json::Map::new();
    map.insert("size".into(), size.into());
    let crc_sha = time(&mut || {
        std::hint::black_box(crc32fast::hash(std::hint::black_box(payload)));
        std::hint::black_box(sha2::Sha256::digest(std::hint::black_box(payload)));
    });
    map.insert("crc32_sha256_us".into(), crc_sha.into());
    let encode = time(&mut || {
        std::hint::black_box(b64.encode_to_string(std::hint::black_box(payload)));
    });
    map.insert("base64_encode_us".into(), encode.into());
    let decode = time(&mut || {
        let decoded = b64.decode_to_vec(std::hint::black_box(&encoded));
        std::hint::black_box(decoded.expect("valid base64"));
    });
    map.insert("base64_decode_us".into(), decode.into());
    map
}

/// The 1-minute load average (`/proc/loadavg`): how busy the shared machine was.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

async fn client_main(options: Options) {
    let client = || {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("reqwest client")
    };
    let mut bench = Bench {
        server: ServerProcess::start(),
        clients: [client(), client()],
        next_id: 0,
    };
    let load_before = load_average();
    let mut latency = Vec::new();
    if options.latency {
        for &size in &options.sizes {
            for nodelay in [false, true] {
                let block: Vec<Config> = configs(size, nodelay)
                    .into_iter()
                    .filter(|&c| options.selects(c))
                    .collect();
                if block.is_empty() {
                    continue;
                }
                let mut samples: Vec<Samples> = block.iter().map(|_| Samples::default()).collect();
                // Warm-up: connections, allocator, rmcp's tool router.
                for (&config, s) in block.iter().zip(&mut samples) {
                    bench.batch(config, 3, s).await;
                    let failure = s.failure.take();
                    *s = Samples {
                        failure,
                        ..Samples::default()
                    };
                }
                for _ in 0..options.rounds {
                    for (&config, s) in block.iter().zip(&mut samples) {
                        bench.batch(config, options.batch, s).await;
                    }
                }
                for (&config, s) in block.iter().zip(&samples) {
                    let (median_ms, p10, p90) = (
                        median(&s.wall),
                        percentile(&s.wall, 0.1),
                        percentile(&s.wall, 0.9),
                    );
                    // Calls that waited for a delayed ACK (Nagle's algorithm): 40 ms or more here.
                    let stalled = s
                        .wall
                        .iter()
                        .filter(|&&ms| ms >= 30.0 && ms > 10.0 * p10.unwrap_or(0.0))
                        .count();
                    let (server_cpu, client_cpu) = (median(&s.server_cpu), median(&s.client_cpu));
                    println!(
                        "{config:<44} {:>8.3} ms (p10 {:.3}, p90 {:.3}, {stalled} stalled)  tail {:>6.0} µs  server cpu {:>7.1} µs  client cpu {:>7.1} µs  {:>8.0} B body {:>8.0} B written{}",
                        median_ms.unwrap_or(f64::NAN),
                        p10.unwrap_or(f64::NAN),
                        p90.unwrap_or(f64::NAN),
                        median(&s.tail).map_or(f64::NAN, |ms| ms * 1e3),
                        server_cpu.unwrap_or(f64::NAN),
                        client_cpu.unwrap_or(f64::NAN),
                        median(&s.body_bytes).unwrap_or(f64::NAN),
                        median(&s.wire_bytes).unwrap_or(f64::NAN),
                        s.failure
                            .as_deref()
                            .map_or(String::new(), |f| format!("  FAILED: {f}")),
                    );
                    let mut map = entry(config);
                    map.insert("calls".into(), s.wall.len().into());
                    map.insert("median_ms".into(), median_ms.into());
                    map.insert("p10_ms".into(), p10.into());
                    map.insert("p90_ms".into(), p90.into());
                    map.insert("body_end_median_ms".into(), median(&s.body_end).into());
                    map.insert("tail_median_ms".into(), median(&s.tail).into());
                    map.insert("tail_p90_ms".into(), percentile(&s.tail, 0.9).into());
                    map.insert("stalled_calls".into(), stalled.into());
                    map.insert("server_cpu_us".into(), server_cpu.into());
                    map.insert("client_cpu_us".into(), client_cpu.into());
                    map.insert("body_bytes".into(), median(&s.body_bytes).into());
                    map.insert("wire_bytes".into(), median(&s.wire_bytes).into());
                    map.insert("failure".into(), s.failure.clone().into());
                    latency.push(Value::Object(map));
                }
            }
        }
    }
    let mut throughput = Vec::new();
    if options.throughput {
        let block: Vec<Config> = options
            .tp_sizes
            .iter()
            .flat_map(|&size| [false, true].map(|nodelay| configs(size, nodelay)))
            .flatten()
            .filter(|&c| options.selects(c))
            .collect();
        // Per configuration: calls/s, server and client CPU per call, bytes written per call, one
        // value per round.
        let mut rates: Vec<([Vec<f64>; 4], Option<String>)> =
            block.iter().map(|_| (Default::default(), None)).collect();
        // One warm-up round (opens the 32 connections of each client).
        for round in 0..=options.tp_rounds {
            for (&config, (values, failure)) in block.iter().zip(&mut rates) {
                if failure.is_some() {
                    continue;
                }
                match bench.throughput(config).await {
                    Ok(measured) if round > 0 => {
                        for (v, m) in values.iter_mut().zip(measured) {
                            v.push(m);
                        }
                    }
                    Ok(_) => {}
                    Err(err) => {
                        eprintln!("{config} x{CONCURRENCY}: {}", err.0);
                        *failure = Some(err.0);
                    }
                }
            }
        }
        for (&config, (values, failure)) in block.iter().zip(&rates) {
            let [rate, server_cpu, client_cpu, written] = values.each_ref().map(|v| median(v));
            println!(
                "{config:<44} x{CONCURRENCY}: {:>7.0} calls/s  server cpu {:>7.1} µs/call  client cpu {:>7.1} µs/call{}",
                rate.unwrap_or(f64::NAN),
                server_cpu.unwrap_or(f64::NAN),
                client_cpu.unwrap_or(f64::NAN),
                failure
                    .as_deref()
                    .map_or(String::new(), |f| format!("  FAILED: {f}")),
            );
            let mut map = entry(config);
            map.insert("concurrency".into(), CONCURRENCY.into());
            map.insert("rounds".into(), values[0].len().into());
            map.insert("calls_per_s".into(), rate.into());
            map.insert("server_cpu_us".into(), server_cpu.into());
            map.insert("client_cpu_us".into(), client_cpu.into());
            map.insert("wire_bytes".into(), written.into());
            map.insert("failure".into(), failure.clone().into());
            throughput.push(Value::Object(map));
        }
    }
    let floors: Vec<Value> = options
        .sizes
        .iter()
        .filter(|_| options.floors)
        .map(|&size| Value::Object(floors(size)))
        .collect();
    let results = json!({
        "load_average": [load_before, load_average()],
        "frame_size": FRAME_SIZE,
        "floors": floors,
        "rounds": options.rounds,
        "batch": options.batch,
        "throughput_calls_per_round": CONCURRENCY * THROUGHPUT_CALLS_PER_TASK,
        "latency": latency,
        "throughput": throughput,
    });
    let out = std::path::Path::new(&options.out);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).expect("output directory");
    }
    std::fs::write(out, serde_json::to_string_pretty(&results).expect("json")).expect("write");
    println!("wrote {}", out.display());
}

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        server_main();
        return;
    }
    let options = Options::from_args();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(client_main(options));
}
