//! The listener: connections served with hyper (HTTP/1.1, and HTTP/2 without TLS) by worker
//! threads, each an event loop of its own (a current-thread runtime) with its own upstream
//! connections, each request through the [`Edge`]; on SIGTERM or SIGINT the listener closes, the
//! health endpoint says `draining`, and in-flight requests get the shutdown bound to finish.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{self, GracefulShutdown};
use mcp_framing::dedupe::{Deduplicator, MemoryStore, RedisStore};
use mcp_framing::http::DedupeLayer;
use mcp_framing::rmcp_http::FramingLayer;
use tokio::net::{TcpListener, TcpStream};

use super::config::{FrameAll, ProxyArgs, Switch, UpstreamUrl};
use super::edge::{Edge, Layers, Peer};
use super::health::{Health, Store};
use super::telemetry;
use super::upstream::{Upstream, UpstreamConfig};
use crate::CliError;

/// Serves until a shutdown signal; `Ok(0)` once the connections closed or the bound passed.
pub(super) async fn run(args: &ProxyArgs) -> Result<u8, CliError> {
    let target = UpstreamUrl::parse(&args.upstream)?;
    if args.redis.is_some() && args.dedupe == Switch::Off {
        return Err(CliError::Usage(
            "--redis needs deduplication on (--dedupe on)".to_owned(),
        ));
    }
    if args.max_concurrent == 0 {
        return Err(CliError::Usage(
            "--max-concurrent must be at least 1".to_owned(),
        ));
    }
    if let Some(addr) = args.metrics {
        telemetry::metrics(addr)?;
    }
    let upstream = UpstreamConfig {
        target: target.clone(),
        connect_timeout: args.connect_timeout,
        head_timeout: args.head_timeout,
        idle_timeout: args.idle_timeout,
    };
    let framing = FramingLayer::new()
        .frame_all_responses(args.frame_all == FrameAll::Compat)
        .max_message_size(args.max_message_bytes);
    let (layers, store) = match args.dedupe {
        Switch::Off => (Layers::Plain(framing), Store::Off),
        Switch::On => {
            let (dedup, store) = match &args.redis {
                None => (Deduplicator::new(MemoryStore::new()), Store::Memory),
                Some(url) => {
                    let mut builder = RedisStore::builder(url.clone());
                    if let Some(prefix) = &args.redis_prefix {
                        builder = builder.prefix(prefix.clone());
                    }
                    // The URL may hold a password: the error names the flag, not the URL.
                    let store = builder
                        .connect()
                        .await
                        .map_err(|err| CliError::Usage(format!("--redis: {err}")))?;
                    (Deduplicator::new(store.clone()), Store::Redis(store))
                }
            };
            let dedup = match args.dedupe_window {
                Some(window) => dedup.window(window),
                None => dedup,
            };
            let dedupe = DedupeLayer::new(dedup).max_request_bytes(args.max_request_bytes);
            (Layers::Deduped(framing.dedupe(dedupe)), store)
        }
    };
    let workers = args.workers.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if workers == 0 {
        return Err(CliError::Usage("--workers must be at least 1".to_owned()));
    }
    let draining = Arc::new(AtomicBool::new(false));
    let rewrite_host = if args.rewrite_host {
        let authority = HeaderValue::from_str(target.authority.as_str())
            .map_err(|err| CliError::Usage(format!("--upstream: {err}")))?;
        Some(authority)
    } else {
        None
    };
    let edge = Edge {
        stack: layers.around(Upstream::new(upstream.clone())),
        health: Health {
            upstream: target.host_port(),
            timeout: args.connect_timeout,
            store,
            draining: draining.clone(),
        },
        health_path: args.health_path.clone(),
        limit: Arc::new(tokio::sync::Semaphore::new(args.max_concurrent)),
        max_request_bytes: args.max_request_bytes,
        idle_timeout: args.idle_timeout,
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        rewrite_host,
        metrics: args.metrics.is_some(),
    };
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|err| CliError::io(format!("listen on {}", args.listen), err))?;
    let local = listener
        .local_addr()
        .map_err(|err| CliError::io("listener address", err))?;
    let listener = listener
        .into_std()
        .map_err(|err| CliError::io("listener", err))?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let settings = Settings {
        idle_timeout: args.idle_timeout,
        shutdown_timeout: args.shutdown_timeout,
    };
    // This thread is worker 0: it also drives what the others share (the signal handler, the
    // Prometheus endpoint, the Redis connection), so it returns only after the others ended.
    let mut others = Vec::with_capacity(workers - 1);
    for index in 1..workers {
        let listener = listener
            .try_clone()
            .map_err(|err| CliError::io("listener", err))?;
        let runtime = super::runtime()?;
        let (edge, layers, upstream, stopped) = (
            edge.clone(),
            layers.clone(),
            upstream.clone(),
            stopped.clone(),
        );
        let (ended, end) = tokio::sync::oneshot::channel::<bool>();
        std::thread::Builder::new()
            .name(format!("mcp-frame-worker-{index}"))
            .spawn(move || {
                let closed = runtime.block_on(async move {
                    // Its own upstream connections, driven on this thread.
                    let edge = Edge {
                        stack: layers.around(Upstream::new(upstream)),
                        ..edge
                    };
                    match TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, edge, settings, stopped).await,
                        Err(err) => {
                            tracing::error!("worker {index}: listener: {err}");
                            true
                        }
                    }
                });
                let _ = ended.send(closed);
            })
            .map_err(|err| CliError::io("start a worker thread", err))?;
        others.push(end);
    }
    let listener = TcpListener::from_std(listener).map_err(|err| CliError::io("listener", err))?;
    tracing::info!(
        upstream = %target.url,
        frame_all = ?args.frame_all,
        dedupe = ?edge.health.store,
        workers,
        "listening on http://{local}"
    );
    let signal = async {
        shutdown_signal().await;
        draining.store(true, Ordering::Release);
        tracing::info!(
            "shutting down: no new connections, {:?} for the requests in flight",
            args.shutdown_timeout
        );
        let _ = stop.send(true);
    };
    let (mut closed, ()) = tokio::join!(serve(listener, edge, settings, stopped), signal);
    for end in others {
        // A worker that panicked dropped its sender: its connections are gone.
        closed &= end.await.unwrap_or(false);
    }
    if closed {
        tracing::info!("every connection closed");
    } else {
        tracing::warn!("shutdown bound passed: the connections still open are closed");
    }
    Ok(0)
}

/// What each worker's loop needs of the flags.
#[derive(Clone, Copy, Debug)]
struct Settings {
    idle_timeout: Duration,
    shutdown_timeout: Duration,
}

/// One worker's loop: accepts connections on `listener` (shared by every worker: the kernel
/// hands each connection to one) and serves them on this thread's runtime until `stopped`
/// turns true; then closes its listener and gives the connections in flight the shutdown bound.
/// `true` when they all closed within it.
async fn serve(
    listener: TcpListener,
    edge: Edge,
    settings: Settings,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> bool {
    let edge = Arc::new(edge);
    let servers = Arc::new(Servers::new());
    let graceful = GracefulShutdown::new();
    // What the connections still waiting for their first bytes watch.
    let stopping = stopped.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: the listener stays.
                        tracing::warn!("accept: {err}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let connection = Connection {
                    stream,
                    peer,
                    edge: edge.clone(),
                    servers: servers.clone(),
                    idle_timeout: settings.idle_timeout,
                };
                tokio::spawn(connection.serve(graceful.watcher(), stopping.clone()));
            }
            // A closed channel (worker 0 gone) stops as well.
            _ = stopped.wait_for(|stop| *stop) => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => true,
        () = tokio::time::sleep(settings.shutdown_timeout) => false,
    }
}

/// HTTP/2's connection preface (RFC 9113 §3.4): what a client speaking HTTP/2 without TLS
/// (prior knowledge) sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The HTTP servers a worker's connections are served with: HTTP/1.1 alone for a connection
/// whose first bytes are not HTTP/2's preface, and hyper-util's detecting server (HTTP/1.1 or
/// HTTP/2) for one whose first bytes could still be.
struct Servers {
    http1: http1::Builder,
    any: auto::Builder<TokioExecutor>,
}

impl Servers {
    /// Without hyper's own bound on the wait for a request head (a timer made, registered and
    /// dropped for every request): [`Peer::idle`] bounds a connection's idle time.
    fn new() -> Self {
        Self {
            http1: http1::Builder::new(),
            any: auto::Builder::new(TokioExecutor::new()),
        }
    }
}

/// An accepted client connection.
struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    edge: Arc<Edge>,
    servers: Arc<Servers>,
    idle_timeout: Duration,
}

impl Connection {
    /// Serves the connection until it closes (or, once `stopped`, its requests in flight end).
    ///
    /// Its first bytes are peeked at (left in the socket): when they already differ from
    /// HTTP/2's preface, as an HTTP/1.1 request's do, the connection goes to the HTTP/1.1 server
    /// as it is; otherwise to the detecting server, which reads and replays them. The detecting
    /// server wraps the connection for its whole life (a check at every read), so HTTP/1.1
    /// clients, nearly all of them, do not pay for HTTP/2's support. A connection that sends
    /// nothing within the idle bound is closed.
    async fn serve(
        self,
        watcher: graceful::Watcher,
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        let Self {
            stream,
            peer,
            edge,
            servers,
            idle_timeout,
        } = self;
        let mut first = [0u8; H2_PREFACE.len()];
        let peeked = tokio::select! {
            peeked = tokio::time::timeout(idle_timeout, stream.peek(&mut first)) => peeked,
            // Nothing to finish on a connection without a request: closed now.
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        let read = match peeked {
            Ok(Ok(read)) if read > 0 => read,
            Ok(Ok(_)) => return,
            Ok(Err(err)) => {
                tracing::debug!(%peer, "connection: {err}");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "connection: no request within {idle_timeout:?}");
                return;
            }
        };
        let client = Arc::new(Peer::new(peer));
        let idle = client.clone();
        let service = service_fn(move |request| {
            let (edge, client) = (edge.clone(), client.clone());
            async move { Ok::<_, Infallible>(edge.handle(client, request).await) }
        });
        let io = TokioIo::new(stream);
        let served = async {
            if first[..read] == H2_PREFACE[..read] {
                watcher
                    .watch(servers.any.serve_connection(io, service))
                    .await
            } else {
                watcher
                    .watch(servers.http1.serve_connection(io, service))
                    .await
                    .map_err(Into::into)
            }
        };
        tokio::select! {
            served = served => {
                if let Err(err) = served {
                    tracing::debug!(%peer, "connection: {err}");
                }
            }
            // Closed (dropped) at the bound: nothing is in flight on it.
            () = idle.idle(idle_timeout) => {
                tracing::debug!(%peer, "connection: idle for {idle_timeout:?}, closed");
            }
        }
    }
}

/// SIGTERM or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    () = interrupt => {}
                }
            }
            Err(_) => interrupt.await,
        }
    }
    #[cfg(not(unix))]
    interrupt.await;
}
