//! The flags of `mcp-frame proxy`, each also read from an environment variable, and the checks
//! that turn them into the settings the proxy runs with.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};
use http::Uri;
use http::uri::{Authority, PathAndQuery};

use crate::CliError;

/// Put framing and request-key deduplication in front of any MCP server over HTTP.
#[derive(Debug, Args)]
#[command(after_help = "\
Example (a FastMCP or TypeScript SDK server on port 8000, clients on port 9000):

  mcp-frame proxy --upstream http://127.0.0.1:8000/mcp --listen 0.0.0.0:9000 \\
      --frame-all compat --redis redis://redis.internal:6379/ --metrics 0.0.0.0:9464

Clients that opt in (Mcp-Framing headers) get framed, verified responses; with --frame-all \
compat every other POST response is framed in the compatible SSE mapping, which stock clients \
read as plain MCP. Keyed tools/call requests run at most once per key (in memory, or in Redis \
shared by every sidecar of a fleet). Health: GET /healthz. Every flag has an environment \
variable (shown in [env: ...]); a flag given on the command line wins.")]
pub(crate) struct ProxyArgs {
    /// The MCP server's endpoint (plain HTTP, normally on loopback). Every request is forwarded
    /// to this host with its own path and query.
    #[arg(long, env = "MCP_FRAME_UPSTREAM", value_name = "URL")]
    pub(crate) upstream: String,

    /// Where the sidecar accepts clients: HTTP/1.1, and HTTP/2 without TLS (prior knowledge), told
    /// apart by a connection's first bytes.
    #[arg(
        long,
        env = "MCP_FRAME_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:9000"
    )]
    pub(crate) listen: SocketAddr,

    /// Responses framed for clients that did not opt in: `off` (only requests that opted in are
    /// framed) or `compat` (every POST response in the compatible SSE mapping, which stock
    /// clients read as plain MCP; declared as `alwaysFramed`).
    #[arg(
        long,
        env = "MCP_FRAME_FRAME_ALL",
        value_name = "MODE",
        default_value = "off"
    )]
    pub(crate) frame_all: FrameAll,

    /// Request-key deduplication of `tools/call` (SPEC.md §17): `on` or `off`.
    #[arg(
        long,
        env = "MCP_FRAME_DEDUPE",
        value_name = "ON|OFF",
        default_value = "on"
    )]
    pub(crate) dedupe: Switch,

    /// Keep deduplication records in this Redis or Valkey (`redis://`, `rediss://`; a cluster as
    /// `redis+cluster://host:port,host:port/`) instead of in memory: required for a fleet.
    #[arg(long, env = "MCP_FRAME_REDIS", value_name = "URL")]
    pub(crate) redis: Option<String>,

    /// The prefix of the sidecar's Redis keys (one per deployment sharing a Redis).
    #[arg(long, env = "MCP_FRAME_REDIS_PREFIX", value_name = "PREFIX")]
    pub(crate) redis_prefix: Option<String>,

    /// How long a keyed call's result is kept for its retries (e.g. `10m`, `24h`).
    #[arg(long, env = "MCP_FRAME_DEDUPE_WINDOW", value_name = "DURATION", value_parser = duration)]
    pub(crate) dedupe_window: Option<Duration>,

    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, env = "MCP_FRAME_METRICS", value_name = "ADDR")]
    pub(crate) metrics: Option<SocketAddr>,

    /// The sidecar's health endpoint (JSON: upstream reachable, store answering; 503 if not, or
    /// while shutting down). Requests to this path are not forwarded.
    #[arg(
        long,
        env = "MCP_FRAME_HEALTH_PATH",
        value_name = "PATH",
        default_value = "/healthz"
    )]
    pub(crate) health_path: String,

    /// Bound on connecting to the upstream: past it a request is answered 504.
    #[arg(long, env = "MCP_FRAME_CONNECT_TIMEOUT", value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub(crate) connect_timeout: Duration,

    /// Bound on waiting for the upstream's response head: past it a request is answered 504.
    /// Servers that answer in JSON send their head when the tool has finished.
    #[arg(long, env = "MCP_FRAME_HEAD_TIMEOUT", value_name = "DURATION", default_value = "5m", value_parser = duration)]
    pub(crate) head_timeout: Duration,

    /// Bound on the silence of an upstream response body (no byte for this long ends it as an
    /// upstream failure), and on an idle client connection waiting for its next request head.
    #[arg(long, env = "MCP_FRAME_IDLE_TIMEOUT", value_name = "DURATION", default_value = "5m", value_parser = duration)]
    pub(crate) idle_timeout: Duration,

    /// The largest request body accepted (larger: 413).
    #[arg(
        long,
        env = "MCP_FRAME_MAX_REQUEST_BYTES",
        value_name = "BYTES",
        default_value = "4194304"
    )]
    pub(crate) max_request_bytes: usize,

    /// The largest message framed (a larger one ends a framed response with ABORT code 5).
    #[arg(
        long,
        env = "MCP_FRAME_MAX_MESSAGE_BYTES",
        value_name = "BYTES",
        default_value = "16777216"
    )]
    pub(crate) max_message_bytes: u64,

    /// Requests forwarded at once (open SSE streams included); more are answered 503 at once.
    #[arg(
        long,
        env = "MCP_FRAME_MAX_CONCURRENT",
        value_name = "N",
        default_value = "512"
    )]
    pub(crate) max_concurrent: usize,

    /// Worker threads, each serving the connections it accepts on an event loop of its own with
    /// its own upstream connections (as nginx's worker processes do); default: one a CPU core.
    #[arg(long, env = "MCP_FRAME_WORKERS", value_name = "N")]
    pub(crate) workers: Option<usize>,

    /// On SIGTERM or SIGINT: stop accepting, then give in-flight requests this long to finish.
    #[arg(long, env = "MCP_FRAME_SHUTDOWN_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub(crate) shutdown_timeout: Duration,

    /// Send the upstream its own address as `Host` instead of the client's. The upstream's
    /// DNS-rebinding check then no longer sees the client's `Host`: give --allowed-hosts.
    #[arg(long, env = "MCP_FRAME_REWRITE_HOST", value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub(crate) rewrite_host: bool,

    /// `Host` values the sidecar accepts (comma-separated; `name:*` for any port); others are
    /// answered 421. Default: any.
    #[arg(
        long,
        env = "MCP_FRAME_ALLOWED_HOSTS",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub(crate) allowed_hosts: Vec<String>,

    /// `Origin` values the sidecar accepts when a request carries one (comma-separated); others
    /// are answered 403. Default: any.
    #[arg(
        long,
        env = "MCP_FRAME_ALLOWED_ORIGINS",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub(crate) allowed_origins: Vec<String>,

    /// Log format: `text` or `json` (one object a line).
    #[arg(
        long,
        env = "MCP_FRAME_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    pub(crate) log_format: LogFormat,

    /// Log filter (`info`, `debug`, `mcp_framing=debug,info`, ...).
    #[arg(
        long,
        env = "MCP_FRAME_LOG",
        value_name = "FILTER",
        default_value = "info"
    )]
    pub(crate) log: String,
}

/// `--frame-all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FrameAll {
    /// Only requests that opted in.
    Off,
    /// Every POST response, in the compatible SSE mapping.
    Compat,
}

/// An on/off flag value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// The upstream, checked: where requests go.
#[derive(Clone, Debug)]
pub(crate) struct UpstreamUrl {
    /// The URL as given (for logs and error bodies).
    pub(crate) url: String,
    /// `host:port`.
    pub(crate) authority: Authority,
    /// The MCP endpoint's path.
    pub(crate) path: PathAndQuery,
}

impl UpstreamUrl {
    /// Reads `--upstream`: an absolute `http://` URL.
    pub(crate) fn parse(url: &str) -> Result<Self, CliError> {
        let usage = |why: &str| CliError::Usage(format!("--upstream {url}: {why}"));
        let uri: Uri = url.parse().map_err(|err| usage(&format!("{err}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(usage(
                    "https is not supported (the sidecar runs beside its server: plain HTTP on \
                     loopback or the pod network)",
                ));
            }
            _ => return Err(usage("not an http:// URL")),
        }
        let authority = uri.authority().cloned().ok_or_else(|| usage("no host"))?;
        if authority.as_str().contains('@') {
            return Err(usage("credentials in the URL are not supported"));
        }
        let path = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        Ok(Self {
            url: url.to_owned(),
            authority,
            path,
        })
    }

    /// `host:port` with the default port written out (for connecting).
    pub(crate) fn host_port(&self) -> String {
        let host = self.authority.host();
        let port = self.authority.port_u16().unwrap_or(80);
        if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    }
}

/// Reads a duration: a number and a unit (`ms`, `s`, `m`, `h`), e.g. `250ms`, `30s`, `5m`; a
/// bare number is seconds.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 250ms, 30s, 5m, 1h)"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        other => return Err(format!("unknown unit {other:?} (ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|err| format!("{text:?}: {err}"))
}

/// Whether `host` (a `Host` header) matches one of `allowed` (`name`, `name:port` or
/// `name:*`), compared without case.
pub(crate) fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let (name, _) = split_port(&host);
    allowed.iter().any(|pattern| {
        let pattern = pattern.trim().to_ascii_lowercase();
        match pattern.strip_suffix(":*") {
            Some(pattern_name) => pattern_name == name,
            None => pattern == host,
        }
    })
}

/// `host` without its port (an IPv6 literal keeps its brackets).
fn split_port(host: &str) -> (&str, Option<&str>) {
    if let Some(end) = host.rfind(']') {
        return match host[end + 1..].strip_prefix(':') {
            Some(port) => (&host[..=end], Some(port)),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(duration("5 fortnights").is_err());
        assert!(duration("").is_err());
    }

    #[test]
    fn hosts_match_by_name_and_port() {
        let allowed = ["localhost:*".to_owned(), "mcp.example.com".to_owned()];
        assert!(host_allowed("localhost:9000", &allowed));
        assert!(host_allowed("LOCALHOST", &allowed));
        assert!(host_allowed("mcp.example.com", &allowed));
        assert!(!host_allowed("mcp.example.com:8080", &allowed));
        assert!(!host_allowed("evil.example", &allowed));
        assert!(host_allowed("[::1]:9000", &["[::1]:*".to_owned()]));
    }

    #[test]
    fn the_upstream_is_a_plain_http_url() {
        let url = UpstreamUrl::parse("http://127.0.0.1:8000/mcp").unwrap();
        assert_eq!(url.host_port(), "127.0.0.1:8000");
        assert_eq!(url.path.as_str(), "/mcp");
        assert_eq!(
            UpstreamUrl::parse("http://localhost/").unwrap().host_port(),
            "localhost:80"
        );
        assert!(UpstreamUrl::parse("https://127.0.0.1/mcp").is_err());
        assert!(UpstreamUrl::parse("127.0.0.1:8000").is_err());
    }
}
