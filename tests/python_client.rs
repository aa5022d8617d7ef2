//! The official Python SDK's stock `ClientSession` with the Python package's wrapper
//! (`mcp_framing.framing_http_client`, python/), against real servers: the rmcp example server
//! (`examples/rmcp_server.rs`) behind `FramingLayer` through a proxy that ends `tools/call`
//! bodies normally at many offsets (`tests/rmcp_support/cut.rs`), and the fleet example (two
//! backend processes sharing one real Redis, `examples/fleet.rs`) with keyed retries on.
//!
//! The SDK and the package run from what `scripts/stock-clients` installs (the pinned SDK and
//! the package's wheel in `target/stock-clients/venv`; `bash scripts/test` runs it first); the
//! tests fail, not skip, when it is missing. The client is `tests/python_client/driver.py`.

#[path = "rmcp_support/cut.rs"]
mod cut;
#[path = "dedupe_support/mod.rs"]
mod dedupe_support;
#[path = "example_support/mod.rs"]
mod example_support;
#[path = "stock_support/mod.rs"]
mod stock_support;

use std::process::Command;
use std::sync::Arc;

use cut::Cut;
use dedupe_support::RedisServer;
use example_support::{executions, fleet_backend, repo, rmcp_server, runtime};
use serde_json::Value;
use stock_support::{cut_fails_within, python, python_driver as driver};

// ---------------------------------------------------------------------------------------------
// The servers, and a proxy in front of each (`tests/rmcp_support/cut.rs`).

/// A proxy in front of `upstream` that cuts what `cut` says; its URL.
fn proxy(upstream: &str, cut: Arc<Cut>) -> String {
    cut::serve_proxy(runtime(), upstream, cut)
}

fn report(call: &Value) -> &Value {
    &call["report"]
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_wrapped_python_sdk_fails_an_unframed_handshake_as_not_framed_before_any_tool_call() {
    // rmcp alone ignores the opt-in: its initialize response arrives unframed, which fails at
    // once as NotFramed, as the Rust client fails it (SPEC.md §11.3, §16).
    let server = rmcp_server("plain", false);
    let cut = Cut::new();
    cut.cut_method("tools/call", []);
    let url = proxy(&server.url, cut.clone());
    let run = driver(&["calls", &url, "--calls", "1"]);
    let refused = &run.calls[0];
    assert_eq!(refused["call"], "initialize", "{refused}");
    assert_eq!(refused["outcome"], "error");
    let data = report(refused);
    assert_eq!(data["classification"], "contract_violation", "{data}");
    assert_eq!(data["kind"], "NotFramed");
    assert_eq!(data["retryDecision"], "do_not_retry");
    assert!(
        data["detail"].as_str().unwrap().contains("not framed"),
        "{data}"
    );
    assert!(
        cut.forwarded.lock().unwrap().is_empty(),
        "no tool call was sent"
    );
}

/// The offsets a `tools/call` body of `len` bytes is cut at: the first bytes, every 1/24th, the
/// last bytes.
fn cut_offsets(len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..24).map(|i| i * len / 24).collect();
    cuts.extend([1, 19, 20, 21, len - 2, len - 1]);
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

#[test]
fn the_wrapped_python_sdk_gets_results_byte_for_byte_and_every_cut_call_fails_within_a_second() {
    for mode in ["opt-in", "compat"] {
        for json in [false, true] {
            let label = format!("mode {mode}, {}", if json { "json" } else { "sse" });
            let server = rmcp_server(mode, json);
            let cut = Cut::new();
            cut.cut_method("tools/call", []);
            let url = proxy(&server.url, cut.clone());
            // Clean calls: the exact text, and the length of a framed tool-call response.
            let clean = driver(&["calls", &url, "--calls", "2"]);
            for call in &clean.calls {
                assert_eq!(call["outcome"], "ok", "{label}: {call}");
                assert_eq!(call["match"], true, "{label}: byte for byte");
            }
            let within = cut_fails_within(clean.calls.iter().filter_map(|c| c["seconds"].as_f64()));
            let lengths = cut.forwarded.lock().unwrap().clone();
            assert_eq!(lengths.len(), 2, "{label}");
            assert_eq!(lengths[0], lengths[1], "{label}: the same body length");
            let cuts = cut_offsets(lengths[0]);
            cut.forwarded.lock().unwrap().clear();
            cut.cut_method("tools/call", cuts.iter().copied());
            let calls = cuts.len().to_string();
            let run = driver(&["calls", &url, "--calls", &calls]);
            assert_eq!(*cut.forwarded.lock().unwrap(), cuts, "{label}: the cuts");
            for (call, at) in run.calls.iter().zip(&cuts) {
                let label = format!("{label}, cut at {at} of {}", lengths[0]);
                assert_eq!(call["outcome"], "error", "{label}: {call}");
                let message = call["error"].as_str().unwrap();
                assert!(
                    message.starts_with("mcp-framing: response abandoned: truncated"),
                    "{label}: {message}"
                );
                let data = report(call);
                assert_eq!(data["classification"], "abandoned", "{label}: {data}");
                assert_eq!(data["kind"], "Truncated", "{label}");
                assert_eq!(data["retryDecision"], "surface_to_caller", "{label}");
                assert_eq!(data["retryReason"], "not_deduplicated", "{label}");
                let seconds = call["seconds"].as_f64().unwrap();
                assert!(
                    seconds < within,
                    "{label}: failed after {seconds} s (bound {within} s)"
                );
            }
            // Only messages verified at their MESSAGE_END reached the SDK (in the compatible
            // mapping a message verifies only after its record's STREAM_END, so every verified
            // message of a cut response was handed over: the counts are equal).
            let stats = &run.stats;
            assert_eq!(
                stats["verified_messages"], stats["messages_verified_by_attempts"],
                "{label}: {stats}"
            );
            let slowest = run
                .calls
                .iter()
                .filter_map(|c| c["seconds"].as_f64())
                .fold(0.0, f64::max);
            eprintln!(
                "{label}: {} cut calls, the slowest failed after {slowest} s",
                cuts.len()
            );
            assert_eq!(stats["errors"], cuts.len(), "{label}: {stats}");
            let warnings = run
                .logs
                .iter()
                .filter(|l| l.contains("did not complete cleanly"))
                .count();
            assert_eq!(warnings, cuts.len(), "{label}: one warning per cut");
        }
    }
}

#[test]
fn the_wrapped_python_sdk_with_keyed_retries_runs_each_tool_call_once_on_a_fleet() {
    const CALLS: usize = 22;
    let redis = RedisServer::start();
    let a = fleet_backend(&redis.url(), "backend-a", true);
    let b = fleet_backend(&redis.url(), "backend-b", false);
    let endpoints = format!("{},{}", a.url, b.url);
    let run = driver(&["fleet", &endpoints, "--calls", &CALLS.to_string()]);
    assert_eq!(run.calls.len(), CALLS);
    for (i, call) in run.calls.iter().enumerate() {
        assert_eq!(call["outcome"], "ok", "call {i}: {call}");
        let amount = 100 + i;
        assert!(
            call["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!("charged {amount} to acct-{i}")),
            "call {i}: {call}"
        );
    }
    let executions = executions(&a) + executions(&b);
    assert_eq!(executions, CALLS as u64, "one execution per logical call");
    // backend-a cuts every tool call's first response: at least 20 calls were cut and retried.
    let retries = run.stats["retries"].as_u64().unwrap();
    assert!(retries >= 20, "{}", run.stats);
    let cut_logged = run
        .logs
        .iter()
        .filter(|l| l.contains("outcome=abandoned"))
        .count();
    assert_eq!(cut_logged as u64, retries, "every cut attempt logged");
}

#[test]
fn the_python_readme_example_runs_as_written() {
    let readme =
        std::fs::read_to_string(repo().join("python/README.md")).expect("python/README.md");
    let start = readme
        .find("```python\n")
        .expect("a python code block in python/README.md")
        + "```python\n".len();
    let end = start + readme[start..].find("```").expect("the block's end");
    let server = rmcp_server("compat", false);
    let code = readme[start..end].replace("http://127.0.0.1:8931/mcp", &server.url);
    let out = Command::new(python())
        .args(["-c", &code])
        .output()
        .expect("run the README example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("000000 readme"), "{stdout}");
}
