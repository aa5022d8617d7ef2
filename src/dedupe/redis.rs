//! The fleet store: Redis or Valkey through the `redis` crate (feature `redis`, SPEC.md §17.12).

use std::time::Duration;

use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, Pipeline, RedisError, RedisResult, Script, ServerErrorKind, Value};

use super::fingerprint::Fingerprint;
use super::scope::StoreKey;
use super::store::{
    ClaimOutcome, ClaimRequest, Completed, DedupeStore, FencingToken, LeaseExpiry, StoreError,
    StoreFuture, StoredResponse,
};

/// Default key prefix of [`RedisStore`] records.
pub(crate) const DEFAULT_PREFIX: &str = "mcp-framing:dedupe:";

// The record format and the scripts are SPEC.md §17.12.1, shared by every implementation (the
// Python and TypeScript packages ship byte-identical copies of the scripts). A record is one
// hash, `{prefix}{store key in hex}`, with a TTL (PEXPIRE) on every write:
//   s  state: f in flight, r result stored, e error stored, n completed not stored, a abandoned
//   fp fingerprint (hex)      t  fencing token (hex; of the holder, or of the completer)
//   g  generation             l  lease deadline, ms of the server's clock (in flight only)
//   r  stored JSON text (r/e), or the size of the result not stored (n)
// Times come from the server's clock (TIME), so backends' clocks never matter. Every script
// touches one key (cluster-safe) and runs atomically. The completion script keeps the token in
// a completed record, so that a completion tried again after its answer was lost is answered 1
// (idempotent for its token).
const CLAIM: &str = include_str!("redis/claim.lua");
const RENEW: &str = include_str!("redis/renew.lua");
const COMPLETE: &str = include_str!("redis/complete.lua");
const RELEASE: &str = include_str!("redis/release.lua");

/// A [`DedupeStore`] on Redis (5 or later) or Valkey, shared by every backend of a fleet: one
/// server (with replicas or not), or a Redis Cluster.
///
/// Each record is one Redis hash with a TTL set on every write (the retention, reset at
/// completion), under a configurable prefix; in a cluster each record is one key, so it lives on
/// one slot. Every operation is one Lua script on one key, atomic on the server: the claim
/// creates the record only if it is absent (or takes over an expired lease), and renewal,
/// completion and release compare the fencing token first. Lease deadlines use the Redis
/// server's clock, so backends' clocks never matter. Each operation is one round trip (the
/// script by its SHA-1, `EVALSHA`; its text only when the server does not know it yet), and a
/// claim waited for by replicas two.
///
/// One server goes through a `redis` [`ConnectionManager`] (reconnects by itself); a cluster
/// through the `redis` crate's async [`ClusterConnection`] (follows `MOVED` and failovers). The
/// URL chooses (`redis+cluster://host:port,host:port/` is a cluster), or the builder
/// ([`RedisStoreBuilder::cluster`]). Each command times out after the response timeout, and the
/// [`Deduplicator`](super::Deduplicator) bounds every operation too.
///
/// **Durability** is Redis's (SPEC.md §17.12): a record lost between two attempts (a restart
/// without persistence, a failover to a replica that had not received it) makes the retry
/// execute again. AOF with `appendfsync always` keeps records across restarts;
/// [`wait_for_replicas`](RedisStoreBuilder::wait_for_replicas) makes a claim and a completion
/// wait for replicas (`WAIT`) before the call executes and before its result counts as recorded.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use mcp_framing::dedupe::{Deduplicator, RedisStore};
/// # async fn run() -> Result<(), mcp_framing::dedupe::StoreError> {
/// let store = RedisStore::builder("redis://127.0.0.1:6379/")
///     .prefix("billing-mcp:dedupe:")
///     .connect()
///     .await?;
/// // A cluster, every write acknowledged by one replica before it counts:
/// let cluster = RedisStore::builder("redis+cluster://10.0.0.1:6379,10.0.0.2:6379/")
///     .wait_for_replicas(1, Duration::from_millis(100))
///     .connect()
///     .await?;
/// let dedup = Deduplicator::new(store);
/// # let _ = (dedup, cluster); Ok(()) }
/// # let _ = run;
/// ```
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    prefix: String,
    replicas: Option<Replicas>,
    scripts: std::sync::Arc<Scripts>,
}

/// How the store reaches Redis.
#[derive(Clone)]
enum Connection {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

/// `WAIT numreplicas timeout` after every claim and completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Replicas {
    count: u32,
    timeout: Duration,
}

struct Scripts {
    claim: Lua,
    renew: Lua,
    complete: Lua,
    release: Lua,
}

/// A script's text and SHA-1.
struct Lua {
    code: String,
    sha1: String,
}

impl Lua {
    /// For a cluster, the script declares itself (Redis 7 `#!lua`, no `no-writes` flag) a
    /// write: a node that serves the slot only as a replica (a primary demoted by a failover
    /// that the client has not noticed yet) then redirects it with `MOVED`, which the cluster
    /// client follows and learns the new layout from. Without it, the `redis` crate's cluster
    /// connections (all in `READONLY` mode) would have the replica run the script and fail
    /// with `READONLY`, over and over.
    fn new(code: &'static str, cluster: bool) -> Self {
        let code = if cluster {
            format!("#!lua\n{code}")
        } else {
            code.to_owned()
        };
        let sha1 = Script::new(&code).get_hash().to_owned();
        Self { code, sha1 }
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let topology = match self.connection {
            Connection::Node(_) => "node",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore")
            .field("topology", &topology)
            .field("prefix", &self.prefix)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

/// Configures and connects a [`RedisStore`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use mcp_framing::dedupe::{RedisStore, StoreError};
///
/// let builder = RedisStore::builder("redis://10.0.0.1:6379,10.0.0.2:6379/")
///     .prefix("billing-mcp:dedupe:")
///     .response_timeout(Duration::from_millis(250));
/// # tokio_test::block_on(async {
/// // Several hosts name a cluster: without `redis+cluster://` or `.cluster()` the URL is refused
/// // before anything is sent.
/// let err = builder.clone().connect().await.unwrap_err();
/// assert!(matches!(err, StoreError::Redis(_)));
/// assert!(err.to_string().contains("cluster"));
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct RedisStoreBuilder {
    url: String,
    cluster: bool,
    prefix: String,
    response_timeout: Duration,
    connection_timeout: Duration,
    reconnect_attempts: usize,
    replicas: Option<Replicas>,
}

/// The URL scheme suffix that makes a URL name a cluster's nodes.
const CLUSTER_SCHEME: &str = "+cluster";

impl RedisStoreBuilder {
    /// Sets the key prefix (default `DEFAULT_PREFIX`): give each deployment sharing a Redis
    /// its own. In a cluster, keep braces out of it: a `{hash tag}` in the prefix would put
    /// every record on one slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::RedisStore;
    ///
    /// // Two deployments sharing one Redis, each under its own prefix (no braces: not a hash tag).
    /// let billing = RedisStore::builder("redis://cache.internal:6379/").prefix("billing-mcp:dedupe:");
    /// let search = RedisStore::builder("redis://cache.internal:6379/").prefix("search-mcp:dedupe:");
    /// assert!(format!("{billing:?}").contains(r#"prefix: "billing-mcp:dedupe:""#));
    /// # let _ = search;
    /// ```
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Connects to a Redis Cluster (default: what the URL says; a `redis+cluster://` or
    /// `rediss+cluster://` URL is a cluster). The URL's hosts (`host:port`, separated by commas)
    /// are the seed nodes: any one of them reachable is enough to learn the cluster's layout.
    ///
    /// # Examples
    ///
    /// ```
    /// let builder = mcp_framing::dedupe::RedisStore::builder("redis://10.0.0.1:6379,10.0.0.2:6379/")
    ///     .cluster();
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Waits, after every claim and every completion, until `count` replicas acknowledged the
    /// write (Redis `WAIT count timeout`) (default: no wait). A completion's `WAIT` goes in its
    /// round trip. A claim's goes only once the script claimed (so a replay or a refusal never
    /// waits on replicas), in a second round trip that renews the claim first: `WAIT` counts the
    /// writes made on its own connection, and the connection may have been replaced since the
    /// claim (a reconnect), so the renewal makes the write it counts, and makes it only while
    /// the claim is there. A claim that too few replicas acknowledged within `timeout` is given
    /// back and refused as [`StoreError::NotReplicated`] (the call does not execute; fail
    /// closed), and so is a claim whose `WAIT` failed (with that error); a claim the renewal
    /// finds gone (lost in a failover) is refused as [`StoreError::ClaimLost`]. A completion
    /// that too few acknowledged is reported with [`StoreError::NotReplicated`] (the result is on
    /// the primary, but a failover now could lose it).
    ///
    /// This narrows the writes a failover can lose to those no acknowledging replica was
    /// promoted with; as the Redis documentation says, `WAIT` does not make Redis strongly
    /// consistent (SPEC.md §17.12). `WAIT` holds the connection while it waits (later commands
    /// of the same backend queue behind it), about one round trip to the replicas; keep
    /// `timeout` well below the response timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = mcp_framing::dedupe::RedisStore::builder("redis://127.0.0.1/")
    ///     .wait_for_replicas(1, Duration::from_millis(100));
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn wait_for_replicas(mut self, count: u32, timeout: Duration) -> Self {
        self.replicas = (count > 0).then_some(Replicas { count, timeout });
        self
    }

    /// Time allowed for one command's answer (default 1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = mcp_framing::dedupe::RedisStore::builder("redis://127.0.0.1/")
    ///     .response_timeout(Duration::from_millis(500))
    ///     .connection_timeout(Duration::from_millis(500))
    ///     .reconnect_attempts(2);
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Time allowed for one connection attempt (default 1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::{RedisStore, StoreError};
    ///
    /// # tokio_test::block_on(async {
    /// // Nobody listens there: the connection fails within the time allowed, as an error.
    /// let err = RedisStore::builder("redis://127.0.0.1:1/")
    ///     .connection_timeout(Duration::from_millis(200))
    ///     .reconnect_attempts(0)
    ///     .connect()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(err, StoreError::Redis(_)));
    /// # });
    /// ```
    #[must_use]
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Reconnection attempts after the connection broke (a cluster: tries of a command,
    /// following redirections and failovers), before a command fails (default 2).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, RedisStore};
    ///
    /// # async fn run() -> Result<(), mcp_framing::dedupe::StoreError> {
    /// // Ride out a failover of a few hundred milliseconds: each command tries up to 5 reconnections
    /// // (waiting at most 200 ms between them) before the store counts as unavailable.
    /// let store = RedisStore::builder("redis://127.0.0.1:6379/").reconnect_attempts(5).connect().await?;
    /// let dedup = Deduplicator::new(store);
    /// # let _ = dedup; Ok(()) }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn reconnect_attempts(mut self, attempts: usize) -> Self {
        self.reconnect_attempts = attempts;
        self
    }

    /// Connects (the first connection is made now; for a cluster, to the seed nodes, and the
    /// cluster's layout is read).
    ///
    /// # Errors
    ///
    /// [`StoreError::Redis`] for a malformed URL or a server that cannot be reached.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{RedisStore, StoreError};
    ///
    /// # tokio_test::block_on(async {
    /// // A malformed URL is an error before any connection:
    /// let err = RedisStore::builder("cache.internal:6379").connect().await.unwrap_err();
    /// assert!(matches!(err, StoreError::Redis(_)));
    /// # });
    /// ```
    ///
    /// With a server (`no_run`: it needs one):
    ///
    /// ```no_run
    /// use mcp_framing::dedupe::{Deduplicator, RedisStore};
    /// # async fn run() -> Result<(), mcp_framing::dedupe::StoreError> {
    /// let store = RedisStore::builder("redis://127.0.0.1:6379/").connect().await?;
    /// let dedup = Deduplicator::new(store);
    /// # let _ = dedup; Ok(()) }
    /// # let _ = run;
    /// ```
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let (cluster, seeds) = seeds(&self.url)?;
        let connection = if cluster || self.cluster {
            let retries = u32::try_from(self.reconnect_attempts).unwrap_or(u32::MAX);
            let client = redis::cluster::ClusterClient::builder(seeds)
                .response_timeout(self.response_timeout)
                .connection_timeout(self.connection_timeout)
                .retries(retries)
                .min_retry_wait(10)
                .max_retry_wait(200)
                .build()?;
            Connection::Cluster(client.get_async_connection().await?)
        } else {
            let [url] = <[String; 1]>::try_from(seeds).map_err(|_| {
                RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "several hosts in a Redis URL name a cluster: use redis+cluster:// or .cluster()",
                ))
            })?;
            let client = redis::Client::open(url.as_str())?;
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(Some(self.response_timeout))
                .set_connection_timeout(Some(self.connection_timeout))
                .set_number_of_retries(self.reconnect_attempts)
                .set_max_delay(Duration::from_millis(200));
            Connection::Node(ConnectionManager::new_with_config(client, config).await?)
        };
        Ok(RedisStore::over(connection)
            .prefix(self.prefix)
            .with_replicas(self.replicas))
    }
}

/// The seed URLs a URL names, and whether its scheme says cluster: `scheme://[user@]h1,h2/rest`
/// becomes `scheme://[user@]h1/rest`, `scheme://[user@]h2/rest`.
fn seeds(url: &str) -> Result<(bool, Vec<String>), StoreError> {
    let malformed = |what: &'static str| RedisError::from((ErrorKind::InvalidClientConfig, what));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| malformed("a Redis URL starts with redis:// or rediss://"))?;
    let (scheme, cluster) = match scheme.strip_suffix(CLUSTER_SCHEME) {
        Some(scheme) => (scheme, true),
        None => (scheme, false),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (user, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), authority),
    };
    let seeds: Vec<String> = hosts
        .split(',')
        .filter(|host| !host.is_empty())
        .map(|host| format!("{scheme}://{user}{host}{path}"))
        .collect();
    if seeds.is_empty() {
        return Err(malformed("a Redis URL names no host").into());
    }
    Ok((cluster, seeds))
}

impl Scripts {
    fn new(cluster: bool) -> Self {
        Self {
            claim: Lua::new(CLAIM, cluster),
            renew: Lua::new(RENEW, cluster),
            complete: Lua::new(COMPLETE, cluster),
            release: Lua::new(RELEASE, cluster),
        }
    }
}

impl RedisStore {
    /// A builder for a store at `url`: `redis://host:port/db` (one server), `rediss://` with
    /// TLS support enabled in the `redis` crate, `redis+cluster://host:port,host:port/` (a
    /// cluster, by its seed nodes; also `rediss+cluster://`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::dedupe::RedisStore;
    ///
    /// let single = RedisStore::builder("redis://127.0.0.1:6379/0");
    /// let cluster = RedisStore::builder("redis+cluster://10.0.0.1:6379,10.0.0.2:6379/")
    ///     .connection_timeout(Duration::from_millis(500));
    /// # let _ = (single, cluster);
    /// ```
    #[must_use]
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            cluster: false,
            prefix: DEFAULT_PREFIX.to_owned(),
            response_timeout: Duration::from_secs(1),
            connection_timeout: Duration::from_secs(1),
            reconnect_attempts: 2,
            replicas: None,
        }
    }

    /// A store over a connection manager configured by the caller (one server).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let manager = redis::aio::ConnectionManager::new(client).await?;
    /// let store = mcp_framing::dedupe::RedisStore::from_connection_manager(manager);
    /// # let _ = store; Ok(()) }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn from_connection_manager(connection: ConnectionManager) -> Self {
        Self::over(Connection::Node(connection))
    }

    /// A store over a cluster connection configured by the caller.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// let client = redis::cluster::ClusterClient::new(vec!["redis://127.0.0.1:7000/"])?;
    /// let connection = client.get_async_connection().await?;
    /// let store = mcp_framing::dedupe::RedisStore::from_cluster_connection(connection);
    /// # let _ = store; Ok(()) }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn from_cluster_connection(connection: ClusterConnection) -> Self {
        Self::over(Connection::Cluster(connection))
    }

    fn over(connection: Connection) -> Self {
        let cluster = matches!(connection, Connection::Cluster(_));
        Self {
            connection,
            prefix: DEFAULT_PREFIX.to_owned(),
            replicas: None,
            scripts: std::sync::Arc::new(Scripts::new(cluster)),
        }
    }

    fn with_replicas(mut self, replicas: Option<Replicas>) -> Self {
        self.replicas = replicas;
        self
    }

    /// Sets the key prefix (default `DEFAULT_PREFIX`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use mcp_framing::dedupe::RedisStore;
    /// # async fn run() -> redis::RedisResult<()> {
    /// // A store over the application's own connection manager, under this deployment's prefix.
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let manager = redis::aio::ConnectionManager::new(client).await?;
    /// let store = RedisStore::from_connection_manager(manager).prefix("billing-mcp:dedupe:");
    /// assert!(format!("{store:?}").contains("billing-mcp:dedupe:"));
    /// # Ok(()) }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Waits for `count` replicas after every claim and completion, as
    /// [`RedisStoreBuilder::wait_for_replicas`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(store: mcp_framing::dedupe::RedisStore) {
    /// let store = store.wait_for_replicas(1, std::time::Duration::from_millis(100));
    /// # let _ = store; }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn wait_for_replicas(self, count: u32, timeout: Duration) -> Self {
        self.with_replicas((count > 0).then_some(Replicas { count, timeout }))
    }

    /// Whether the store talks to a Redis Cluster.
    // The tests check what `RedisStoreBuilder::cluster` chose.
    #[cfg(test)]
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.connection, Connection::Cluster(_))
    }

    /// The Redis key of a record.
    #[must_use]
    pub(crate) fn redis_key(&self, key: &StoreKey) -> String {
        format!("{}{key}", self.prefix)
    }

    /// One bare `PING` round trip over the store's connection (to one of the nodes, in a
    /// cluster): the unit the store's costs are measured in (`scripts/bench-dedupe`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Redis`] if the server cannot be reached.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(store: mcp_framing::dedupe::RedisStore) {
    /// store.ping().await.expect("reachable");
    /// # }
    /// # let _ = run;
    /// ```
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("PING");
        self.query(&pipe).await?;
        Ok(())
    }

    async fn query(&self, pipe: &Pipeline) -> RedisResult<Vec<Value>> {
        match &self.connection {
            Connection::Node(connection) => pipe.query_async(&mut connection.clone()).await,
            Connection::Cluster(connection) => pipe.query_async(&mut connection.clone()).await,
        }
    }

    /// Runs `script` on `key` with `args` in one round trip (by its SHA-1; again with its text
    /// if the server does not know it), followed by `WAIT` when `wait` and replicas are
    /// configured. Returns the script's reply and the replicas that acknowledged. `WAIT` names
    /// no key: a cluster sends the pipeline to the node of the script's key (the one that took
    /// the script's write), and both commands go over one connection.
    async fn eval(
        &self,
        script: &Lua,
        key: &str,
        args: &[&[u8]],
        wait: bool,
    ) -> Result<(Value, Option<u64>), StoreError> {
        let replicas = self.replicas.filter(|_| wait);
        let pipeline = |with_text: bool| {
            let mut pipe = redis::pipe();
            let command = if with_text {
                pipe.cmd("EVAL").arg(&script.code)
            } else {
                pipe.cmd("EVALSHA").arg(&script.sha1)
            };
            command.arg(1).arg(key);
            for arg in args {
                command.arg(*arg);
            }
            if let Some(replicas) = replicas {
                pipe.cmd("WAIT")
                    .arg(replicas.count)
                    .arg(millis(replicas.timeout));
            }
            pipe
        };
        let replies = match self.query(&pipeline(false)).await {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.query(&pipeline(true)).await?
            }
            other => other?,
        };
        let mut replies = replies.into_iter();
        let reply = replies
            .next()
            .ok_or_else(|| corrupt("no reply to the script"))?;
        let acknowledged = match replicas {
            Some(_) => Some(
                replies
                    .next()
                    .as_ref()
                    .and_then(number)
                    .ok_or_else(|| corrupt("no reply to WAIT"))?,
            ),
            None => None,
        };
        Ok((reply, acknowledged))
    }

    /// `Err(NotReplicated)` when fewer replicas than configured acknowledged.
    fn replicated(&self, acknowledged: Option<u64>) -> Result<(), StoreError> {
        match (self.replicas, acknowledged) {
            (Some(replicas), Some(acknowledged)) if acknowledged < u64::from(replicas.count) => {
                Err(StoreError::NotReplicated {
                    acknowledged,
                    required: u64::from(replicas.count),
                    within: replicas.timeout,
                })
            }
            _ => Ok(()),
        }
    }

    async fn run_claim(
        &self,
        key: &StoreKey,
        request: &ClaimRequest,
    ) -> Result<ClaimOutcome, StoreError> {
        let takeover: &[u8] = match request.on_expired_lease {
            LeaseExpiry::Reexecute => b"1",
            _ => b"0",
        };
        let redis_key = self.redis_key(key);
        let (fingerprint, token) = (request.fingerprint.to_string(), request.token.to_string());
        let (lease, retention) = (
            millis(request.lease).to_string(),
            millis(request.retention).to_string(),
        );
        let args: [&[u8]; 5] = [
            fingerprint.as_bytes(),
            token.as_bytes(),
            lease.as_bytes(),
            retention.as_bytes(),
            takeover,
        ];
        // Only a claim is waited for: the script's other answers (a replay, a refusal) wrote
        // nothing worth waiting for, and behind a primary that lost its replicas a `WAIT` sent
        // with them would hold every replay for the whole timeout. So `WAIT` goes in a round trip
        // of its own, after the script claimed.
        let (reply, _) = self
            .eval(&self.scripts.claim, &redis_key, &args, false)
            .await?;
        let outcome = parse_claim(reply)?;
        if matches!(outcome, ClaimOutcome::Claimed { .. }) && self.replicas.is_some() {
            self.confirm_claim(key, &token, &lease).await?;
        }
        Ok(outcome)
    }

    /// Waits for the configured replicas after a claim that claimed (SPEC.md §17.12.1,
    /// "Replicas"), in one round trip: the renewal script with the claim's token and lease, then
    /// `WAIT`. `WAIT` counts the writes made on its own connection, and the shared connection may
    /// have been replaced since the claim (a reconnect, a cluster that followed a failover): a
    /// bare `WAIT` there would count replicas that acknowledged nothing. The renewal writes on
    /// the `WAIT`'s connection, and only while the claim with this token is in flight, so the
    /// replicas `WAIT` counts have the renewal and, before it in the replication stream, the claim.
    ///
    /// A renewal that replies 0 finds the claim gone (lost in a failover to a replica that had
    /// not received it, or removed): [`StoreError::ClaimLost`]. Too few acknowledgements, or a
    /// round trip that failed: the claim is given back (best effort; else it expires with its
    /// lease) and the error returned. Either way the call does not execute (fail closed), and a
    /// retry claims again instead of meeting a claim whose call never ran.
    async fn confirm_claim(
        &self,
        key: &StoreKey,
        token: &str,
        lease: &str,
    ) -> Result<(), StoreError> {
        let args: [&[u8]; 2] = [token.as_bytes(), lease.as_bytes()];
        match self.run_flag(&self.scripts.renew, key, &args, true).await {
            Ok(true) => Ok(()),
            // Not in flight with this token: nothing to give back (a release checks the same).
            Ok(false) => Err(StoreError::ClaimLost),
            Err(err) => {
                let _ = self
                    .run_flag(&self.scripts.release, key, &[token.as_bytes()], false)
                    .await;
                Err(err)
            }
        }
    }

    async fn run_flag(
        &self,
        script: &Lua,
        key: &StoreKey,
        args: &[&[u8]],
        wait: bool,
    ) -> Result<bool, StoreError> {
        let (reply, acknowledged) = self.eval(script, &self.redis_key(key), args, wait).await?;
        let done = number(&reply).ok_or_else(|| corrupt("script reply is not a number"))? == 1;
        if done {
            self.replicated(acknowledged)?;
        }
        Ok(done)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

fn corrupt(reason: &str) -> StoreError {
    StoreError::Corrupt {
        reason: reason.to_owned(),
    }
}

fn text(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(bytes) => Some(bytes.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(i) => u64::try_from(*i).ok(),
        other => std::str::from_utf8(&text(other)?).ok()?.parse().ok(),
    }
}

fn parse_fingerprint(value: &Value) -> Option<Fingerprint> {
    let text = text(value)?;
    if text.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        bytes[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(Fingerprint::from_bytes(bytes))
}

fn parse_claim(reply: Value) -> Result<ClaimOutcome, StoreError> {
    let Value::Array(items) = reply else {
        return Err(corrupt("claim reply is not an array"));
    };
    let tag = items.first().and_then(text).unwrap_or_default();
    let field = |i: usize| items.get(i).ok_or_else(|| corrupt("claim reply too short"));
    match tag.as_slice() {
        b"claimed" => Ok(ClaimOutcome::Claimed {
            generation: number(field(1)?).ok_or_else(|| corrupt("generation"))?,
        }),
        b"conflict" => Ok(ClaimOutcome::Conflict {
            stored: parse_fingerprint(field(1)?).ok_or_else(|| corrupt("fingerprint"))?,
        }),
        b"in_flight" => Ok(ClaimOutcome::InFlight {
            lease_remaining: Duration::from_millis(
                number(field(1)?).ok_or_else(|| corrupt("lease"))?,
            ),
        }),
        b"abandoned" => Ok(ClaimOutcome::Abandoned),
        b"done" => {
            let state = text(field(1)?).unwrap_or_default();
            // The stored text moves into the outcome, uncopied.
            let payload = match items.into_iter().nth(2) {
                Some(Value::BulkString(bytes)) => Bytes::from(bytes),
                Some(other) => Bytes::from(text(&other).ok_or_else(|| corrupt("stored result"))?),
                None => return Err(corrupt("claim reply too short")),
            };
            let completed = match state.as_slice() {
                b"r" => Completed::Stored(StoredResponse::Result(payload)),
                b"e" => Completed::Stored(StoredResponse::Error(payload)),
                b"n" => Completed::NotStored {
                    size: std::str::from_utf8(&payload)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| corrupt("size"))?,
                },
                _ => return Err(corrupt("unknown record state")),
            };
            Ok(ClaimOutcome::Completed(completed))
        }
        _ => Err(corrupt("unknown claim reply")),
    }
}

impl DedupeStore for RedisStore {
    fn claim<'a>(
        &'a self,
        key: &'a StoreKey,
        request: &'a ClaimRequest,
    ) -> StoreFuture<'a, Result<ClaimOutcome, StoreError>> {
        Box::pin(self.run_claim(key, request))
    }

    fn renew<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        lease: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let (token, lease) = (token.to_string(), millis(lease).to_string());
            let args: [&[u8]; 2] = [token.as_bytes(), lease.as_bytes()];
            self.run_flag(&self.scripts.renew, key, &args, false).await
        })
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
        outcome: &'a Completed,
        retention: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let size;
            let (state, payload): (&[u8], &[u8]) = match outcome {
                Completed::Stored(StoredResponse::Result(json)) => (b"r", json),
                Completed::Stored(StoredResponse::Error(json)) => (b"e", json),
                Completed::NotStored { size: n } => {
                    size = n.to_string();
                    (b"n", size.as_bytes())
                }
            };
            let (token, retention) = (token.to_string(), millis(retention).to_string());
            let args: [&[u8]; 4] = [token.as_bytes(), state, payload, retention.as_bytes()];
            self.run_flag(&self.scripts.complete, key, &args, true)
                .await
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let token = token.to_string();
            self.run_flag(&self.scripts.release, key, &[token.as_bytes()], false)
                .await
        })
    }
}

#[cfg(test)]
mod tests;
