//! Every stock client against every fixture server, with nothing in between: the result of
//! `generate_text` (104 616 bytes of mixed UTF-8) byte for byte, the four tools listed, nothing
//! logged. What the other modules' runs through the sidecar are compared with.

use crate::servers::FixtureServer;
use crate::stock_support::SEED;
use crate::{every_stock_client_exact, shared_servers};

#[test]
fn every_stock_client_gets_every_result_byte_for_byte_from_every_server() {
    let (counter, servers) = shared_servers();
    let before = counter.executions("generate_text", SEED);
    let urls: Vec<String> = servers.iter().map(|s| s.url.clone()).collect();
    let labels: Vec<String> = servers.iter().map(FixtureServer::label).collect();
    every_stock_client_exact(&urls, &labels);
    // Other tests call these servers too: at least the four clients' calls were recorded.
    assert!(counter.executions("generate_text", SEED) >= before + 4 * servers.len());
}
