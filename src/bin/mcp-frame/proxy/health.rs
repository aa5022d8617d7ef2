//! The health endpoint: whether the upstream accepts a connection and the deduplication store
//! answers, and whether the sidecar is shutting down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use mcp_framing::dedupe::RedisStore;
use serde_json::json;

use super::upstream::ResponseBody;

/// The deduplication store, as the health endpoint checks it.
#[derive(Clone)]
pub(crate) enum Store {
    /// Deduplication is off.
    Off,
    /// The in-process store (always answers).
    Memory,
    /// Redis or Valkey: a `PING` must answer.
    Redis(RedisStore),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

impl Store {
    fn kind(&self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Memory => "memory",
            Self::Redis(_) => "redis",
        }
    }
}

/// What `GET /healthz` checks.
#[derive(Clone, Debug)]
pub(crate) struct Health {
    /// The upstream's `host:port`.
    pub(crate) upstream: String,
    /// Bound on each check.
    pub(crate) timeout: Duration,
    pub(crate) store: Store,
    /// Set once shutdown began.
    pub(crate) draining: Arc<AtomicBool>,
}

impl Health {
    /// `200` with a JSON report when the upstream accepts a connection, the store answers and
    /// the sidecar is not shutting down; `503` with the same report otherwise.
    pub(crate) async fn respond(&self) -> Response<ResponseBody> {
        let upstream = tokio::time::timeout(
            self.timeout,
            tokio::net::TcpStream::connect(self.upstream.as_str()),
        )
        .await;
        let upstream_error = match upstream {
            Ok(Ok(_)) => None,
            Ok(Err(err)) => Some(err.to_string()),
            Err(_) => Some(format!("no connection within {:?}", self.timeout)),
        };
        let store_error = match &self.store {
            Store::Off | Store::Memory => None,
            Store::Redis(store) => match tokio::time::timeout(self.timeout, store.ping()).await {
                Ok(Ok(())) => None,
                Ok(Err(err)) => Some(err.to_string()),
                Err(_) => Some(format!("no answer within {:?}", self.timeout)),
            },
        };
        let draining = self.draining.load(Ordering::Acquire);
        let ok = upstream_error.is_none() && store_error.is_none() && !draining;
        let status = if draining {
            "draining"
        } else if ok {
            "ok"
        } else {
            "unavailable"
        };
        let report = json!({
            "status": status,
            "upstream": {"address": self.upstream, "reachable": upstream_error.is_none(), "error": upstream_error},
            "store": {"kind": self.store.kind(), "ok": store_error.is_none(), "error": store_error},
        });
        Response::builder()
            .status(if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            })
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-store")
            .body(
                Full::new(Bytes::from(report.to_string()))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .expect("a valid response")
    }
}
