//! The fixture servers framing their own responses, in-process, as the packages' READMEs write
//! it (no sidecar): the Python SDK's and FastMCP's apps in the Python package's
//! `FramingMiddleware`, the TypeScript SDK's v1 web-standard transport and v2 `createMcpHandler`
//! in the TypeScript package's `framingHandler` (`tests/servers/`, `--framing`):
//!
//! - every stock client (the Python SDK's, the TypeScript SDK's v1 and v2 lines', rmcp's) gets
//!   every result byte for byte from every one of them, answering with SSE and with JSON, with
//!   and without `frame-all compat`, and every framing client (Rust, Python, TypeScript) verifies
//!   every response;
//! - two processes of each, deduplicating on one Redis (the packages' `RedisStore`), behind a
//!   cutting proxy: every cut call reported at once, its keyed retry answered with the recorded
//!   result, one execution per logical call (the fleet of [`crate::fleet`], without sidecars);
//! - each one killed in the middle of a tool call: aborted or abandoned, never clean.
//!
//! (An app or handler that fails in the middle of its body ends with ABORT code 4: the packages'
//! own tests prove it, `python/tests/test_server.py` and `typescript/test/server.test.mjs`.)

use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread;
use std::time::Duration;

use mcp_framing::rmcp_http::FramingHttpClient;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;

use crate::example_support::runtime;
use crate::fleet::{self, Fleet};
use crate::servers::{Counter, FixtureServer, Framing, Sdk};
use crate::stock_support::framing_call_tool_with as call_tool_with;
use crate::{
    assert_aborted_or_abandoned, every_framing_client_verifies, every_stock_client_exact,
    kill_during_call, raw_post, slow,
};

/// One server of every SDK framing itself, answering with SSE and with JSON, each without and
/// then with frame-all compat (in that order: the pairs [`every_framing_client_verifies`]
/// takes), all recording into one counter; started once for the module's clean tests.
fn framed_servers() -> &'static (Arc<Counter>, Vec<FixtureServer>) {
    static SERVERS: OnceLock<(Arc<Counter>, Vec<FixtureServer>)> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let counter = Counter::new();
        let which: Vec<(Sdk, bool, Option<Framing>)> = Sdk::ALL
            .iter()
            .flat_map(|&sdk| [(sdk, false), (sdk, true)])
            .flat_map(|(sdk, json)| {
                [false, true].map(|frame_all| {
                    let framing = Framing {
                        frame_all,
                        redis: None,
                    };
                    (sdk, json, Some(framing))
                })
            })
            .collect();
        let servers = FixtureServer::start_framed(&which, &counter);
        (counter, servers)
    })
}

fn urls_and_labels(servers: &[FixtureServer]) -> (Vec<String>, Vec<String>) {
    let urls = servers.iter().map(|s| s.url.clone()).collect();
    let labels = servers.iter().map(FixtureServer::label).collect();
    (urls, labels)
}

#[test]
fn every_stock_client_gets_every_result_byte_for_byte_from_every_server_framing_itself_with_and_without_frame_all()
 {
    let (_, servers) = framed_servers();
    let (urls, labels) = urls_and_labels(servers);
    every_stock_client_exact(&urls, &labels);
    // What the stock clients read was framed exactly where frame-all is on: a request that does
    // not opt in gets the compatible mapping there, and the response as the SDK wrote it
    // elsewhere.
    for server in servers {
        let framed = runtime().block_on(async {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
            let response = raw_post(&server.url, &body).await;
            let header = response.headers().get("mcp-framing").cloned();
            let text = response.text().await.expect("a whole body");
            (header, text)
        });
        let frame_all = server.framing.as_ref().is_some_and(|f| f.frame_all);
        let label = server.label();
        match framed {
            (Some(header), text) => {
                assert!(frame_all, "{label}: framed unasked: {header:?}");
                assert_eq!(header, "1; mapping=compat", "{label}");
                assert!(
                    text.contains("\n:mcp-framing ") || text.starts_with(":mcp-framing "),
                    "{label}: {text}"
                );
            }
            (None, text) => {
                assert!(!frame_all, "{label}: not framed: {text}");
                assert!(!text.contains("mcp-framing "), "{label}: {text}");
            }
        }
    }
}

#[test]
fn every_framing_client_verifies_every_response_of_every_server_framing_itself() {
    let (_, servers) = framed_servers();
    let (urls, labels) = urls_and_labels(servers);
    every_framing_client_verifies(&urls, &labels);
}

#[test]
fn every_cut_tool_call_to_servers_deduplicating_on_one_redis_runs_once_and_its_keyed_retry_gets_the_recorded_result()
 {
    fleet::every_fleet_cut(Fleet::framed);
}

/// The tool's sleep: far longer than the test waits for anything.
const SLOW_MS: u64 = 60_000;

/// A client that says when the server's first progress notification reached it (verified: the
/// framed response has begun).
struct OnProgress(Mutex<Option<mpsc::Sender<()>>>);

impl ClientHandler for OnProgress {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(began) = self.0.lock().unwrap().take() {
            let _ = began.send(());
        }
    }
}

#[test]
fn a_server_framing_itself_killed_in_the_middle_of_a_response_gives_abandoned_or_aborted_never_clean()
 {
    // SSE: the tool's progress notification goes out before it sleeps, so the response has
    // begun (a JSON response has not: a server killed then is one that never answered).
    let which: Vec<(Sdk, bool, Option<Framing>)> = Sdk::ALL
        .iter()
        .map(|&sdk| (sdk, false, Some(Framing::default())))
        .collect();
    let counter = Counter::new();
    let servers = FixtureServer::start_framed(&which, &counter);
    thread::scope(|scope| {
        for mut server in servers {
            scope.spawn(move || {
                let label = server.label();
                let url = server.url.clone();
                let key = format!("killed-{:?}", server.sdk);
                let (began, begun) = mpsc::channel();
                let call = {
                    let key = key.clone();
                    thread::spawn(move || {
                        let client = FramingHttpClient::new(reqwest::Client::new());
                        let handler = OnProgress(Mutex::new(Some(began)));
                        call_tool_with(client, &url, slow(&key, SLOW_MS), handler)
                    })
                };
                begun
                    .recv_timeout(Duration::from_secs(60))
                    .unwrap_or_else(|_| panic!("{label}: no progress notification within 60 s"));
                let (message, outcome, warnings, seconds) =
                    kill_during_call(&mut server, call, &label);
                assert_eq!(server.counter.executions("slow", &key), 0, "{label}");
                assert!(seconds < 5.0, "{label}: reported after {seconds} s");
                let classification =
                    assert_aborted_or_abandoned(&label, &message, &outcome, &warnings);
                eprintln!(
                    "{label}: killed mid-response: {classification} ({}) after {seconds:.3} s: {message}",
                    outcome["kind"].as_str().unwrap_or_default()
                );
            });
        }
    });
}
