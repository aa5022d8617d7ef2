//! Every client through `mcp-frame proxy` in front of every fixture server, the sidecar once as
//! it starts (`--frame-all off`: only requests that opt in are framed) and once framing every
//! response (`--frame-all compat`): the stock clients get every result byte for byte and log
//! nothing, and the framing clients (Rust `FramingHttpClient`, the Python package's wrapper, the
//! TypeScript package's `framingFetch`) verify every response.
//!
//! Then what the stock clients do when the `tools/call` response is cut between them and the
//! sidecar (a proxy of the test's own ending the body normally inside the result): none of them
//! can be handed a wrong or partial result, but none of them can tell a cut from a server that
//! failed either; each one's outcome is asserted, the documented row of the table in
//! docs/sidecar.md.

use std::thread;
use std::time::{Duration, Instant};

use crate::cut::{self, Cut};
use crate::example_support::runtime;
use crate::servers::Sdk;
use crate::sidecar_support::Proxy;
use crate::stock_support::{Report, run_python, run_rmcp_stock, run_typescript_sdk};
use crate::{every_framing_client_verifies, every_stock_client_exact, raw_post, shared_servers};

/// The two ways the sidecar runs in this module: its `--frame-all`.
const FRAME_ALL: [&str; 2] = ["off", "compat"];

/// A sidecar of each kind in front of every shared server: (label, sidecar).
fn sidecars() -> Vec<(String, Proxy)> {
    let (_, servers) = shared_servers();
    let mut sidecars = Vec::new();
    for server in servers {
        for frame_all in FRAME_ALL {
            let proxy = Proxy::start(&server.url, &["--frame-all", frame_all]);
            sidecars.push((
                format!("{} behind --frame-all {frame_all}", server.label()),
                proxy,
            ));
        }
    }
    sidecars
}

#[test]
fn every_stock_client_gets_every_result_byte_for_byte_through_the_sidecar_with_and_without_framing_all()
 {
    let sidecars = sidecars();
    let urls: Vec<String> = sidecars.iter().map(|(_, p)| p.url("/mcp")).collect();
    let labels: Vec<String> = sidecars.iter().map(|(l, _)| l.clone()).collect();
    every_stock_client_exact(&urls, &labels);
    for (label, proxy) in &sidecars {
        let log = proxy.log.lock().unwrap().join("\n");
        assert!(
            !log.contains(" WARN ") && !log.contains(" ERROR "),
            "{label}: the sidecar logged\n{log}"
        );
    }
}

#[test]
fn every_framing_client_verifies_every_response_through_the_sidecar() {
    let sidecars = sidecars();
    let urls: Vec<String> = sidecars.iter().map(|(_, p)| p.url("/mcp")).collect();
    let labels: Vec<String> = sidecars.iter().map(|(l, _)| l.clone()).collect();
    every_framing_client_verifies(&urls, &labels);
}

/// Where the stock clients' `tools/call` responses are cut: inside the ~110 KB body of the
/// `generate_text` result, whatever the server and the mapping (mid-event, or mid-JSON-body).
const CUT_AT: usize = 50_000;

/// The request timeout of the stock TypeScript clients on a cut event stream they cannot resume:
/// they wait for it (the SDKs' default is 60 s). Every other cut gets 30 s, which no client
/// waits for: it fails at once or resumes.
const WAIT_SECONDS: f64 = 1.0;

/// What a `tools/call` response through the sidecar is, as the stock clients ask for it (MCP
/// 2025-11-25): that decides what they make of a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// `application/json`: the cut leaves a JSON text that does not parse.
    Json,
    /// An event stream whose events carry ids: a client resumes it (`GET` with `Last-Event-ID`),
    /// and the server's event store replays what followed.
    ResumableSse,
    /// An event stream without event ids.
    Sse,
}

/// What `url` answers to a `tools/call` of `count` (sent without a session: every fixture
/// server is stateless).
fn body_of(url: &str) -> Body {
    runtime().block_on(async {
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "count", "arguments": {"key": "stock-cut-probe"}}});
        let response = raw_post(url, &call).await;
        let sse = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        let text = response.text().await.expect("a whole body");
        if !sse {
            Body::Json
        } else if !event_ids(&text).is_empty() {
            Body::ResumableSse
        } else {
            Body::Sse
        }
    })
}

/// What a stock client makes of a cut `tools/call` response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StockCut {
    /// It resumes the stream and gets the whole result, byte for byte.
    Resumes,
    /// It fails the call at once (a parse error, "stream ended", "transport closed").
    ErrsAtOnce,
    /// It waits for its request timeout.
    WaitsForItsTimeout,
}

/// What `client` (a [`Report`]'s `client`) does with a cut `body`.
fn expected_stock_cut(client: &str, body: Body) -> StockCut {
    match (client, body) {
        (_, Body::ResumableSse) => StockCut::Resumes,
        ("typescript" | "typescript-v2", Body::Sse) => StockCut::WaitsForItsTimeout,
        _ => StockCut::ErrsAtOnce,
    }
}

fn stock_cut_of(report: &Report) -> StockCut {
    let error = report.error.as_deref().unwrap_or_default();
    if report.outcome == "ok" {
        StockCut::Resumes
    } else if error.contains("Request timed out") || error.contains("Timeout") {
        StockCut::WaitsForItsTimeout
    } else {
        StockCut::ErrsAtOnce
    }
}

#[test]
fn every_stock_client_on_a_tool_call_cut_after_the_sidecar_errs_waits_or_resumes_never_a_wrong_result()
 {
    let (_, servers) = shared_servers();
    let mut cases = Vec::new();
    for server in servers {
        for frame_all in FRAME_ALL {
            let sidecar = Proxy::start(&server.url, &["--frame-all", frame_all]);
            let body = body_of(&sidecar.url("/mcp"));
            let cut = Cut::new();
            cut.cut_method("tools/call", std::iter::repeat_n(CUT_AT, 4));
            let url = cut::serve_proxy(runtime(), &sidecar.url("/mcp"), cut.clone());
            let label = format!("{} behind --frame-all {frame_all}", server.label());
            cases.push((label, body, url, cut, sidecar));
        }
    }
    let urls: Vec<&str> = cases.iter().map(|c| c.2.as_str()).collect();
    // The TypeScript clients: the streams they wait on with a short timeout, the others with a
    // long one (a failure at once is not taken for the wait on a loaded machine).
    let waits_in = |typescript_waits: bool| -> Vec<&str> {
        cases
            .iter()
            .filter(|c| {
                let waits = expected_stock_cut("typescript", c.1) == StockCut::WaitsForItsTimeout;
                waits == typescript_waits
            })
            .map(|c| c.2.as_str())
            .collect()
    };
    let (waits, others) = (waits_in(true), waits_in(false));
    let cap = Duration::from_secs(180);
    let runs: Vec<Vec<Report>> = thread::scope(|scope| {
        let (urls, waits, others) = (&urls, &waits, &others);
        let python = scope.spawn(move || run_python(urls, Some(30.0), cap));
        let typescript: Vec<_> = ["v1", "v2"]
            .into_iter()
            .map(|sdk| {
                scope.spawn(move || {
                    let mut reports =
                        run_typescript_sdk(sdk, false, waits, Some(WAIT_SECONDS), cap);
                    reports.extend(run_typescript_sdk(sdk, false, others, Some(30.0), cap));
                    reports
                })
            })
            .collect();
        let rmcp = scope.spawn(move || {
            urls.iter()
                .map(|url| run_rmcp_stock(url, Some(30.0)))
                .collect::<Vec<_>>()
        });
        let mut runs = vec![python.join().unwrap()];
        runs.extend(typescript.into_iter().map(|run| run.join().unwrap()));
        runs.push(rmcp.join().unwrap());
        runs
    });
    for reports in &runs {
        assert_eq!(reports.len(), cases.len());
        for report in reports {
            let (label, body, _, _, _) = cases
                .iter()
                .find(|c| c.2 == report.url)
                .expect("a case's URL");
            let label = format!("{} on {label}", report.client);
            // Never a wrong or partial result: an error, or the whole result byte for byte.
            assert_eq!(report.phase, "tools/call", "{label}: {report:?}");
            if report.outcome == "ok" {
                assert_eq!(report.matched, Some(true), "{label}: {report:?}");
            } else {
                assert_eq!(report.outcome, "error", "{label}: {report:?}");
                assert_eq!(report.matched, None, "{label}: {report:?}");
            }
            let outcome = stock_cut_of(report);
            eprintln!(
                "{label} ({body:?}): {outcome:?} after {:.3} s: {}",
                report.seconds.unwrap_or_default(),
                report.error.as_deref().unwrap_or_default()
            );
            assert_eq!(
                outcome,
                expected_stock_cut(&report.client, *body),
                "{label}, {body:?}: {report:?}"
            );
        }
    }
    for (label, _, _, cut, _) in &cases {
        let forwarded = cut.forwarded.lock().unwrap().clone();
        assert_eq!(forwarded, [CUT_AT; 4], "{label}: every client's call cut");
    }
}

/// The ids of the events of an SSE `text` (LF line endings, as the TypeScript SDK writes), in order.
fn event_ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("id:"))
        .map(|id| id.strip_prefix(' ').unwrap_or(id).to_owned())
        .collect()
}

/// What the stock clients' resumes in the cut test above rely on: a `GET` with the priming
/// event's id as `Last-Event-ID` gets every later event of the TypeScript SDK v1 server's stream,
/// in the order sent, straight from the server and through both sidecars. A `notify` call of 32
/// progress notifications stores its 33 events within a millisecond or two, where the SDK's
/// example event store (ids sorted as strings, ties broken by a random suffix) replays them out
/// of order and drops those that sort before the priming event: a result cut after the priming
/// event and stored in its millisecond may never be replayed, and the resuming client waits for
/// its timeout (docs/stock-clients.md).
#[test]
fn a_resume_of_the_typescript_v1_server_stream_after_its_priming_event_replays_every_later_event_in_order()
 {
    let (_, servers) = shared_servers();
    let server = servers
        .iter()
        .find(|s| s.sdk == Sdk::TypeScriptV1 && !s.json)
        .expect("the TypeScript SDK v1 server answering in SSE");
    let sidecars: Vec<Proxy> = FRAME_ALL
        .iter()
        .map(|frame_all| Proxy::start(&server.url, &["--frame-all", frame_all]))
        .collect();
    let mut urls = vec![(server.label(), server.url.clone())];
    for (frame_all, sidecar) in FRAME_ALL.iter().zip(&sidecars) {
        urls.push((
            format!("{} behind --frame-all {frame_all}", server.label()),
            sidecar.url("/mcp"),
        ));
    }
    runtime().block_on(async {
        for (label, url) in &urls {
            let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "notify", "arguments": {"seed": "resume", "lines": 2, "steps": 32},
                    "_meta": {"progressToken": 1}}});
            let sent = raw_post(url, &call).await.text().await.expect("a whole body");
            let sent = event_ids(&sent);
            assert_eq!(sent.len(), 34, "{label}: priming, 32 notifications, result: {sent:?}");
            let mut resumed = reqwest::Client::new()
                .get(url)
                .header("accept", "text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .header("last-event-id", &sent[0])
                .send()
                .await
                .expect("the server answers");
            assert_eq!(resumed.status(), 200, "{label}");
            // The resumed stream stays open after the replay: read until the result's id, or
            // fail once a replay that is written at once had a minute to arrive.
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut body = Vec::new();
            let replayed = |body: &[u8]| event_ids(&String::from_utf8_lossy(body));
            while !replayed(&body).contains(&sent[33]) {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, resumed.chunk()).await {
                    Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                    other => panic!("{label}: the replay stopped ({other:?}) after {body:?}"),
                }
            }
            assert_eq!(replayed(&body), sent[1..], "{label}: every later event, in order");
        }
    });
}
