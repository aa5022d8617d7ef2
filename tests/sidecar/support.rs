//! What the sidecar's tests share: decoding a body as a framing client does, the `mcp-frame
//! proxy` process, and scripted upstreams that write whatever bytes a test needs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use mcp_framing::mapping::Mapping;
use mcp_framing::{BodyDecoder, BodyError, Event, StreamDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a framing client makes of a body: the verified messages (as text), and how it ended.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) messages: Vec<String>,
    pub(crate) end: Result<(), BodyError>,
}

/// Decodes a whole `body` in `mapping`.
pub(crate) fn decode(mapping: Mapping, body: &[u8]) -> Decoded {
    let mut decoder = BodyDecoder::new(mapping, StreamDecoder::new());
    decoder.feed(body);
    decoder.finish();
    let mut messages = Vec::new();
    let end = loop {
        match decoder.next_event() {
            Ok(Some(Event::Message(message))) => {
                messages.push(String::from_utf8(message.bytes().to_vec()).expect("UTF-8"));
            }
            Ok(Some(_)) => {}
            Ok(None) => break Ok(()),
            Err(err) => break Err(err),
        }
    };
    Decoded { messages, end }
}

/// `body` without the compatible mapping's record lines (`:mcp-framing ...` up to its LF, at the
/// start of a line): what a stock SSE client reads.
pub(crate) fn without_records(body: &[u8]) -> Vec<u8> {
    const RECORD: &[u8] = b":mcp-framing ";
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    while at < body.len() {
        let line_start = at == 0 || matches!(body[at - 1], b'\n' | b'\r');
        if line_start && body[at..].starts_with(RECORD) {
            let end = body[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(body.len(), |lf| at + lf + 1);
            at = end;
            continue;
        }
        out.push(body[at]);
        at += 1;
    }
    out
}

/// An `mcp-frame proxy` process, killed when dropped.
pub(crate) struct Proxy {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its log lines so far (stderr).
    pub(crate) log: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Starts `mcp-frame proxy --upstream UPSTREAM --listen 127.0.0.1:0 ARGS...` and waits for
    /// its `listening on` line.
    pub(crate) fn start(upstream: &str, args: &[&str]) -> Self {
        let mut all = vec!["--upstream", upstream];
        all.extend_from_slice(args);
        Self::spawn(&all, &[("MCP_FRAME_LISTEN", "127.0.0.1:0")])
    }

    /// Starts `mcp-frame proxy ARGS...` with the environment variables `env` and waits for its
    /// `listening on` line.
    pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-frame"))
            .arg("proxy")
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcp-frame runs");
        let stderr = child.stderr.take().expect("piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line.clone());
                if let Some(at) = line.find("listening on http://") {
                    let rest = &line[at + "listening on http://".len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || ".:[]".contains(c)))
                        .unwrap_or(rest.len());
                    let addr = &rest[..end];
                    let _ = tx.send(addr.parse::<SocketAddr>().ok());
                }
            }
            let _ = tx.send(None);
        });
        // Generous: the first start may wait for a loaded machine; the event ends the wait.
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("the proxy did not start: {:?}", log.lock().unwrap()));
        Self { child, addr, log }
    }

    /// `http://ADDR/PATH`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM and waits for the exit status (at most `bound`).
    pub(crate) fn terminate(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let deadline = std::time::Instant::now() + bound;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The log lines once one holds `needle` (waited for, at most 30 s: the line is on its way
    /// through a pipe).
    pub(crate) fn log_with(&self, needle: &str) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let lines = self.log.lock().unwrap().clone();
            if lines.iter().any(|line| line.contains(needle)) {
                return lines;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {needle:?} in {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a scripted upstream does on a connection, step by step.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Writes these bytes.
    Write(Bytes),
    /// Closes the connection.
    Close,
    /// Keeps the connection open and writes nothing more, until the peer goes.
    Hang,
    /// Writes nothing for this long, then goes on.
    Pause(Duration),
}

/// A request a scripted upstream received: its head and body, and the connection it came on
/// (numbered in the order they were accepted, from 0).
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) head: String,
    pub(crate) body: Bytes,
    pub(crate) connection: usize,
}

/// An upstream on loopback that answers each request with the steps `script` gives for it.
/// Returns its address and the requests it received.
pub(crate) async fn scripted_upstream<F>(script: F) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>)
where
    F: Fn(&Seen) -> Vec<Step> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let script = Arc::new(script);
    tokio::spawn(async move {
        for connection in 0.. {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let script = script.clone();
            let log = log.clone();
            tokio::spawn(async move {
                loop {
                    let Some(request) = read_request(&mut stream, connection).await else {
                        return;
                    };
                    log.lock().unwrap().push(request.clone());
                    for step in script(&request) {
                        match step {
                            Step::Write(bytes) => {
                                if stream.write_all(&bytes).await.is_err() {
                                    return;
                                }
                                let _ = stream.flush().await;
                            }
                            Step::Close => return,
                            Step::Pause(pause) => tokio::time::sleep(pause).await,
                            Step::Hang => {
                                let mut sink = [0u8; 1024];
                                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// Reads one HTTP/1.1 request (a `Content-Length` body or chunked) on connection number
/// `connection`.
async fn read_request(stream: &mut tokio::net::TcpStream, connection: usize) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let lower = head.to_ascii_lowercase();
    let length = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let mut body = buf[head_end..].to_vec();
    if let Some(length) = length {
        while body.len() < length {
            let n = stream.read(&mut byte).await.ok()?;
            if n == 0 {
                return None;
            }
            body.extend_from_slice(&byte[..n]);
        }
    } else if lower.contains("transfer-encoding: chunked") {
        while !body.ends_with(b"0\r\n\r\n") {
            let n = stream.read(&mut byte).await.ok()?;
            if n == 0 {
                return None;
            }
            body.extend_from_slice(&byte[..n]);
        }
        body = dechunk(&body);
    }
    Some(Seen {
        head,
        body: Bytes::from(body),
        connection,
    })
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap_or("0").trim(), 16)
                .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = &body[eol + 2 + size + 2..];
    }
}

/// An HTTP/1.1 response head with `content_type` and a chunked body.
pub(crate) fn chunked_head(content_type: &str) -> Bytes {
    Bytes::from(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n"
    ))
}

/// One chunk of a chunked body.
pub(crate) fn chunk(data: &[u8]) -> Bytes {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    Bytes::from(out)
}

/// The end of a chunked body.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The JSON-RPC id of a request body.
pub(crate) fn request_id(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(serde_json::Value::Null)
}

/// A `tools/call` request body with `id`.
pub(crate) fn tools_call(id: u64, name: &str, arguments: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string()
}

/// A reqwest client for raw requests (no pooling surprises: one connection a request).
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// POSTs `tools/call` (id `id`, tool `t`) to the proxy's `/mcp` with `headers`, as an MCP
/// client does (it takes JSON or an event stream).
pub(crate) async fn post_call(
    proxy: &Proxy,
    headers: reqwest::header::HeaderMap,
    id: u64,
) -> reqwest::Response {
    http()
        .post(proxy.url("/mcp"))
        .headers(headers)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(tools_call(id, "t", serde_json::json!({})))
        .send()
        .await
        .expect("the proxy answers")
}
