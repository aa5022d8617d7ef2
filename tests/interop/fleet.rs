//! A fleet of each fixture server's SDK behind the sidecar, cut on the way: two server processes
//! (sharing one counter file), each behind its own `mcp-frame proxy`, both sidecars sharing one
//! Redis (started by the test), and a proxy of the test's own in front of each sidecar that ends
//! `tools/call` response bodies normally at chosen offsets (`tests/rmcp_support/cut.rs`).
//!
//! The same fleet without sidecars ([`Fleet::framed`], [`crate::in_process`]): two processes that
//! frame and deduplicate themselves on the shared Redis (the Python package's `FramingMiddleware`,
//! the TypeScript package's `framingHandler`, each with its `RedisStore`).
//!
//! Each framing client with keyed retries (Rust's `FramingHttpClient`, the Python package's
//! wrapper, the TypeScript package's `framingFetch` in both SDK lines) sends calls whose first
//! attempt goes to the first sidecar, cut at a different offset each time, from the first byte
//! to the last; the client reports the cut at once, retries the same key on the second sidecar,
//! and gets the recorded result: the tool's own counter shows one execution per logical call.
//!
//! The Python and TypeScript clients resolve every attempt with `server/discover` (MCP
//! 2026-07-28), except on the TypeScript SDK's v1 server, which does not answer it ("Unsupported
//! protocol version"): there they resolve every attempt with the contract the sidecar declared in
//! the SDK's own `initialize` result. Rust's client resolves every attempt with `server/discover`
//! at a front of the test's own that answers it with that contract, on all four.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mcp_framing::client::{DiscoveringResolver, RetrySchedule};
use mcp_framing::contract::{DiscoverySource, FramingContract};
use mcp_framing::internals::contract::ServerDiscovery;
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use serde_json::Value;

use crate::cut::{self, Cut};
use crate::dedupe_support::RedisServer;
use crate::example_support::runtime;
use crate::servers::{Counter, FixtureServer, Framing, Sdk};
use crate::sidecar_support::Proxy;
use crate::stock_support::{cut_fails_within, python_driver, typescript_fleet};

/// Cut calls per server SDK.
const CUT_CALLS: usize = 24;

/// Two processes of one SDK's server, a sidecar in front of each (sharing `redis`), and a
/// cutting proxy in front of each sidecar; or ([`Fleet::framed`]) two processes that frame and
/// deduplicate themselves on `redis`, a cutting proxy in front of each.
pub(crate) struct Fleet {
    sdk: Sdk,
    counter: Arc<Counter>,
    _servers: Vec<FixtureServer>,
    _sidecars: Vec<Proxy>,
    /// The cutting proxies' URLs and what they cut, in front of sidecar A and sidecar B.
    cuts: Vec<(String, Arc<Cut>)>,
}

impl Fleet {
    fn start(sdk: Sdk, redis: &str) -> Self {
        let counter = Counter::new();
        let servers = FixtureServer::start_all(&[(sdk, false), (sdk, false)], &counter);
        let sidecars: Vec<Proxy> = servers
            .iter()
            .map(|server| Proxy::start(&server.url, &["--redis", redis]))
            .collect();
        let upstreams: Vec<String> = sidecars.iter().map(|s| s.url("/mcp")).collect();
        Self::cut_in_front(sdk, counter, servers, sidecars, &upstreams)
    }

    /// Two processes of `sdk`'s server framing their own responses in-process, deduplicating
    /// keyed calls on `redis` ([`Framing`]), a cutting proxy in front of each.
    pub(crate) fn framed(sdk: Sdk, redis: &str) -> Self {
        let counter = Counter::new();
        let framing = Some(Framing {
            frame_all: false,
            redis: Some(redis.to_owned()),
        });
        let servers = FixtureServer::start_framed(
            &[(sdk, false, framing.clone()), (sdk, false, framing)],
            &counter,
        );
        let upstreams: Vec<String> = servers.iter().map(|s| s.url.clone()).collect();
        Self::cut_in_front(sdk, counter, servers, Vec::new(), &upstreams)
    }

    fn cut_in_front(
        sdk: Sdk,
        counter: Arc<Counter>,
        servers: Vec<FixtureServer>,
        sidecars: Vec<Proxy>,
        upstreams: &[String],
    ) -> Self {
        let cuts = upstreams
            .iter()
            .map(|upstream| {
                let cut = Cut::new();
                cut.cut_method("tools/call", []);
                let url = cut::serve_proxy(runtime(), upstream, cut.clone());
                (url, cut)
            })
            .collect();
        Self {
            sdk,
            counter,
            _servers: servers,
            _sidecars: sidecars,
            cuts,
        }
    }
}

/// How the Python and TypeScript clients learn the contract on `sdk`'s server (their drivers'
/// `--handshake`): `server/discover` at every attempt, or the `initialize` result's where the
/// server does not answer `server/discover` (the TypeScript SDK's v1 line).
pub(crate) fn handshake(sdk: Sdk) -> &'static str {
    if sdk == Sdk::TypeScriptV1 {
        "initialize"
    } else {
        "discover"
    }
}

/// A front (`cut::serve_front`) in front of endpoints A and B for a `DiscoveringResolver`: it
/// answers every `server/discover` with the contract the sidecars declared in their `initialize`
/// result (the TypeScript SDK's v1 server does not answer `server/discover`), noting when each
/// resolution (each attempt) began in `starts`; it forwards the first attempt of the next call
/// (a keyed request, when armed) to A, every other request to B, as a stateless fleet's balancer
/// may (retries land on another instance). Its URL.
fn first_to_a(
    a: &str,
    b: &str,
    contract: &FramingContract,
    armed: Arc<AtomicBool>,
    starts: Arc<Mutex<Vec<Instant>>>,
) -> String {
    let mut discovery = json!({"supportedVersions": ["2026-07-28"], "capabilities": {}});
    contract
        .declare_in(&mut discovery, DiscoverySource::Discover)
        .expect("a discovery result");
    let on_discover: cut::OnDiscover = Arc::new(move || {
        starts.lock().unwrap().push(Instant::now());
        Box::pin(async {})
    });
    let (a, b) = (a.to_owned(), b.to_owned());
    cut::serve_front(runtime(), discovery, on_discover, move |headers| {
        let attempt = headers.contains_key("mcp-framing-request-key");
        if attempt && armed.swap(false, Ordering::SeqCst) {
            a.clone()
        } else {
            b.clone()
        }
    })
}

fn count(key: &str) -> CallToolRequestParams {
    let arguments = json!({"key": key});
    CallToolRequestParams::new("count").with_arguments(arguments.as_object().unwrap().clone())
}

/// The offsets of `calls` cuts of a `len`-byte body: from the first byte to the last.
fn offsets(len: usize, calls: usize) -> Vec<usize> {
    (0..calls).map(|i| i * (len - 1) / (calls - 1)).collect()
}

/// Runs the cut calls on `fleet` with Rust's framing client; panics on the first discrepancy.
async fn rust_client_on(fleet: &Fleet) {
    let label = fleet.sdk.name();
    let (a, cut_a) = &fleet.cuts[0];
    let (b, _) = &fleet.cuts[1];
    // The contract the sidecar (or the server) declares, from its `initialize` result (through
    // A, not cut).
    let transport = StreamableHttpClientTransport::with_client(
        FramingHttpClient::new(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(a.as_str()),
    );
    let peer = ().serve(transport).await.expect("initialize through A");
    let info = serde_json::to_value(&*peer.peer_info().expect("an initialize result")).unwrap();
    let _ = peer.cancel().await;
    let discovery = ServerDiscovery::from_initialize(&info).expect("a discovery result");
    let contract = discovery.contract.as_ref().expect("a contract declared");
    assert!(
        contract.deduplication.is_some(),
        "{label}: deduplication declared: {info}"
    );

    let armed = Arc::new(AtomicBool::new(false));
    let starts = Arc::new(Mutex::new(Vec::new()));
    let front = first_to_a(a, b, contract, armed.clone(), starts.clone());
    let http = reqwest::Client::new();
    let resolver = DiscoveringResolver::new(http.clone(), [front.clone()]);
    let client = FramingHttpClient::new(http)
        .mapping(Mapping::Sse)
        .auto_retry(
            resolver,
            RetrySchedule::default()
                .max_attempts(4)
                .initial_backoff(Duration::from_millis(20)),
        );
    let retries = client.retry_stats().expect("retrying");
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(front.as_str()),
    );
    let peer = ().serve(transport).await.expect("initialize");

    // The times of the attempts of the call just made, the last one's delivering its result:
    // from each one's resolution to the next one's, or to the call's end.
    let attempts = |end: Instant| -> Vec<f64> {
        let starts = std::mem::take(&mut *starts.lock().unwrap());
        let ends = starts.iter().skip(1).copied().chain([end]);
        starts
            .iter()
            .zip(ends)
            .map(|(start, end)| (end - *start).as_secs_f64())
            .collect()
    };
    // Clean calls through A: the length of a framed `count` response.
    let mut timings = Vec::new();
    for i in 0..2 {
        let key = format!("clean-{i:03}");
        armed.store(true, Ordering::SeqCst);
        starts.lock().unwrap().clear();
        let start = Instant::now();
        let result = peer.call_tool(count(&key)).await.expect("a clean call");
        timings.push(Timing::new(
            format!("clean call {i}"),
            start,
            attempts(Instant::now()),
        ));
        let text = &result.content[0].as_text().expect("text").text;
        assert_eq!(*text, format!("count {key} 1"), "{label}");
    }
    let lengths = cut_a.forwarded.lock().unwrap().clone();
    assert_eq!(lengths.len(), 2, "{label}: both clean calls went to A");
    assert_eq!(lengths[0], lengths[1], "{label}: one framed length");

    let cuts = offsets(lengths[0], CUT_CALLS);
    cut_a.forwarded.lock().unwrap().clear();
    cut_a.cut_method("tools/call", cuts.iter().copied());
    let mut retried = Vec::new();
    for (i, at) in cuts.iter().enumerate() {
        let before = retries.snapshot().retries;
        let key = format!("cut-{i:04}");
        let label = format!("{label}, call {i} cut at {at} of {}", lengths[0]);
        armed.store(true, Ordering::SeqCst);
        starts.lock().unwrap().clear();
        let start = Instant::now();
        let result = peer
            .call_tool(count(&key))
            .await
            .unwrap_or_else(|err| panic!("{label}: {err}"));
        timings.push(Timing::new(label.clone(), start, attempts(Instant::now())));
        let text = &result.content[0].as_text().expect("text").text;
        assert_eq!(
            *text,
            format!("count {key} 1"),
            "{label}: the recorded result"
        );
        assert_eq!(
            fleet.counter.executions("count", &key),
            1,
            "{label}: one execution per logical call"
        );
        let retries = retries.snapshot().retries - before;
        assert!(retries <= 1, "{label}: {retries} retries");
        retried.push(retries == 1);
    }
    assert_eq!(*cut_a.forwarded.lock().unwrap(), cuts, "{label}: the cuts");
    let times = check_attempt_times(label, &timings);
    // A cut after the result's message was verified (in the stream's last bytes) needs no
    // retry: the client has the result. Every earlier cut was retried.
    let first_kept = retried.iter().position(|r| !r).unwrap_or(cuts.len());
    assert!(
        retried[first_kept..].iter().all(|r| !r),
        "{label}: retried {retried:?} at {cuts:?}"
    );
    assert!(
        first_kept >= 20,
        "{label}: {first_kept} cuts retried, {} kept at {:?} of {}",
        cuts.len() - first_kept,
        &cuts[first_kept..],
        lengths[0]
    );
    eprintln!(
        "{label}: {} cut calls, {first_kept} retried and replayed, {} cut after the verified result at {:?} of {} bytes; {times}",
        cuts.len(),
        cuts.len() - first_kept,
        &cuts[first_kept..],
        lengths[0]
    );
    assert_eq!(retries.snapshot().gave_up, 0, "{label}");
    let _ = peer.cancel().await;
}

/// How long a call and each of its attempts took, and which attempts delivered a result.
struct Timing {
    label: String,
    seconds: f64,
    /// Each attempt's time, and whether it was clean (it delivered a response).
    attempts: Vec<(f64, bool)>,
}

impl Timing {
    /// A call that began at `start` and just ended, its attempts' times `attempts` (the last one
    /// delivering the result, the others failed).
    fn new(label: String, start: Instant, attempts: Vec<f64>) -> Self {
        let last = attempts.len().saturating_sub(1);
        let attempts = attempts
            .into_iter()
            .enumerate()
            .map(|(i, seconds)| (seconds, i == last))
            .collect();
        let seconds = start.elapsed().as_secs_f64();
        Self {
            label,
            seconds,
            attempts,
        }
    }

    /// A driver's call line: `seconds`, `attempts` (each attempt's classification) and
    /// `attempt_seconds`.
    fn of_driver(label: String, call: &Value) -> Self {
        let classes = call["attempts"].as_array().expect("attempts");
        let times = call["attempt_seconds"].as_array().expect("attempt_seconds");
        assert_eq!(classes.len(), times.len(), "{label}: {call}");
        let attempts = classes
            .iter()
            .zip(times)
            .map(|(class, time)| (time.as_f64().unwrap(), class == "clean"))
            .collect();
        Self {
            label,
            seconds: call["seconds"].as_f64().unwrap(),
            attempts,
        }
    }
}

/// Checks the times of one client's run of calls on a fleet (cut calls, and any uncut ones),
/// against the clean attempts of the same run (the same moments' load): every attempt that failed
/// (cut) failed within [`cut_fails_within`] the slowest clean attempt's time, from its start (it
/// is abandoned on the cut, no timeout waited for), and every call took no longer than that for
/// each of its attempts and one more (between the attempts: the backoff). Returns what was
/// measured, for the log.
fn check_attempt_times(label: &str, calls: &[Timing]) -> String {
    let clean: Vec<f64> = calls
        .iter()
        .flat_map(|c| c.attempts.iter().filter(|a| a.1).map(|a| a.0))
        .collect();
    assert!(!clean.is_empty(), "{label}: a clean attempt");
    let within = cut_fails_within(clean.iter().copied());
    let mut failed = Vec::new();
    for call in calls {
        for &(seconds, _) in call.attempts.iter().filter(|a| !a.1) {
            failed.push(seconds);
            assert!(
                seconds < within,
                "{label}: {}: a cut attempt failed after {seconds} s (bound {within} s; clean attempts took up to {} s)",
                call.label,
                clean.iter().copied().fold(0.0, f64::max)
            );
        }
        let bound = (call.attempts.len() + 1) as f64 * within;
        assert!(
            call.seconds < bound,
            "{label}: {}: took {} s over {} attempts (bound {bound} s)",
            call.label,
            call.seconds,
            call.attempts.len()
        );
    }
    let slowest = |times: &[f64]| times.iter().copied().fold(0.0, f64::max);
    let median = |times: &[f64]| {
        let mut times = times.to_vec();
        times.sort_by(f64::total_cmp);
        times.get(times.len() / 2).copied().unwrap_or(0.0)
    };
    format!(
        "cut attempts failed after {:.3} s (median) to {:.3} s, clean attempts took {:.3} s (median) to {:.3} s, bound {within:.3} s",
        median(&failed),
        slowest(&failed),
        median(&clean),
        slowest(&clean)
    )
}

/// Checks the calls a Python or TypeScript fleet client made (`count {key: PREFIX-i}`): every
/// one answered with its first execution's result, executed once, its attempts' times
/// ([`check_attempt_times`]), and `cut` used up. Returns the times measured, for the log.
fn check_fleet_calls(fleet: &Fleet, client: &str, prefix: &str, calls: &[Value]) -> String {
    let label = format!("{client} on {}", fleet.sdk.name());
    let mut timings = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let key = format!("{prefix}-{i}");
        // driver.py says `"outcome": "ok"`, fleet.mjs `"ok": true`.
        let ok = call["outcome"] == "ok" || call["ok"] == true;
        assert!(ok, "{label}: call {i}: {call}");
        assert_eq!(call["text"], format!("count {key} 1"), "{label}: call {i}");
        assert_eq!(
            fleet.counter.executions("count", &key),
            1,
            "{label}: call {i}: one execution"
        );
        timings.push(Timing::of_driver(format!("call {i}"), call));
    }
    let times = check_attempt_times(&label, &timings);
    let forwarded = fleet.cuts[0].1.forwarded.lock().unwrap().len();
    assert!(
        forwarded >= OTHER_CUT_CALLS,
        "{label}: {forwarded} tool calls through A, {OTHER_CUT_CALLS} to cut"
    );
    times
}

/// Cut calls per server SDK for the Python and TypeScript clients (their responses are laid out
/// otherwise; a few cuts land after the verified result, which needs no retry).
const OTHER_CUT_CALLS: usize = 28;

/// The length of a `count` response body through A for a client (one uncut call with `run`).
fn probe(fleet: &Fleet, run: impl FnOnce()) -> usize {
    let cut_a = &fleet.cuts[0].1;
    cut_a.forwarded.lock().unwrap().clear();
    run();
    let forwarded = cut_a.forwarded.lock().unwrap().clone();
    cut_a.forwarded.lock().unwrap().clear();
    *forwarded.last().expect("a call through A")
}

/// The options both drivers take for `calls` keyed `count` calls on `fleet` (keys `PREFIX-i`).
fn count_options(fleet: &Fleet, prefix: &str, calls: usize) -> Vec<String> {
    let calls = calls.to_string();
    let options = ["--calls", &calls, "--tool", "count", "--key-prefix", prefix];
    let mut options: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
    options.extend(["--handshake".to_owned(), handshake(fleet.sdk).to_owned()]);
    options
}

/// The Python SDK with the package's wrapper, keyed retries over both cutting proxies
/// (`driver.py fleet`: round robin, every attempt discovered, or given the contract of the
/// SDK's `initialize` result: [`handshake`]).
fn python_client_on(fleet: &Fleet) {
    let prefix = format!("python-{:?}", fleet.sdk);
    let cut_a = &fleet.cuts[0].1;
    let endpoints = format!("{},{}", fleet.cuts[0].0, fleet.cuts[1].0);
    let run = |prefix: &str, calls: usize| {
        let options = count_options(fleet, prefix, calls);
        let mut args = vec!["fleet", &endpoints];
        args.extend(options.iter().map(String::as_str));
        python_driver(&args)
    };
    let len = probe(fleet, || {
        run(&format!("{prefix}-00"), 1);
    });
    cut_a.cut_method("tools/call", offsets(len, OTHER_CUT_CALLS));
    // Round robin: a call not cut (its first attempt on B) moves the next one's to A.
    let run = run(&prefix, OTHER_CUT_CALLS + OTHER_CUT_CALLS / 2);
    let results = &run.calls;
    let times = check_fleet_calls(fleet, "python", &prefix, results);
    assert!(
        cut_a.schedule.lock().unwrap().is_empty(),
        "python on {}: every cut used",
        fleet.sdk.name()
    );
    let retries = run.stats["retries"].as_u64().unwrap();
    assert!(
        retries >= 20,
        "python on {}: {}",
        fleet.sdk.name(),
        run.stats
    );
    eprintln!(
        "python on {}: {} calls, {OTHER_CUT_CALLS} cut (body {len} bytes), {retries} retried; {times}",
        fleet.sdk.name(),
        results.len(),
    );
}

/// The TypeScript SDK (line `sdk`) with `framingFetch`, keyed retries, every first attempt on A
/// (`fleet.mjs`).
fn typescript_client_on(fleet: &Fleet, sdk: &str) {
    let prefix = format!("ts-{sdk}-{:?}", fleet.sdk);
    let cut_a = &fleet.cuts[0].1;
    let endpoints = format!("{},{}", fleet.cuts[0].0, fleet.cuts[1].0);
    let run = |prefix: &str, calls: usize| -> Value {
        let options = count_options(fleet, prefix, calls);
        let mut args = vec!["--endpoints", &endpoints];
        args.extend(options.iter().map(String::as_str));
        typescript_fleet(sdk, &args)
    };
    let len = probe(fleet, || {
        run(&format!("{prefix}-00"), 1);
    });
    cut_a.cut_method("tools/call", offsets(len, OTHER_CUT_CALLS));
    let run = run(&prefix, OTHER_CUT_CALLS);
    let results = run["calls"].as_array().unwrap();
    let times = check_fleet_calls(fleet, &format!("typescript {sdk}"), &prefix, results);
    let retries = run["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["method"] == "tools/call" && a["attempt"].as_u64() > Some(1))
        .count();
    assert!(
        retries >= 20,
        "typescript {sdk} on {}: {run}",
        fleet.sdk.name()
    );
    eprintln!(
        "typescript {sdk} on {}: {} calls, {OTHER_CUT_CALLS} cut (body {len} bytes), {retries} retried; {times}",
        fleet.sdk.name(),
        results.len(),
    );
}

/// A fleet of every SDK's server (`start(sdk, redis URL)`), all sharing one Redis, cut at once:
/// on each, Rust's framing client, then (but on the TypeScript SDK's v1 server, which does not
/// answer `server/discover`) the Python package's wrapper and `framingFetch` in both SDK lines.
pub(crate) fn every_fleet_cut(start: fn(Sdk, &str) -> Fleet) {
    let redis = RedisServer::start();
    let fleets: Vec<Fleet> = thread::scope(|scope| {
        let starting: Vec<_> = Sdk::ALL
            .iter()
            .map(|&sdk| {
                let redis = redis.url();
                scope.spawn(move || start(sdk, &redis))
            })
            .collect();
        starting.into_iter().map(|f| f.join().unwrap()).collect()
    });
    // Every SDK's fleet at once, one client each.
    thread::scope(|scope| {
        for fleet in &fleets {
            scope.spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(rust_client_on(fleet));
                python_client_on(fleet);
                for sdk in ["v1", "v2"] {
                    typescript_client_on(fleet, sdk);
                }
            });
        }
    });
}

#[test]
fn every_cut_tool_call_runs_once_and_its_keyed_retry_gets_the_recorded_result_on_every_server() {
    every_fleet_cut(Fleet::start);
}
