//! Every stock client against every fixture server, with nothing in between: the result of
//! `generate_text` (104 616 bytes of mixed UTF-8) byte for byte, the four tools listed, nothing
//! logged. What the other modules' runs through the sidecar are compared with.

use std::time::Duration;

use crate::servers::FixtureServer;
use crate::stock_support::{Report, SEED, run_python, run_rmcp_stock, run_typescript_sdk};
use crate::{assert_exact, shared_servers};

/// Runs `client` over every server's URL; checks every report and that each server ran the tool
/// once for it.
fn exact_from_every_server(client: &str, run: impl Fn(&[&str]) -> Vec<Report>) {
    let (counter, servers) = shared_servers();
    let urls: Vec<&str> = servers.iter().map(|s| s.url.as_str()).collect();
    let labels: Vec<String> = servers.iter().map(FixtureServer::label).collect();
    let reports = run(&urls);
    for (report, url) in reports.iter().zip(&urls) {
        assert_eq!(report.url, *url, "{client}");
    }
    assert_exact(&reports, &labels);
    // Each test runs its own client; the executions of every test add up in the shared counter.
    assert!(counter.executions("generate_text", SEED) >= servers.len());
}

#[test]
fn python_sdk_client_gets_every_result_byte_for_byte_from_every_server() {
    exact_from_every_server("python", |urls| {
        run_python(urls, None, Duration::from_secs(120))
    });
}

#[test]
fn typescript_sdk_client_gets_every_result_byte_for_byte_from_every_server() {
    exact_from_every_server("typescript v1", |urls| {
        run_typescript_sdk("v1", false, urls, None, Duration::from_secs(120))
    });
}

#[test]
fn typescript_v2_sdk_client_gets_every_result_byte_for_byte_from_every_server() {
    exact_from_every_server("typescript v2", |urls| {
        run_typescript_sdk("v2", false, urls, None, Duration::from_secs(120))
    });
}

#[test]
fn rmcp_stock_client_gets_every_result_byte_for_byte_from_every_server() {
    exact_from_every_server("rmcp", |urls| {
        urls.iter().map(|url| run_rmcp_stock(url, None)).collect()
    });
}
