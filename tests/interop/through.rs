//! Every client through `mcp-frame proxy` in front of every fixture server, the sidecar once as
//! it starts (`--frame-all off`: only requests that opt in are framed) and once framing every
//! response (`--frame-all compat`): the stock clients get every result byte for byte and log
//! nothing, and the framing clients (Rust `FramingHttpClient`, the Python package's wrapper, the
//! TypeScript package's `framingFetch`) verify every response.

use std::thread;
use std::time::Duration;

use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;

use crate::sidecar_support::Proxy;
use crate::stock_support::{
    LINES, SEED, expected_text, framing_call, framing_stat as stat, python_driver,
    run_typescript_sdk,
};
use crate::{assert_exact, every_stock_client_exact, shared_servers};

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
    let expected = expected_text(SEED, LINES);
    let urls: Vec<String> = sidecars.iter().map(|(_, p)| p.url("/mcp")).collect();
    let labels: Vec<String> = sidecars.iter().map(|(l, _)| l.clone()).collect();
    thread::scope(|scope| {
        // Rust: `FramingHttpClient` in the SSE mapping and in the binary one; a result is handed
        // out only once verified (an unframed or cut response is an error).
        let rust = scope.spawn(|| {
            for (url, label) in urls.iter().zip(&labels) {
                for mapping in [Mapping::Sse, Mapping::Binary] {
                    let client = FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
                    let (result, warnings) = framing_call(client, url);
                    let label = format!("rust {mapping:?}, {label}");
                    assert_eq!(result.as_deref(), Ok(expected.as_str()), "{label}");
                    assert!(warnings.is_empty(), "{label}: {warnings:?}");
                }
            }
        });
        // Python: the package's wrapper around the SDK's client, two calls per sidecar, in the
        // compatible mapping and in the binary one.
        let python = scope.spawn(|| {
            // One sidecar of each server (a Python process a run takes seconds on a loaded
            // machine): `--frame-all off` and `compat` in turn, each mapping in turn.
            for (i, (url, label)) in urls.iter().zip(&labels).enumerate().step_by(2) {
                let url = if i % 4 == 0 { url } else { &urls[i + 1] };
                let label = if i % 4 == 0 { label } else { &labels[i + 1] };
                let mapping = if i % 8 < 4 { "compat" } else { "binary" };
                let run = python_driver(&[
                    "calls",
                    url,
                    "--calls",
                    "2",
                    "--seed",
                    SEED,
                    "--lines",
                    &LINES.to_string(),
                    "--mapping",
                    mapping,
                ]);
                let (calls, stats) = (&run.calls, &run.stats);
                let label = format!("python {mapping}, {label}");
                assert!(run.logs.is_empty(), "{label}: {:?}", run.logs);
                assert_eq!(calls.len(), 2, "{label}");
                for call in calls {
                    assert_eq!(call["outcome"], "ok", "{label}: {call}");
                    assert_eq!(call["match"], true, "{label}: byte for byte");
                }
                assert_eq!(stats["incomplete"], 0, "{label}: {stats}");
                assert_eq!(stats["errors"], 0, "{label}: {stats}");
                assert_eq!(
                    stats["verified_messages"], stats["messages_verified_by_attempts"],
                    "{label}: {stats}"
                );
                assert!(
                    stats["verified_messages"].as_u64() >= Some(3),
                    "{label}: {stats}"
                );
            }
        });
        // TypeScript: both SDK lines with `framingFetch`, at once.
        let (urls, labels) = (&urls, &labels);
        for sdk in ["v1", "v2"] {
            scope.spawn(move || {
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                let reports = run_typescript_sdk(sdk, true, &urls, None, Duration::from_secs(120));
                let labels: Vec<String> = labels
                    .iter()
                    .map(|l| format!("{sdk} wrapped, {l}"))
                    .collect();
                assert_exact(&reports, &labels);
                for (report, label) in reports.iter().zip(&labels) {
                    assert!(report.wrapped, "{label}");
                    assert_eq!(stat(report, "unverified"), 0, "{label}: {report:?}");
                    assert!(stat(report, "verified") >= 3, "{label}: {report:?}");
                    assert_eq!(stat(report, "errors"), 0, "{label}: {report:?}");
                }
            });
        }
        rust.join().unwrap();
        python.join().unwrap();
    });
}
