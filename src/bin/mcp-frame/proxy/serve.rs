//! The listener: connections served with hyper (HTTP/1.1, and HTTP/2 without TLS) by worker
//! threads, each an event loop of its own (a current-thread runtime) with its own upstream
//! connections, each request through the [`Edge`]; on SIGTERM or SIGINT the listener closes, the
//! health endpoint says `draining`, and in-flight requests get the shutdown bound to finish.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderValue;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use mcp_framing::dedupe::{Deduplicator, MemoryStore, RedisStore};
use mcp_framing::http::DedupeLayer;
use mcp_framing::rmcp_http::FramingLayer;
use tokio::net::TcpListener;

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
    // HTTP/1.1, and HTTP/2 without TLS, told apart by a connection's first bytes. Without
    // hyper's own bound on the wait for a request head (a timer made, registered and dropped
    // for every request): `Peer::idle` bounds a connection's idle time, the wait for its first
    // bytes included.
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
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
                let edge = edge.clone();
                let client = Arc::new(Peer::new(peer));
                let idle = client.clone();
                let service = service_fn(move |request| {
                    let (edge, client) = (edge.clone(), client.clone());
                    async move { Ok::<_, Infallible>(edge.handle(client, request).await) }
                });
                let connection = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .into_owned();
                let connection = graceful.watch(connection);
                let served = tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::debug!(%peer, "connection: {err}");
                    }
                });
                // The idle bound watches beside the connection: its timer is not polled at each
                // of the connection's wake-ups.
                let bound = settings.idle_timeout;
                tokio::spawn(async move {
                    let abort = served.abort_handle();
                    tokio::select! {
                        biased;
                        _ = served => {}
                        // Closed (dropped) at the bound: nothing is in flight on it.
                        () = idle.idle(bound) => {
                            abort.abort();
                            tracing::debug!(%peer, "connection: idle for {bound:?}, closed");
                        }
                    }
                });
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
