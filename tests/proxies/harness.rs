//! The proxies of `tests/proxies.rs` as processes: each one's configuration rendered from the
//! templates beside this file into a directory of its own, started in the foreground on free
//! loopback ports, stopped on drop; the dying backend (`backend.py`); and a raw HTTP/1.1 client
//! that records what a proxy sends downstream (status, framing, bytes, how the body ended).

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The read timeout every configuration sets (seconds), instead of the proxies' defaults (nginx
/// 60 s, HAProxy 50 s in Debian's configuration, Caddy none, Apache 300 s, Traffic Server 30 s):
/// the slow-backend case then takes seconds. It is the one change made to a default
/// configuration.
pub(crate) const READ_TIMEOUT_SECONDS: u64 = 3;

/// The proxies, as Debian bookworm packages them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Nginx,
    Haproxy,
    Caddy,
    Apache,
    TrafficServer,
}

impl Kind {
    pub(crate) const ALL: [Self; 5] = [
        Self::Nginx,
        Self::Haproxy,
        Self::Caddy,
        Self::Apache,
        Self::TrafficServer,
    ];

    /// The directory of its templates under `tests/proxies/`.
    pub(crate) fn dir(self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Haproxy => "haproxy",
            Self::Caddy => "caddy",
            Self::Apache => "apache",
            Self::TrafficServer => "trafficserver",
        }
    }

    /// Its name and the version Debian bookworm carries.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Nginx => "nginx 1.22",
            Self::Haproxy => "HAProxy 2.6",
            Self::Caddy => "Caddy 2.6",
            Self::Apache => "Apache 2.4 mod_proxy",
            Self::TrafficServer => "Traffic Server 9.2",
        }
    }
}

/// Which configuration: the proxy's defaults, or what its documentation recommends for SSE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The package's configuration and the proxy's defaults (`default.route`).
    Default,
    /// Buffering off, `X-Accel-Buffering: no` honoured, compression on where offered
    /// (`sse.route`).
    Sse,
}

impl Variant {
    pub(crate) const ALL: [Self; 2] = [Self::Default, Self::Sse];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Sse => "sse",
        }
    }
}

fn templates() -> PathBuf {
    crate::support::example_support::repo().join("tests/proxies")
}

fn template(kind: Kind, file: &str) -> String {
    let path = templates().join(kind.dir()).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A loopback port for a proxy to listen on: below the kernel's ephemeral range (32768 and up
/// on Linux), so that no `bind(0)` of another test or program takes it between this check and
/// the proxy's own bind, each port handed out once per run, and free when handed out.
pub(crate) fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    // A start that differs between runs (and between concurrent test processes).
    let base = 20_000 + u16::try_from(std::process::id() % 1_000).unwrap() * 12;
    for _ in 0..12_000 {
        let port = 20_000 + (base - 20_000 + NEXT.fetch_add(1, Ordering::SeqCst)) % 12_000;
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in 20000..32000");
}

/// `kill -TERM pid`, then SIGKILL if it is still there after `grace`.
fn stop(child: &mut Child, grace: Duration) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let start = Instant::now();
    while start.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits until every port accepts a connection, or panics with the process's log.
fn wait_for(child: &mut Child, ports: &[u16], log: &Path, what: &str) {
    let start = Instant::now();
    for port in ports {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, *port));
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            let log = || std::fs::read_to_string(log).unwrap_or_default();
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{what} exited ({status}) before listening on {port}:\n{}",
                    log()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what} is not listening on {port} after 60 s:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One proxy process: routes from its listening ports to upstream ports.
pub(crate) struct Proxy {
    pub(crate) kind: Kind,
    pub(crate) variant: Variant,
    /// The listening port of each route, in the order of the upstreams given.
    pub(crate) ports: Vec<u16>,
    child: Child,
    dir: PathBuf,
}

impl Proxy {
    /// Renders the configuration for `upstreams` (one route each) and starts the proxy.
    pub(crate) fn start(kind: Kind, variant: Variant, upstreams: &[u16]) -> Self {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcp-framing-proxies-{}-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::SeqCst),
            kind.dir()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the proxy's directory");
        let ports: Vec<u16> = upstreams.iter().map(|_| free_port()).collect();
        let dir_text = dir.to_str().expect("a UTF-8 path").to_owned();
        let fill = |text: &str| {
            text.replace("@DIR@", &dir_text)
                .replace("@TIMEOUT@", &READ_TIMEOUT_SECONDS.to_string())
                .replace(
                    "@PORTS@",
                    &ports
                        .iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(" "),
                )
        };
        let route_file = match kind {
            Kind::TrafficServer => "route".to_owned(),
            _ => format!("{}.route", variant.name()),
        };
        let route = template(kind, &route_file);
        let routes: String = ports
            .iter()
            .zip(upstreams)
            .map(|(listen, upstream)| {
                fill(&route)
                    .replace("@LISTEN@", &listen.to_string())
                    .replace("@UPSTREAM@", &upstream.to_string())
                    + "\n"
            })
            .collect();
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        };
        let log = dir.join("proxy.log");
        let mut command = match kind {
            Kind::Nginx | Kind::Haproxy | Kind::Caddy | Kind::Apache => {
                write(
                    "proxy.conf",
                    fill(&template(kind, "main.conf")).replace("@ROUTES@", &routes),
                );
                let conf = dir.join("proxy.conf");
                match kind {
                    Kind::Nginx => {
                        for temp in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                            let path = dir.join(temp);
                            std::fs::create_dir_all(&path).unwrap();
                            // The workers run as www-data (as Debian's nginx.conf says).
                            chown(&path, "www-data");
                        }
                        let mut command = Command::new("nginx");
                        command.arg("-p").arg(&dir).arg("-c").arg(&conf);
                        command
                    }
                    Kind::Haproxy => {
                        let mut command = Command::new("haproxy");
                        command.arg("-db").arg("-f").arg(&conf);
                        command
                    }
                    Kind::Caddy => {
                        let mut command = Command::new("caddy");
                        command
                            .args(["run", "--adapter", "caddyfile", "--config"])
                            .arg(&conf)
                            .env("HOME", &dir)
                            .env("XDG_DATA_HOME", &dir)
                            .env("XDG_CONFIG_HOME", &dir);
                        command
                    }
                    _ => {
                        let mut command = Command::new("apache2");
                        command.arg("-f").arg(&conf).arg("-DFOREGROUND");
                        command
                    }
                }
            }
            Kind::TrafficServer => {
                let variant_records = template(kind, &format!("{}.records", variant.name()));
                write(
                    "etc/records.config",
                    fill(&template(kind, "records.config")).replace("@VARIANT@", &variant_records),
                );
                write(
                    "etc/plugin.config",
                    fill(&template(kind, &format!("{}.plugins", variant.name()))),
                );
                write("etc/compress.config", template(kind, "compress.config"));
                write("etc/remap.config", routes);
                write("etc/storage.config", format!("{dir_text}/cache 64M\n"));
                write("runroot.yaml", fill(&template(kind, "runroot.yaml")));
                // The package's own files for everything this test does not change.
                for file in [
                    "cache.config",
                    "hosting.config",
                    "ip_allow.yaml",
                    "logging.yaml",
                    "parent.config",
                    "sni.yaml",
                    "socks.config",
                    "splitdns.config",
                    "ssl_multicert.config",
                    "strategies.yaml",
                    "volume.config",
                ] {
                    let from = Path::new("/etc/trafficserver").join(file);
                    std::fs::copy(&from, dir.join("etc").join(file))
                        .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
                }
                let copied = Command::new("cp")
                    .arg("-r")
                    .arg("/etc/trafficserver/body_factory")
                    .arg(dir.join("etc"))
                    .status()
                    .expect("cp");
                assert!(copied.success(), "copy Traffic Server's body_factory");
                for sub in ["log", "run", "cache"] {
                    std::fs::create_dir_all(dir.join(sub)).unwrap();
                }
                // traffic_server refuses to run as root; it switches to the package's user.
                chown(&dir, "trafficserver");
                let mut command = Command::new("traffic_server");
                command.arg(format!("--run-root={dir_text}/runroot.yaml"));
                command
            }
        };
        let out = std::fs::File::create(&log).expect("the proxy's log");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "start {} (bash scripts/proxies installs it): {err}",
                    kind.label()
                )
            });
        wait_for(&mut child, &ports, &log, kind.label());
        Self {
            kind,
            variant,
            ports,
            child,
            dir,
        }
    }

    /// `http://127.0.0.1:PORT{path}` of route `route`.
    pub(crate) fn url(&self, route: usize, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.ports[route])
    }

    /// Everything the proxy logged so far (its output, and the log files of its directory).
    pub(crate) fn logs(&self) -> String {
        let mut logs = String::new();
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if entry.path().extension().is_some_and(|e| e == "log") {
                logs.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        logs
    }

    /// "nginx 1.22 (default)".
    pub(crate) fn label(&self) -> String {
        format!("{} ({})", self.kind.label(), self.variant.name())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        stop(&mut self.child, Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn chown(path: &Path, user: &str) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(user)
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success(), "chown -R {user} {}", path.display());
}

// ---------------------------------------------------------------------------------------------
// The dying backend.

/// `backend.py` in front of an MCP server: see its docs for the ways it dies.
pub(crate) struct Backend {
    pub(crate) port: u16,
    /// One JSON line per `tools/call` it served.
    pub(crate) records: Arc<Mutex<Vec<Value>>>,
    child: Child,
}

impl Backend {
    pub(crate) fn start(upstream: &str, stall_seconds: f64) -> Self {
        let mut child = Command::new("python3")
            .arg(templates().join("backend.py"))
            .args([
                "--upstream",
                upstream,
                "--stall",
                &stall_seconds.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3 tests/proxies/backend.py");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a first line").expect("stdout");
        let port = first
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("backend.py said {first:?}"));
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = records.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let record = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("backend.py printed {line:?}: {e}"));
                sink.lock().unwrap().push(record);
            }
        });
        Self {
            port,
            records,
            child,
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        stop(&mut self.child, Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------------
// What a proxy sends downstream.

/// How a response body ended, as a raw HTTP/1.1 client sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// A normal HTTP ending: the last chunk, the Content-Length reached, or the connection
    /// closed at the end of a close-delimited body.
    Clean,
    /// The connection closed (FIN) inside a chunked or Content-Length body.
    Cut,
    /// The connection was reset.
    Reset,
    /// Nothing more came for 15 s.
    Stalled,
}

/// What a proxy sent downstream for one request.
#[derive(Clone, Debug)]
pub(crate) struct Downstream {
    pub(crate) status: u16,
    /// `chunked`, `length N` or `close-delimited`; `no head` when no head arrived.
    pub(crate) framing: String,
    /// Body bytes received (after de-chunking).
    pub(crate) bytes: usize,
    pub(crate) end: End,
}

impl Downstream {
    /// "200 chunked, 60000 B, clean end".
    pub(crate) fn describe(&self) -> String {
        if self.framing == "no head" {
            return format!("no response ({:?})", self.end).to_lowercase();
        }
        let end = match self.end {
            End::Clean => "clean end",
            End::Cut => "closed mid-body",
            End::Reset => "reset",
            End::Stalled => "stalled",
        };
        format!("{} {}, {} B, {end}", self.status, self.framing, self.bytes)
    }
}

/// POSTs `body` (JSON) to `http://127.0.0.1:port{path}` as a stock client would (no opt-in, no
/// compression) and records what comes back.
pub(crate) async fn observe(port: u16, path: &str, body: &str) -> Downstream {
    observe_with(port, path, body, &[]).await
}

/// [`observe`] with more request headers (`name: value`): a framing client's opt-in, its
/// `Accept-Encoding`. The body is counted as it comes (compressed, if it is).
pub(crate) async fn observe_with(
    port: u16,
    path: &str,
    body: &str,
    headers: &[(String, String)],
) -> Downstream {
    let mut stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .expect("connect to the proxy");
    let accept = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("accept"))
        .map_or("application/json, text/event-stream", |(_, value)| value);
    let mut extra = String::new();
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("accept") {
            extra.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\n{extra}\
         Content-Type: application/json\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut reader = Reader {
        stream,
        buffer: Vec::new(),
    };
    let no_head = |end| Downstream {
        status: 0,
        framing: "no head".to_owned(),
        bytes: 0,
        end,
    };
    let head = match reader.until(b"\r\n\r\n").await {
        Ok(head) => String::from_utf8_lossy(&head).into_owned(),
        Err(end) => return no_head(end),
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_ascii_lowercase())
        })
    };
    let (framing, result) = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        ("chunked".to_owned(), reader.chunked().await)
    } else if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        (format!("length {length}"), reader.exactly(length).await)
    } else {
        ("close-delimited".to_owned(), reader.until_closed().await)
    };
    let (bytes, end) = result;
    Downstream {
        status,
        framing,
        bytes,
        end,
    }
}

struct Reader {
    stream: tokio::net::TcpStream,
    buffer: Vec<u8>,
}

impl Reader {
    /// Reads more into the buffer: Ok(false) at a clean EOF.
    async fn fill(&mut self) -> Result<bool, End> {
        let mut chunk = [0u8; 16384];
        match tokio::time::timeout(Duration::from_secs(15), self.stream.read(&mut chunk)).await {
            Err(_) => Err(End::Stalled),
            Ok(Err(_)) => Err(End::Reset),
            Ok(Ok(0)) => Ok(false),
            Ok(Ok(n)) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
        }
    }

    /// The bytes up to and including `marker`; Err at EOF (as `End::Cut`) or a failure.
    async fn until(&mut self, marker: &[u8]) -> Result<Vec<u8>, End> {
        loop {
            if let Some(at) = self
                .buffer
                .windows(marker.len())
                .position(|window| window == marker)
            {
                return Ok(self.buffer.drain(..at + marker.len()).collect());
            }
            if !self.fill().await? {
                return Err(End::Cut);
            }
        }
    }

    async fn exactly(&mut self, length: usize) -> (usize, End) {
        while self.buffer.len() < length {
            match self.fill().await {
                Ok(true) => {}
                Ok(false) => return (self.buffer.len(), End::Cut),
                Err(end) => return (self.buffer.len(), end),
            }
        }
        (length, End::Clean)
    }

    async fn until_closed(&mut self) -> (usize, End) {
        loop {
            match self.fill().await {
                Ok(true) => {}
                Ok(false) => return (self.buffer.len(), End::Clean),
                Err(end) => return (self.buffer.len(), end),
            }
        }
    }

    async fn chunked(&mut self) -> (usize, End) {
        let mut bytes = 0;
        loop {
            let line = match self.until(b"\r\n").await {
                Ok(line) => line,
                Err(end) => return (bytes + self.buffer.len(), end),
            };
            let size = std::str::from_utf8(&line)
                .ok()
                .and_then(|l| usize::from_str_radix(l.trim().split(';').next()?, 16).ok());
            let Some(size) = size else {
                return (bytes, End::Cut);
            };
            if size == 0 {
                return (bytes, End::Clean);
            }
            while self.buffer.len() < size + 2 {
                match self.fill().await {
                    Ok(true) => {}
                    Ok(false) => return (bytes + self.buffer.len().min(size), End::Cut),
                    Err(end) => return (bytes + self.buffer.len().min(size), end),
                }
            }
            self.buffer.drain(..size + 2);
            bytes += size;
        }
    }
}
