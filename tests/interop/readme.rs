//! The README's "Any server, any language" section, followed as written: its FastMCP
//! `server.py` and its TypeScript `server.mjs` (the README's code blocks, read from README.md;
//! the port the only change, a free one) run on the pinned SDKs, each fronted by the README's
//! `mcp-frame proxy` command line (the built binary; `--listen` on loopback). Through it a
//! framing client gets the tool's result verified, a stock client reads it unchanged, and a
//! request that does not opt in is answered framed in the compatible mapping
//! (`--frame-all compat`, declared in the `initialize` result).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;

use crate::example_support::{repo, runtime};
use crate::sidecar_support::{Proxy, decode};
use crate::stock_support::{framing_call_tool, python};

/// The section, from its heading to the next one.
fn section() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let start = readme
        .find("\n## Any server, any language")
        .expect("the README's section \"Any server, any language\"");
    let end = readme[start + 1..]
        .find("\n## ")
        .map_or(readme.len(), |at| start + 1 + at);
    readme[start..end].to_owned()
}

/// The section's ```` ```LANGUAGE ```` code block that contains `marker`.
fn block(section: &str, language: &str, marker: &str) -> String {
    let fence = format!("```{language}\n");
    section
        .match_indices(&fence)
        .map(|(at, _)| {
            let start = at + fence.len();
            let end = start + section[start..].find("```").expect("the block's end");
            &section[start..end]
        })
        .find(|code| code.contains(marker))
        .unwrap_or_else(|| panic!("a {language} block with {marker:?} in the README's section"))
        .to_owned()
}

/// The `mcp-frame proxy` command line the section gives for the server at `upstream`, its
/// arguments after `proxy`: the upstream replaced by `actual`, `--listen` by loopback.
fn proxy_args(section: &str, upstream: &str, actual: &str) -> Vec<String> {
    let line = section
        .lines()
        .find(|line| line.starts_with(&format!("mcp-frame proxy --upstream {upstream} ")))
        .unwrap_or_else(|| panic!("the proxy command for {upstream} in the README's section"));
    let mut args: Vec<String> = line.split_whitespace().skip(2).map(str::to_owned).collect();
    for pair in 0..args.len() - 1 {
        match args[pair].as_str() {
            "--upstream" => args[pair + 1] = actual.to_owned(),
            "--listen" => args[pair + 1] = "127.0.0.1:0".to_owned(),
            _ => {}
        }
    }
    args
}

/// A README server process, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` and waits (two minutes at most: a loaded machine imports slowly) for the
/// line of `pipe` (its stdout or stderr) that contains `ready` followed by the port it listens
/// on; the endpoint `http://127.0.0.1:PORT/mcp`.
fn start(mut command: Command, stderr: bool, ready: &'static str) -> Server {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the README's server");
    let pipes: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().expect("stdout")),
        Box::new(child.stderr.take().expect("stderr")),
    ];
    let (send, receive) = mpsc::channel();
    for (i, pipe) in pipes.into_iter().enumerate() {
        let send = send.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let port = line.find(ready).and_then(|at| {
                    let digits = line[at + ready.len()..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>();
                    digits.parse::<u16>().ok()
                });
                let _ = send.send((port.filter(|_| (i == 1) == stderr), line));
            }
        });
    }
    drop(send);
    let mut said = Vec::new();
    loop {
        match receive.recv_timeout(Duration::from_secs(120)) {
            Ok((Some(port), _)) => {
                let url = format!("http://127.0.0.1:{port}/mcp");
                return Server { child, url };
            }
            Ok((None, line)) => said.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "the README's server did not start; it wrote:\n{}",
                    said.join("\n")
                );
            }
        }
    }
}

/// A scratch directory of its own for `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("readme-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The FastMCP server of the README (`python server.py`, the pinned FastMCP), on a free port.
fn fastmcp_server(section: &str) -> Server {
    let code = block(section, "python", "mcp.run(");
    assert!(code.contains("port=8000)"), "{code}");
    let path = scratch("fastmcp").join("server.py");
    std::fs::write(&path, code.replace("port=8000)", "port=0)")).expect("write server.py");
    let mut command = Command::new(python());
    command
        .arg(&path)
        // No banner, and no look for a newer release on PyPI (the tests reach no network).
        .env("FASTMCP_SHOW_SERVER_BANNER", "false")
        .env("FASTMCP_CHECK_FOR_UPDATES", "off")
        .env("FASTMCP_LOG_LEVEL", "INFO");
    start(command, true, "Uvicorn running on http://127.0.0.1:")
}

/// The TypeScript server of the README (`node server.mjs`, the pinned SDK), on a free port.
fn typescript_server(section: &str) -> Server {
    let code = block(section, "js", "createMcpHandler(");
    let listen = ".listen(3000, '127.0.0.1');";
    assert!(code.contains(listen), "{code}");
    let dir = scratch("typescript");
    std::os::unix::fs::symlink(
        repo().join("tests/stock_clients/node_modules"),
        dir.join("node_modules"),
    )
    .expect("link the pinned SDK");
    let code = code.replace(
        listen,
        ".listen(0, '127.0.0.1', function () { console.log(`port ${this.address().port}`); });",
    );
    std::fs::write(dir.join("server.mjs"), code).expect("write server.mjs");
    let mut command = Command::new("node");
    command.arg(dir.join("server.mjs"));
    start(command, false, "port ")
}

/// `add {a: 2, b: 3}`, the README servers' tool.
fn add() -> CallToolRequestParams {
    let arguments = serde_json::json!({"a": 2, "b": 3});
    CallToolRequestParams::new("add").with_arguments(arguments.as_object().unwrap().clone())
}

#[test]
fn the_readme_sidecar_commands_front_the_fastmcp_and_typescript_servers_as_written() {
    let section = section();
    let servers = [
        (
            "FastMCP",
            "http://127.0.0.1:8000/mcp",
            fastmcp_server(&section),
        ),
        (
            "TypeScript",
            "http://127.0.0.1:3000/mcp",
            typescript_server(&section),
        ),
    ];
    for (name, upstream, server) in &servers {
        let args = proxy_args(&section, upstream, &server.url);
        assert!(
            args.windows(2).any(|w| w == ["--frame-all", "compat"]),
            "{name}: {args:?}"
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let sidecar = Proxy::spawn(&args, &[]);
        let url = sidecar.url("/mcp");
        // A framing client: the result verified (it refuses a server that declares no contract).
        let client = FramingHttpClient::new(reqwest::Client::new());
        let (result, warnings) = framing_call_tool(client, &url, add());
        assert_eq!(result.as_deref(), Ok("5"), "{name}");
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
        // A stock client (rmcp's own transport): the result unchanged.
        let stock = runtime().block_on(async {
            let peer = ().serve(StreamableHttpClientTransport::from_uri(url.as_str())).await;
            let peer = peer.expect("initialize through the sidecar");
            let result = peer.call_tool(add()).await.expect("the tool's result");
            let _ = peer.cancel().await;
            result.content[0].as_text().expect("text").text.clone()
        });
        assert_eq!(stock, "5", "{name}");
        // A request that does not opt in (a stock client's `initialize`) is answered framed in
        // the compatible mapping, its result declaring so.
        let body = runtime().block_on(async {
            let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "readme", "version": "1.0.0"}}});
            let response = reqwest::Client::new()
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .json(&initialize)
                .send()
                .await
                .expect("the sidecar answers");
            response.bytes().await.expect("a whole body")
        });
        let decoded = decode(Mapping::Compat, &body);
        assert!(decoded.end.is_ok(), "{name}: {decoded:?}");
        assert_eq!(decoded.messages.len(), 1, "{name}: {decoded:?}");
        assert!(
            decoded.messages[0].contains(r#""alwaysFramed":"compat""#),
            "{name}: {decoded:?}"
        );
        eprintln!("{name}: the README's sidecar command: {args:?}");
    }
}
