//! Every fixture server killed (SIGKILL) in the middle of a tool call behind the sidecar while
//! every framing client waits on it (Rust's `FramingHttpClient`, the Python package's wrapper,
//! the TypeScript package's `framingFetch` in both SDK lines, each with a call of its own): never
//! a clean result, each reported at once. Once the response has begun, the attempt is aborted
//! (the sidecar's ABORT for an upstream that failed) or abandoned; before any byte of it reached
//! the sidecar, the sidecar answers 502 with a JSON-RPC error naming the upstream's failure.
//!
//! The clients send one attempt: a keyed retry would find the killed call's claim in flight
//! until its lease expires (SPEC.md §17.5: nothing is recorded of a call that ended without its
//! final response), and be answered "in progress" (retryable) after the wait of §17.8.

use std::sync::Arc;
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_framing::rmcp_http::FramingHttpClient;
use serde_json::Value;

use crate::servers::{Counter, FixtureServer, Sdk};
use crate::sidecar_support::Proxy;
use crate::stock_support::{FleetDriver, cut_fails_within};
use crate::{assert_aborted_or_abandoned, call_tool, kill_during_call, slow, wait_for_execution};

/// The tool's sleep: far longer than the test waits for anything.
const SLOW_MS: u64 = 60_000;

/// The keys of a driver's calls: `PREFIX-0` (a `count`), `PREFIX-1` (the `slow` call killed).
fn key_prefix(driver: FleetDriver) -> String {
    match driver {
        FleetDriver::Python => "killed-python".to_owned(),
        FleetDriver::TypeScript(sdk) => format!("killed-ts-{sdk}"),
    }
}

/// Checks what a Python or TypeScript framing client reported of its two calls on a server
/// killed at `killed_at` (seconds since the epoch) during the second one.
fn check_driver(
    driver: FleetDriver,
    calls: &[Value],
    counter: &Counter,
    killed_at: f64,
    label: &str,
) {
    let label = format!("{} on {label}", driver.name());
    let prefix = key_prefix(driver);
    let [count, slow] = calls else {
        panic!("{label}: two calls: {calls:?}");
    };
    assert_eq!(count["ok"], true, "{label}: {count}");
    assert_eq!(count["text"], format!("count {prefix}-0 1"), "{label}");
    // Never clean: the call fails, and no attempt of it ended clean.
    assert_eq!(slow["ok"], false, "{label}: handed out {slow}");
    let attempts: Vec<&str> = slow["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("{label}: {slow}"))
        .iter()
        .map(|a| a.as_str().unwrap_or_default())
        .collect();
    let error = slow["error"].as_str().unwrap_or_default();
    if error.contains("upstream_protocol_error") {
        // Killed before its response began: the sidecar's 502 (whose JSON-RPC error names the
        // cause), which the Python wrapper and `framingFetch` report as an abandoned attempt
        // (`HttpStatus`, its body's text in the report).
        assert!(
            attempts == ["abandoned"] || attempts.is_empty(),
            "{label}: {slow}"
        );
    } else {
        // The response had begun: the sidecar's ABORT (upstream failed), or a cut.
        assert!(
            matches!(attempts[..], ["aborted" | "abandoned"]),
            "{label}: the killed attempt: {slow}"
        );
    }
    // At once: no later than an uncut call takes ([`cut_fails_within`]) after the kill.
    let within = cut_fails_within([count["seconds"].as_f64().unwrap()]);
    let after = slow["ended"].as_f64().unwrap() - killed_at;
    assert!(
        after < within,
        "{label}: reported {after:.3} s after the kill (bound {within} s): {slow}"
    );
    assert_eq!(
        counter.executions("slow", &format!("{prefix}-1")),
        0,
        "{label}"
    );
    eprintln!(
        "{label}: killed mid-call: {attempts:?} reported {after:.3} s after the kill: {}",
        slow["error"]
    );
}

#[test]
fn a_server_killed_in_the_middle_of_a_tool_call_gives_every_framing_client_aborted_or_abandoned_never_clean()
 {
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
                let call = {
                    let url = url.clone();
                    thread::spawn(move || {
                        let client = FramingHttpClient::new(reqwest::Client::new());
                        call_tool(client, &url, slow(key, SLOW_MS))
                    })
                };
                // The Python and TypeScript clients: a `count` (how long a call takes here, now),
                // then the `slow` call, one attempt each, with the contract of the `initialize`
                // result.
                let drivers: Vec<_> = FleetDriver::ALL
                    .into_iter()
                    .map(|driver| {
                        let url = url.clone();
                        let run = thread::spawn(move || {
                            let (prefix, ms) = (key_prefix(driver), SLOW_MS.to_string());
                            let args = [
                                "--calls",
                                "2",
                                "--tool",
                                "count,slow",
                                "--ms",
                                &ms,
                                "--key-prefix",
                                &prefix,
                                "--handshake",
                                "initialize",
                                "--attempts",
                                "1",
                            ];
                            driver.fleet(&url, &args)
                        });
                        (driver, run)
                    })
                    .collect();
                wait_for_execution(&counter, "slow-start", key, &label);
                for (driver, _) in &drivers {
                    let slow_key = format!("{}-1", key_prefix(*driver));
                    wait_for_execution(&counter, "slow-start", &slow_key, &label);
                }
                let killed_at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64();
                let (message, outcome, warnings, seconds) =
                    kill_during_call(&mut server, call, &label);
                assert_eq!(counter.executions("slow", key), 0, "{label}");
                assert!(seconds < 5.0, "{label}: reported after {seconds} s");
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
                    let classification =
                        assert_aborted_or_abandoned(&label, &message, &outcome, &warnings);
                    eprintln!(
                        "{label}: killed mid-response: {classification} ({}) after {seconds:.3} s: {message}",
                        outcome["kind"].as_str().unwrap_or_default()
                    );
                }
                for (driver, run) in drivers {
                    check_driver(driver, &run.join().unwrap(), &counter, killed_at, &label);
                }
                drop(sidecar);
            });
        }
    });
}
