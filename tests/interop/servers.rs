//! The fixture MCP servers of `tests/servers/` (real servers from the official SDKs that no one
//! here wrote, pinned and installed by `scripts/stock-clients`), started as processes on free
//! loopback ports: [`Sdk`] names them, [`FixtureServer::start_all`] starts several at once and
//! waits until each one printed its ready line, and [`Counter`] reads the executions they record.
//!
//! Every fixture server has the same four tools (`tests/servers/tools.py`, `tools.mjs`):
//! `generate_text` (the rule of `examples/rmcp_server.rs`), `count`, `slow` and `notify`; every
//! execution that completes appends `TOOL KEY` to the counter file the server was given, so two
//! server processes can share one file. A server exits when the test process does (its standard
//! input is a pipe the test holds: `--exit-with-stdin`), and is killed on drop.
//!
//! Includers also declare `tests/example_support` as `example_support` and `tests/stock_support`
//! as `stock_support` (where the repository and the installed interpreters are found).
#![allow(dead_code)] // each includer uses a part of it

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::example_support::repo;
use crate::stock_support::installed;

/// How long a fixture server may take to print its ready line: Python imports its SDK first,
/// which takes seconds on a loaded machine.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// A fixture server: which SDK serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sdk {
    /// The official Python SDK (`mcp` 2.3.0): `MCPServer.streamable_http_app`, stateless, under
    /// uvicorn (`tests/servers/sdk_python.py`).
    Python,
    /// FastMCP 4.1 (`fastmcp`): `FastMCP.http_app`, stateless, under uvicorn
    /// (`tests/servers/fastmcp_app.py`).
    FastMcp,
    /// The TypeScript SDK's v1 line (`@modelcontextprotocol/sdk` 1.32.2):
    /// `StreamableHTTPServerTransport`, stateless, with an event store (priming events, event
    /// ids) (`tests/servers/sdk_v1.mjs`).
    TypeScriptV1,
    /// The TypeScript SDK's v2 line (`@modelcontextprotocol/server` 2.4.0): `createMcpHandler`
    /// on Node.js through `toNodeHandler` (`tests/servers/sdk_v2.mjs`).
    TypeScriptV2,
}

impl Sdk {
    /// Every fixture server.
    pub(crate) const ALL: [Sdk; 4] = [
        Sdk::Python,
        Sdk::FastMcp,
        Sdk::TypeScriptV1,
        Sdk::TypeScriptV2,
    ];

    /// What the reports call it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Sdk::Python => "python mcp 2.3.0",
            Sdk::FastMcp => "fastmcp 4.1.7",
            Sdk::TypeScriptV1 => "typescript sdk 1.32.2",
            Sdk::TypeScriptV2 => "typescript server 2.4.0",
        }
    }

    /// The interpreter and the script that start it.
    fn command(self) -> (PathBuf, &'static str) {
        match self {
            Sdk::Python | Sdk::FastMcp => {
                let python = installed(
                    "target/stock-clients/venv/bin/python",
                    "the pinned Python SDK and FastMCP",
                );
                let script = if self == Sdk::Python {
                    "sdk_python.py"
                } else {
                    "fastmcp_app.py"
                };
                (python, script)
            }
            Sdk::TypeScriptV1 | Sdk::TypeScriptV2 => {
                installed(
                    "tests/servers/node_modules/@modelcontextprotocol/sdk",
                    "the pinned TypeScript SDK",
                );
                installed(
                    "tests/servers/node_modules/@modelcontextprotocol/node",
                    "the pinned TypeScript SDK's v2 server and its Node.js adapter",
                );
                installed(
                    "tests/servers/node_modules/mcp-framing/dist/server.js",
                    "the TypeScript package (typescript/, built), which frames them with --framing",
                );
                let script = if self == Sdk::TypeScriptV1 {
                    "sdk_v1.mjs"
                } else {
                    "sdk_v2.mjs"
                };
                (PathBuf::from("node"), script)
            }
        }
    }
}

/// How a fixture server frames its own responses, in-process (`--framing`): the Python servers
/// wrapped in the Python package's `FramingMiddleware`, the Node.js ones in the TypeScript
/// package's `framingHandler`, each as its package's README writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Framing {
    /// Every POST framed in the compatible mapping, opted in or not (`--frame-all compat`).
    pub(crate) frame_all: bool,
    /// Keyed tool calls deduplicated on this Redis (`--redis URL`: the package's `RedisStore`).
    pub(crate) redis: Option<String>,
}

impl Framing {
    /// What the server's command line says.
    fn args(&self) -> Vec<String> {
        let mut args = vec!["--framing".to_owned()];
        if self.frame_all {
            args.extend(["--frame-all".to_owned(), "compat".to_owned()]);
        }
        if let Some(redis) = &self.redis {
            args.extend(["--redis".to_owned(), redis.clone()]);
        }
        args
    }
}

impl Sdk {
    /// What frames this SDK's server in-process ([`Framing`]).
    pub(crate) fn framed_by(self) -> &'static str {
        match self {
            Sdk::Python | Sdk::FastMcp => "FramingMiddleware",
            Sdk::TypeScriptV1 | Sdk::TypeScriptV2 => "framingHandler",
        }
    }
}

/// The counter file the fixture servers record their executions in (`TOOL KEY` lines), in the
/// test's scratch directory; several servers may share one.
#[derive(Debug)]
pub(crate) struct Counter {
    path: PathBuf,
}

impl Counter {
    /// An empty counter file of its own.
    pub(crate) fn new() -> Arc<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "interop-{}-{}.counter",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, b"").expect("create the counter file");
        Arc::new(Self { path })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Completed executions of `tool` with `key` recorded so far.
    pub(crate) fn executions(&self, tool: &str, key: &str) -> usize {
        let line = format!("{tool} {key}");
        std::fs::read_to_string(&self.path)
            .expect("read the counter file")
            .lines()
            .filter(|l| *l == line)
            .count()
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A running fixture server, killed on drop.
pub(crate) struct FixtureServer {
    /// Which SDK serves it.
    pub(crate) sdk: Sdk,
    /// Whether it answers every request with `application/json` (`--json`).
    pub(crate) json: bool,
    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// Where it records its executions.
    pub(crate) counter: Arc<Counter>,
    /// How it frames its own responses (`None`: it does not).
    pub(crate) framing: Option<Framing>,
    child: Child,
    /// Held open: the server exits when it closes (`--exit-with-stdin`).
    _stdin: ChildStdin,
    /// What the server wrote to stdout after its ready line, and to stderr.
    output: Arc<Mutex<String>>,
}

impl std::fmt::Debug for FixtureServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}) at {}", self.sdk.name(), self.kind(), self.url)
    }
}

/// Appends everything `pipe` says to `output`, on a thread of its own.
fn drain(pipe: impl Read + Send + 'static, output: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let mut output = output.lock().unwrap();
            output.push_str(&line);
            output.push('\n');
        }
    });
}

impl FixtureServer {
    /// Starts the server of `sdk` (`json`: every response `application/json`) on a free loopback
    /// port, recording into `counter`, and waits for its ready line.
    pub(crate) fn start(sdk: Sdk, json: bool, counter: &Arc<Counter>) -> Self {
        Self::start_all(&[(sdk, json)], counter).remove(0)
    }

    /// Starts every `(sdk, json)` server at once, all recording into `counter`, and waits until
    /// each one is ready (they start in parallel: Python's imports take seconds).
    pub(crate) fn start_all(which: &[(Sdk, bool)], counter: &Arc<Counter>) -> Vec<Self> {
        let which: Vec<_> = which.iter().map(|&(sdk, json)| (sdk, json, None)).collect();
        Self::start_framed(&which, counter)
    }

    /// As [`FixtureServer::start_all`], each `(sdk, json, framing)` server framing its own
    /// responses as `framing` says ([`Framing`]; `None`: not).
    pub(crate) fn start_framed(
        which: &[(Sdk, bool, Option<Framing>)],
        counter: &Arc<Counter>,
    ) -> Vec<Self> {
        let started: Vec<(Sdk, bool, Option<Framing>, Child)> = which
            .iter()
            .map(|(sdk, json, framing)| {
                let (sdk, json) = (*sdk, *json);
                let (program, script) = sdk.command();
                let mut command = Command::new(&program);
                command
                    .arg(repo().join("tests/servers").join(script))
                    .args(["--port", "0", "--exit-with-stdin", "--counter-file"])
                    .arg(counter.path());
                if json {
                    command.arg("--json");
                }
                if let Some(framing) = framing {
                    command.args(framing.args());
                }
                let child = command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|err| panic!("start {}: {err}", program.display()));
                (sdk, json, framing.clone(), child)
            })
            .collect();
        let start = Instant::now();
        started
            .into_iter()
            .map(|(sdk, json, framing, mut child)| {
                let output = Arc::new(Mutex::new(String::new()));
                drain(child.stderr.take().expect("stderr"), output.clone());
                let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
                // The ready line, read on a thread so that a server that hangs before printing it
                // fails the test after READY_WITHIN instead of blocking it.
                let (send, receive) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let mut line = String::new();
                    let _ = stdout.read_line(&mut line);
                    let _ = send.send((line, stdout));
                });
                let wait = READY_WITHIN.saturating_sub(start.elapsed());
                let Ok((line, stdout)) = receive.recv_timeout(wait) else {
                    let _ = child.kill();
                    panic!(
                        "{} printed no ready line within {READY_WITHIN:?}; stderr:\n{}",
                        sdk.name(),
                        output.lock().unwrap()
                    );
                };
                let Some(url) = line
                    .strip_prefix("listening on ")
                    .map(|url| url.trim().to_owned())
                else {
                    let _ = child.kill();
                    let _ = child.wait();
                    std::thread::sleep(Duration::from_millis(100));
                    panic!(
                        "{}: no ready line but {line:?}; stderr:\n{}",
                        sdk.name(),
                        output.lock().unwrap()
                    );
                };
                drain(stdout, output.clone());
                let stdin = child.stdin.take().expect("stdin");
                Self {
                    sdk,
                    json,
                    url,
                    counter: counter.clone(),
                    framing,
                    child,
                    _stdin: stdin,
                    output,
                }
            })
            .collect()
    }

    /// `sse` or `json`: how it answers.
    pub(crate) fn kind(&self) -> &'static str {
        if self.json { "json" } else { "sse" }
    }

    /// A label for assertion messages.
    pub(crate) fn label(&self) -> String {
        match &self.framing {
            None => format!("{} ({})", self.sdk.name(), self.kind()),
            Some(framing) => format!(
                "{} ({}) in {}{}{}",
                self.sdk.name(),
                self.kind(),
                self.sdk.framed_by(),
                if framing.frame_all {
                    ", frame-all compat"
                } else {
                    ""
                },
                if framing.redis.is_some() {
                    ", Redis"
                } else {
                    ""
                }
            ),
        }
    }

    /// Kills the server process now (SIGKILL) and waits for it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Panics if the server exited, with what it wrote.
    pub(crate) fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("wait for the server");
        assert!(
            status.is_none(),
            "{} exited ({status:?}); it wrote:\n{}",
            self.label(),
            self.output()
        );
    }

    /// What the server wrote to stderr, and to stdout after its ready line.
    pub(crate) fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.kill();
    }
}
