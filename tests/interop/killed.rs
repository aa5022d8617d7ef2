//! Every fixture server killed (SIGKILL) in the middle of a tool call behind the sidecar, never
//! a clean result, reported at once: once the response has begun, the framing client reports
//! the call aborted (the sidecar's ABORT for an upstream that failed) or abandoned; before any
//! byte of it reached the sidecar, the sidecar answers 502 with a JSON-RPC error naming the
//! upstream's failure.

use std::sync::Arc;
use std::thread;
use std::time::Instant;

use mcp_framing::rmcp_http::FramingHttpClient;

use crate::servers::{Counter, FixtureServer, Sdk};
use crate::sidecar_support::Proxy;
use crate::{call_tool, slow, wait_for_execution};

/// The tool's sleep: far longer than the test waits for anything.
const SLOW_MS: u64 = 60_000;

#[test]
fn a_server_killed_in_the_middle_of_a_tool_call_gives_aborted_or_abandoned_never_clean() {
    let which: Vec<(Sdk, bool)> = Sdk::ALL
        .iter()
        .flat_map(|&sdk| [(sdk, false), (sdk, true)])
        .collect();
    let servers = thread::scope(|scope| {
        which
            .iter()
            .map(|&one| {
                scope.spawn(move || {
                    let counter = Counter::new();
                    FixtureServer::start(one.0, one.1, &counter)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|s| s.join().unwrap())
            .collect::<Vec<_>>()
    });
    thread::scope(|scope| {
        for mut server in servers {
            scope.spawn(move || {
                let label = server.label();
                let sidecar = Proxy::start(&server.url, &[]);
                let url = sidecar.url("/mcp");
                let counter: Arc<Counter> = server.counter.clone();
                let key = "killed";
                let call = thread::spawn(move || {
                    let client = FramingHttpClient::new(reqwest::Client::new());
                    call_tool(client, &url, slow(key, SLOW_MS))
                });
                wait_for_execution(&counter, "slow-start", key, &label);
                let killed = Instant::now();
                server.kill();
                let (result, warnings) = call.join().unwrap();
                let seconds = killed.elapsed().as_secs_f64();
                let Err((message, outcome)) = result else {
                    panic!("{label}: a call whose server was killed handed out {result:?}");
                };
                assert_eq!(counter.executions("slow", key), 0, "{label}");
                assert!(seconds < 5.0, "{label}: reported after {seconds} s");
                let classification = outcome["classification"].as_str().unwrap_or_default();
                if message.contains("HTTP 502") {
                    // Nothing had reached the sidecar (Node.js sends a response's head with its
                    // first byte, JSON servers theirs with the result): it answers 502, its
                    // JSON-RPC error naming the upstream's failure.
                    assert!(
                        message.contains("upstream_protocol_error"),
                        "{label}: {message}"
                    );
                    eprintln!("{label}: killed before its response began: 502 after {seconds:.3} s");
                } else {
                    // The response had begun: the framed stream ends in the sidecar's ABORT
                    // (upstream failure), or is cut.
                    assert!(
                        matches!(classification, "aborted" | "abandoned"),
                        "{label}: {message}: {outcome}"
                    );
                    assert!(
                        warnings
                            .iter()
                            .any(|w| w.contains(&format!("outcome=\"{classification}\""))),
                        "{label}: {warnings:?}"
                    );
                    eprintln!(
                        "{label}: killed mid-response: {classification} ({}) after {seconds:.3} s: {message}",
                        outcome["kind"].as_str().unwrap_or_default()
                    );
                }
                drop(sidecar);
            });
        }
    });
}
