//! A slow tool whose client went away: the sidecar runs the upstream call to its end anyway,
//! records the result, and the keyed retry, sent only once the tool has finished, gets it
//! replayed: one execution. Every framing client does it at once on every server, each with a
//! call of its own through a cutting proxy of its own (Rust's `FramingHttpClient`, the Python
//! package's wrapper, the TypeScript package's `framingFetch` in both SDK lines, the retry from
//! the same client). Without the sidecar, what happens depends on the SDK (checked too):
//! the Python SDK and FastMCP cancel the tool when its client disconnects, the TypeScript SDKs'
//! stateless transports (a 2025-11-25 request) let it run to its end, unrecorded.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use mcp_framing::client::{DiscoveringResolver, RetrySchedule};
use mcp_framing::contract::{Deduplication, DiscoverySource, FramingContract};
use mcp_framing::rmcp_http::FramingHttpClient;
use serde_json::{Value, json};

use crate::cut::{self, Cut};
use crate::example_support::runtime;
use crate::fleet::handshake;
use crate::servers::{Counter, Sdk};
use crate::sidecar_support::Proxy;
use crate::stock_support::FleetDriver;
use crate::{call_tool, raw_post, shared_servers, slow, wait_for_execution};

/// How long the tool sleeps.
const SLOW_MS: u64 = 1_500;

/// A front (`cut::serve_front`) in front of `endpoint` for a `DiscoveringResolver`: it answers
/// every `server/discover` with the contract the sidecar declares (deduplication of
/// `tools/call`); once the tool call's first response was cut (`forwarded`, the cutting proxy's
/// record), only after `counter` shows the tool's completion (so that the retry finds the result
/// recorded, not still running). Its URL.
fn retry_after_completion(
    endpoint: &str,
    forwarded: Arc<Mutex<Vec<usize>>>,
    counter: Arc<Counter>,
    key: &str,
    label: &str,
) -> String {
    let mut discovery = json!({"supportedVersions": ["2026-07-28"], "capabilities": {}});
    FramingContract::v1()
        .with_deduplication(Deduplication::new(Duration::from_secs(600)))
        .declare_in(&mut discovery, DiscoverySource::Discover)
        .unwrap();
    let (key, label) = (key.to_owned(), label.to_owned());
    let on_discover: cut::OnDiscover = Arc::new(move || {
        let retry = !forwarded.lock().unwrap().is_empty();
        let (counter, key, label) = (counter.clone(), key.clone(), label.clone());
        Box::pin(async move {
            if retry {
                tokio::task::spawn_blocking(move || {
                    wait_for_execution(&counter, "slow", &key, &label)
                })
                .await
                .unwrap();
            }
        })
    });
    let endpoint = endpoint.to_owned();
    cut::serve_front(runtime(), discovery, on_discover, move |_| endpoint.clone())
}

/// A raw `tools/call slow {key, ms}` to `url` (the 2025-11-25 revision, as the stock clients
/// send it), its response read to the end, or (`leave`) dropped once the tool has started.
async fn raw_slow(url: &str, key: &str, ms: u64, leave: Option<(Arc<Counter>, &str)>) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"key": key, "ms": ms},
            "_meta": {"progressToken": 1}}});
    let mut response = raw_post(url, &body).await;
    match leave {
        Some((counter, label)) => {
            let (key, label) = (key.to_owned(), label.to_owned());
            tokio::task::spawn_blocking(move || {
                wait_for_execution(&counter, "slow-start", &key, &label)
            })
            .await
            .unwrap();
            drop(response);
        }
        None => while response.chunk().await.expect("a whole body").is_some() {},
    }
}

/// A cutting proxy in front of `sidecar` that ends the first `tools/call` response before its
/// first byte (the client went away), then forwards the others whole: its URL and record.
fn cut_first_call(sidecar: &Proxy) -> (String, Arc<Cut>) {
    let cut = Cut::new();
    cut.cut_method("tools/call", [0]);
    let url = cut::serve_proxy(runtime(), &sidecar.url("/mcp"), cut.clone());
    (url, cut)
}

/// Checks that the keyed `slow` call `key` cut by `cut` was retried once and answered with the
/// recorded result of its one execution.
fn check_replayed(cut: &Cut, counter: &Counter, key: &str, label: &str) {
    let forwarded = cut.forwarded.lock().unwrap().clone();
    assert_eq!(forwarded.len(), 2, "{label}: the cut call and its retry");
    assert_eq!(
        forwarded[0], 0,
        "{label}: the first one cut before its first byte"
    );
    assert_eq!(
        counter.executions("slow-start", key),
        1,
        "{label}: started once"
    );
    assert_eq!(
        counter.executions("slow", key),
        1,
        "{label}: completed once"
    );
}

/// The Python or TypeScript framing client's keyed `slow` call through `url` (cut before its
/// first byte), its retry sent once the counter records the tool's completion.
fn driver_slow_call(driver: FleetDriver, sdk: Sdk, url: &str, counter: &Counter) -> Value {
    let prefix = match driver {
        FleetDriver::Python => format!("slow-python-{sdk:?}"),
        FleetDriver::TypeScript(line) => format!("slow-ts-{line}-{sdk:?}"),
    };
    let ms = SLOW_MS.to_string();
    let counter_file = counter.path().to_str().expect("a UTF-8 path");
    let mut calls = driver.fleet(
        url,
        &[
            "--calls",
            "1",
            "--tool",
            "slow",
            "--ms",
            &ms,
            "--key-prefix",
            &prefix,
            "--handshake",
            handshake(sdk),
            "--retry-after",
            counter_file,
        ],
    );
    assert_eq!(calls.len(), 1, "{}: {calls:?}", driver.name());
    let mut call = calls.remove(0);
    call["key"] = Value::String(format!("{prefix}-0"));
    call
}

/// What each official SDK does with a tool whose client went away, without the sidecar (a
/// 2025-11-25 request, stateless): whether the tool still completes. The Python SDK (and
/// FastMCP over it) cancels the handler; the TypeScript SDKs' stateless transports let it run.
fn completes_without_the_sidecar(sdk: Sdk) -> bool {
    matches!(sdk, Sdk::TypeScriptV1 | Sdk::TypeScriptV2)
}

#[test]
fn a_slow_tool_whose_client_went_away_is_completed_recorded_and_replayed_on_every_server() {
    // The shared servers that answer in SSE (the tool's progress notification begins the
    // response while it runs); every key of this test is its own.
    let (counter, servers) = shared_servers();
    thread::scope(|scope| {
        for server in servers.iter().filter(|server| !server.json) {
            let counter = counter.clone();
            scope.spawn(move || {
                let label = server.label();
                // Without the sidecar: the client goes away once the tool has started; a second
                // call of the same length, started after it, ends after it would have.
                let direct = format!("direct-{:?}", server.sdk);
                let after = format!("after-{:?}", server.sdk);
                runtime().block_on(async {
                    raw_slow(
                        &server.url,
                        &direct,
                        SLOW_MS,
                        Some((counter.clone(), &label)),
                    )
                    .await;
                    raw_slow(&server.url, &after, SLOW_MS, None).await;
                });
                assert_eq!(counter.executions("slow", &after), 1, "{label}");
                assert_eq!(
                    counter.executions("slow", &direct) == 1,
                    completes_without_the_sidecar(server.sdk),
                    "{label}: a tool whose client went away, without the sidecar"
                );
                let sidecar = Proxy::start(&server.url, &[]);
                // The Python and TypeScript clients, each through a cutting proxy of its own.
                let drivers: Vec<_> = FleetDriver::ALL
                    .into_iter()
                    .map(|driver| {
                        let (url, cut) = cut_first_call(&sidecar);
                        let (counter, sdk) = (counter.clone(), server.sdk);
                        let run =
                            thread::spawn(move || driver_slow_call(driver, sdk, &url, &counter));
                        (driver, cut, run)
                    })
                    .collect();
                // The client goes away before the first byte of the tool call's response.
                let (url, cut) = cut_first_call(&sidecar);
                let key = format!("slow-{:?}", server.sdk);
                let front = retry_after_completion(
                    &url,
                    cut.forwarded.clone(),
                    counter.clone(),
                    &key,
                    &label,
                );
                let http = reqwest::Client::new();
                let resolver = DiscoveringResolver::new(http.clone(), [front.clone()]);
                let client = FramingHttpClient::new(http).auto_retry(
                    resolver,
                    RetrySchedule::default()
                        .max_attempts(3)
                        .initial_backoff(Duration::from_millis(20)),
                );
                let (result, _) = call_tool(client, &front, slow(&key, SLOW_MS));
                let text = result.unwrap_or_else(|e| panic!("{label}: {e:?}"));
                assert_eq!(
                    text,
                    format!("slow {key} done after {SLOW_MS} ms"),
                    "{label}"
                );
                check_replayed(&cut, &counter, &key, &label);
                for (driver, cut, run) in drivers {
                    let call = run.join().unwrap();
                    let label = format!("{} on {label}", driver.name());
                    let key = call["key"].as_str().unwrap();
                    assert_eq!(call["ok"], true, "{label}: {call}");
                    assert_eq!(
                        call["text"],
                        format!("slow {key} done after {SLOW_MS} ms"),
                        "{label}"
                    );
                    // The cut attempt failed (nothing received), the retry replayed the result.
                    assert_eq!(call["attempts"][1], "clean", "{label}: {call}");
                    assert_ne!(call["attempts"][0], "clean", "{label}: {call}");
                    check_replayed(&cut, &counter, key, &label);
                    eprintln!("{label}: cut, completed, replayed: {}", call["attempts"]);
                }
            });
        }
    });
}
