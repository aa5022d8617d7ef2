//! The sidecar's logs (`tracing`, text or JSON) and its Prometheus endpoint (the `metrics`
//! ecosystem's exporter: the crate's metric names, and the sidecar's own).

use std::net::SocketAddr;

use metrics_exporter_prometheus::PrometheusBuilder;
use tracing_subscriber::EnvFilter;

use super::config::LogFormat;
use super::edge::{IN_FLIGHT, REJECTIONS, REQUESTS};
use super::upstream::UPSTREAM_FAILURES;
use crate::CliError;

/// Installs the log subscriber: `filter` as `RUST_LOG` reads, lines on stderr.
pub(crate) fn logs(format: LogFormat, filter: &str) -> Result<(), CliError> {
    let filter = EnvFilter::try_new(filter)
        .map_err(|err| CliError::Usage(format!("--log {filter}: {err}")))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|err| CliError::Usage(format!("logging: {err}")))
}

/// Serves Prometheus metrics at `http://addr/metrics` (inside the runtime) and describes the
/// metrics: the crate's and the sidecar's.
pub(crate) fn metrics(addr: SocketAddr) -> Result<(), CliError> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .map_err(|err| CliError::Usage(format!("--metrics {addr}: {err}")))?;
    mcp_framing::telemetry::describe();
    metrics::describe_counter!(REQUESTS, "Requests answered, by method and status");
    metrics::describe_counter!(
        REJECTIONS,
        "Requests refused by the sidecar itself, by reason (host, origin, size, overload)"
    );
    metrics::describe_counter!(
        UPSTREAM_FAILURES,
        "Upstream calls that got no response head, by cause"
    );
    metrics::describe_gauge!(IN_FLIGHT, "Requests forwarded whose response has not ended");
    Ok(())
}
