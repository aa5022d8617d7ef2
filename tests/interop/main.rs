//! Real MCP servers that no one here wrote, from the official SDKs (the fixture servers of
//! `tests/servers/`: the Python SDK `mcp` 2.3.0 and FastMCP 4.1 under uvicorn, the TypeScript
//! SDK's v1 `StreamableHTTPServerTransport` and v2 `createMcpHandler` on Node.js; every one with
//! `text/event-stream` and `application/json` responses), driven by the stock clients of
//! `tests/stock_support` (the Python SDK's, the TypeScript SDK's v1 and v2 lines', rmcp's).
//!
//! - [`direct`]: every stock client gets every result byte for byte from every server, with
//!   nothing in between (what proves the fixtures).
//!
//! The servers and clients run from what `scripts/stock-clients` installs (`bash scripts/test`
//! runs it first); the tests fail, not skip, when it is missing. Each module starts its servers
//! once, in parallel (`servers::FixtureServer::start_all`), and its tests share them.

#[path = "../example_support/mod.rs"]
mod example_support;
#[path = "../stock_support/mod.rs"]
mod stock_support;

mod direct;
mod servers;

use std::sync::Arc;

use servers::{Counter, FixtureServer, Sdk};
use stock_support::{LINES, Report, SEED, expected_text, sha256_hex};

/// The tools of every fixture server, as `tools/list` gives them (sorted).
const TOOLS: [&str; 4] = ["count", "generate_text", "notify", "slow"];

/// One server of every SDK, answering with SSE and with JSON, all recording into one counter.
fn every_server() -> (Arc<Counter>, Vec<FixtureServer>) {
    let counter = Counter::new();
    let which: Vec<(Sdk, bool)> = Sdk::ALL
        .iter()
        .flat_map(|&sdk| [(sdk, false), (sdk, true)])
        .collect();
    let servers = FixtureServer::start_all(&which, &counter);
    (counter, servers)
}

/// Asserts that every report is the exact `generate_text {SEED, LINES}` result, with the
/// fixture servers' tools listed and no warning logged by the client.
fn assert_exact(reports: &[Report], labels: &[String]) {
    assert_eq!(reports.len(), labels.len());
    let expected = expected_text(SEED, LINES);
    let sha = sha256_hex(expected.as_bytes());
    for (report, label) in reports.iter().zip(labels) {
        let label = format!("{} from {label}", report.client);
        assert_eq!(report.outcome, "ok", "{label}: {report:?}");
        assert_eq!(report.matched, Some(true), "{label}: {report:?}");
        assert_eq!(report.bytes, Some(expected.len()), "{label}");
        assert_eq!(report.sha256.as_deref(), Some(sha.as_str()), "{label}");
        assert_eq!(report.tools, TOOLS, "{label}");
        assert!(
            report.warnings.is_empty(),
            "{label}: the client logged {:?}",
            report.warnings
        );
    }
}
