//! Shared by the tests that run the repository's examples as real server processes
//! (`tests/stock_clients.rs`, `tests/python_client.rs`, `tests/proxies.rs`): the examples built
//! with the features of the test binary, a running example killed on drop, and the two examples
//! those tests start ([`rmcp_server`] in a server mode, a [`fleet_backend`]).
#![allow(dead_code, unreachable_pub)] // each test binary uses part of it

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

/// A runtime for the in-process proxies and HTTP calls of a test (two worker threads).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the proxies")
    })
}

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo build --example NAME` with the features and profile this test was built with (a no-op
/// after `cargo test`, which builds the examples), and the binary's path.
pub fn example_binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(Mutex::default);
    let mut built = built.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, path)) = built.iter().find(|(n, _)| n == name) {
        return path.clone();
    }
    let features: Vec<&str> = [
        ("codec", cfg!(feature = "codec")),
        ("sse", cfg!(feature = "sse")),
        ("http", cfg!(feature = "http")),
        ("rmcp", cfg!(feature = "rmcp")),
        ("demo", cfg!(feature = "demo")),
        ("cli", cfg!(feature = "cli")),
        ("dedupe", cfg!(feature = "dedupe")),
        ("redis", cfg!(feature = "redis")),
        ("client", cfg!(feature = "client")),
        ("internals", cfg!(feature = "internals")),
        ("rustls", cfg!(feature = "rustls")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(repo())
        .args(["build", "--quiet", "--example", name])
        .args(["--message-format", "json", "--no-default-features"])
        .args(["--features", &features.join(",")]);
    if !cfg!(debug_assertions) {
        cargo.arg("--release");
    }
    let output = cargo.stderr(Stdio::inherit()).output().expect("run cargo");
    assert!(output.status.success(), "cargo build --example {name}");
    let path = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reported the {name} executable"));
    built.push((name.to_owned(), path.clone()));
    path
}

/// A running example whose first line on stdout names its URL (`... http://ADDR/mcp ...`),
/// killed on drop.
pub struct Example {
    child: Child,
    /// The URL the example printed.
    pub url: String,
}

impl Example {
    /// Starts example `name` with `args` and waits for its first line.
    pub fn start(name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(example_binary(name))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("start the {name} example: {err}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the example's first line");
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in the {name} example's first line {line:?}"))
            .to_owned();
        Self { child, url }
    }

    /// Panics if the example exited: a test whose every request failed through a dead server
    /// must not pass for a proxy's doing.
    pub fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("wait for the example");
        assert!(status.is_none(), "the example exited: {status:?}");
    }

    /// `GET` of `path` beside the example's endpoint (`.../mcp` -> `.../stats`), as JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let url = self.url.replace("/mcp", path);
        runtime().block_on(async {
            reqwest::get(&url)
                .await
                .unwrap_or_else(|err| panic!("GET {url}: {err}"))
                .json()
                .await
                .unwrap_or_else(|err| panic!("GET {url}: not JSON: {err}"))
        })
    }
}

/// The rmcp example server (`examples/rmcp_server.rs`) in server mode `mode` (`plain`, `opt-in`,
/// `compat`), answering with `application/json` when `json`, on a free loopback port. It stops by
/// itself after an hour: longer than any test takes, the proxies' full matrix included.
pub fn rmcp_server(mode: &str, json: bool) -> Example {
    let mut args = vec!["--addr", "127.0.0.1:0", "--mode", mode, "--seconds", "3600"];
    if json {
        args.push("--json");
    }
    Example::start("rmcp_server", &args)
}

/// A `fleet backend` process (`examples/fleet.rs`) named `name` over the Redis at `redis`; with
/// `cut`, it cuts every tool call's first response (after the tool ran).
pub fn fleet_backend(redis: &str, name: &str, cut: bool) -> Example {
    let mut args = vec!["backend", "--redis", redis, "--name", name];
    if cut {
        args.push("--cut");
    }
    Example::start("fleet", &args)
}

/// The tool executions of a fleet backend so far (its `/stats`).
pub fn executions(backend: &Example) -> u64 {
    backend.get_json("/stats")["executions"]
        .as_u64()
        .expect("executions in /stats")
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
