//! What an operator relies on: `--help` with an example, every flag from the environment, JSON
//! logs, the Prometheus endpoint with the crate's and the sidecar's metric names.

use std::process::Command;

use mcp_framing::RequestKey;
use mcp_framing::http::opt_in_headers;
use mcp_framing::mapping::Mapping;
use serde_json::json;

use crate::support::{
    LAST_CHUNK, Proxy, Step, chunk, chunked_head, decode, http, post_call, scripted_upstream,
    tools_call,
};

/// An upstream answering every request with one final response for id 1.
async fn upstream() -> std::net::SocketAddr {
    let (addr, _) = scripted_upstream(|_| {
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
            )),
            Step::Write(bytes::Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await;
    addr
}

#[test]
fn help_shows_a_complete_example_and_every_flags_variable() {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-frame"))
        .args(["proxy", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(
        help.contains("mcp-frame proxy --upstream http://127.0.0.1:8000/mcp --listen 0.0.0.0:9000"),
        "{help}"
    );
    let flags = help
        .lines()
        .filter(|l| l.trim_start().starts_with("--"))
        .count();
    let variables = help.matches("[env: MCP_FRAME_").count();
    assert!(flags >= 20, "{help}");
    assert_eq!(
        variables,
        flags - 1,
        "every flag but --help has its variable:\n{help}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_setting_can_come_from_the_environment() {
    let upstream = upstream().await;
    let url = format!("http://{upstream}/mcp");
    let proxy = Proxy::spawn(
        &[],
        &[
            ("MCP_FRAME_UPSTREAM", &url),
            ("MCP_FRAME_LISTEN", "127.0.0.1:0"),
            ("MCP_FRAME_FRAME_ALL", "compat"),
            ("MCP_FRAME_DEDUPE", "off"),
            ("MCP_FRAME_ALLOWED_ORIGINS", "http://ok.example"),
        ],
    );
    let response = post_call(&proxy, reqwest::header::HeaderMap::new(), 1).await;
    assert_eq!(response.headers()["mcp-framing"], "1; mapping=compat");
    assert!(response.headers().get("mcp-framing-dedupe").is_none());
    let refused = http()
        .post(proxy.url("/mcp"))
        .header("origin", "http://evil.example")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn json_logs_are_one_object_a_line() {
    let upstream = upstream().await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--log-format", "json", "--allowed-hosts", "nothing.example"],
    );
    let refused = http().get(proxy.url("/mcp")).send().await.unwrap();
    assert_eq!(refused.status(), 421);
    let lines = proxy.log_with("host_not_allowed");
    assert!(lines.len() >= 2, "{lines:?}");
    for line in &lines {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
        assert!(
            object["level"].is_string() && object["message"].is_string(),
            "{line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_metrics_endpoint_serves_the_crates_and_the_sidecars_metrics() {
    let upstream = upstream().await;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--metrics", &metrics.to_string()],
    );
    let key = RequestKey::random();
    for _ in 0..2 {
        let response = http()
            .post(proxy.url("/mcp"))
            .headers(opt_in_headers(key, true))
            .header("content-type", "application/json")
            .body(tools_call(1, "t", json!({})))
            .send()
            .await
            .unwrap();
        decode(Mapping::Binary, &response.bytes().await.unwrap())
            .end
            .unwrap();
    }
    let text = http()
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "mcp_framing_proxy_requests{method=\"POST\",status=\"200\"} 2",
        "mcp_framing_dedupe_decisions{",
        "decision=\"replay\"",
        "# HELP mcp_framing_proxy_requests Requests answered",
    ] {
        assert!(text.contains(name), "{name} missing in:\n{text}");
    }
}
