//! Every client through `mcp-frame proxy` in front of every fixture server, the sidecar once as
//! it starts (`--frame-all off`: only requests that opt in are framed) and once framing every
//! response (`--frame-all compat`): the stock clients get every result byte for byte and log
//! nothing, and the framing clients (Rust `FramingHttpClient`, the Python package's wrapper, the
//! TypeScript package's `framingFetch`) verify every response.

use crate::sidecar_support::Proxy;
use crate::{every_framing_client_verifies, every_stock_client_exact, shared_servers};

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
