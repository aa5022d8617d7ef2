//! The fleet store: Redis or Valkey through the `redis` crate (feature `redis`, SPEC.md §17.12).

use std::time::Duration;

use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};

use super::fingerprint::Fingerprint;
use super::scope::StoreKey;
use super::store::{
    ClaimOutcome, ClaimRequest, Completed, DedupeStore, FencingToken, LeaseExpiry, StoreError,
    StoreFuture, StoredResponse,
};

/// Default key prefix of [`RedisStore`] records.
pub const DEFAULT_PREFIX: &str = "mcp-framing:dedupe:";

// A record is one hash, `{prefix}{store key in hex}`, with a TTL (PEXPIRE) on every write:
//   s  state: f in flight, r result stored, e error stored, n completed not stored, a abandoned
//   fp fingerprint (hex)      t  fencing token (hex, in flight only)
//   g  generation             l  lease deadline, ms of the server's clock (in flight only)
//   r  stored JSON text (r/e), or the size of the result not stored (n)
// Times come from the server's clock (TIME), so backends' clocks never matter. Every script
// touches one key (cluster-safe) and runs atomically.

const CLAIM: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local r = redis.call('HMGET', KEYS[1], 's', 'fp', 'g', 'l', 'r')
if not r[1] then
  redis.call('HSET', KEYS[1], 's', 'f', 'fp', ARGV[1], 't', ARGV[2], 'g', 1, 'l', now + lease)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {'claimed', 1}
end
if r[2] ~= ARGV[1] then return {'conflict', r[2]} end
if r[1] == 'f' then
  local left = tonumber(r[4]) - now
  if left > 0 then return {'in_flight', left} end
  if ARGV[5] == '1' then
    local g = tonumber(r[3]) + 1
    redis.call('HSET', KEYS[1], 't', ARGV[2], 'g', g, 'l', now + lease)
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return {'claimed', g}
  end
  redis.call('HSET', KEYS[1], 's', 'a')
  redis.call('HDEL', KEYS[1], 't', 'l')
  return {'abandoned'}
end
if r[1] == 'a' then return {'abandoned'} end
return {'done', r[1], r[5]}
";

const RENEW: &str = r"
local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'l', now + tonumber(ARGV[2]))
return 1
";

const COMPLETE: &str = r"
local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'r', ARGV[3])
redis.call('HDEL', KEYS[1], 't', 'l')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
";

const RELEASE: &str = r"
local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
";

/// A [`DedupeStore`] on Redis (5 or later) or Valkey, shared by every backend of a fleet.
///
/// Each record is one Redis hash with a TTL set on every write (the retention, reset at
/// completion), under a configurable prefix. Every operation is one Lua script on one key,
/// atomic on the server: the claim creates the record only if it is absent (or takes over an
/// expired lease), and renewal, completion and release compare the fencing token first. Lease
/// deadlines use the Redis server's clock, so backends' clocks never matter. The connection is
/// a `redis` [`ConnectionManager`] (reconnects by itself); each command times out after the
/// response timeout, and the [`Deduplicator`](super::Deduplicator) bounds every operation too.
///
/// # Examples
///
/// ```no_run
/// use mcp_framing::dedupe::{Deduplicator, RedisStore};
/// # async fn run() -> Result<(), mcp_framing::dedupe::StoreError> {
/// let store = RedisStore::builder("redis://127.0.0.1:6379/")
///     .prefix("billing-mcp:dedupe:")
///     .connect()
///     .await?;
/// let dedup = Deduplicator::new(store);
/// # let _ = dedup; Ok(()) }
/// # let _ = run;
/// ```
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    prefix: String,
    scripts: std::sync::Arc<Scripts>,
}

struct Scripts {
    claim: Script,
    renew: Script,
    complete: Script,
    release: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Configures and connects a [`RedisStore`].
///
/// # Examples
///
/// See [`RedisStore`].
#[derive(Clone, Debug)]
pub struct RedisStoreBuilder {
    url: String,
    prefix: String,
    response_timeout: Duration,
    connection_timeout: Duration,
    reconnect_attempts: usize,
}

impl RedisStoreBuilder {
    /// Sets the key prefix (default [`DEFAULT_PREFIX`]): give each deployment sharing a Redis
    /// its own.
    ///
    /// # Examples
    ///
    /// See [`RedisStore`].
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
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
    /// See [`response_timeout`](Self::response_timeout).
    #[must_use]
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Reconnection attempts after the connection broke, before a command fails (default 2).
    ///
    /// # Examples
    ///
    /// See [`response_timeout`](Self::response_timeout).
    #[must_use]
    pub fn reconnect_attempts(mut self, attempts: usize) -> Self {
        self.reconnect_attempts = attempts;
        self
    }

    /// Connects (the first connection is made now).
    ///
    /// # Errors
    ///
    /// [`StoreError::Redis`] for a malformed URL or a server that cannot be reached.
    ///
    /// # Examples
    ///
    /// See [`RedisStore`].
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(self.url.as_str())?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(self.response_timeout))
            .set_connection_timeout(Some(self.connection_timeout))
            .set_number_of_retries(self.reconnect_attempts)
            .set_max_delay(Duration::from_millis(200));
        let connection = ConnectionManager::new_with_config(client, config).await?;
        Ok(RedisStore::from_connection_manager(connection).prefix(self.prefix))
    }
}

impl RedisStore {
    /// A builder for a store at `url` (`redis://host:port/db`, `rediss://` with TLS support
    /// enabled in the `redis` crate).
    ///
    /// # Examples
    ///
    /// See [`RedisStore`].
    #[must_use]
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            response_timeout: Duration::from_secs(1),
            connection_timeout: Duration::from_secs(1),
            reconnect_attempts: 2,
        }
    }

    /// Connects to `url` with the builder's defaults.
    ///
    /// # Errors
    ///
    /// As [`RedisStoreBuilder::connect`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), mcp_framing::dedupe::StoreError> {
    /// let store = mcp_framing::dedupe::RedisStore::connect("redis://127.0.0.1:6379/").await?;
    /// # let _ = store; Ok(()) }
    /// # let _ = run;
    /// ```
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// A store over a connection manager configured by the caller.
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
        Self {
            connection,
            prefix: DEFAULT_PREFIX.to_owned(),
            scripts: std::sync::Arc::new(Scripts {
                claim: Script::new(CLAIM),
                renew: Script::new(RENEW),
                complete: Script::new(COMPLETE),
                release: Script::new(RELEASE),
            }),
        }
    }

    /// Sets the key prefix (default [`DEFAULT_PREFIX`]).
    ///
    /// # Examples
    ///
    /// See [`RedisStore`].
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The Redis key of a record.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run(store: mcp_framing::dedupe::RedisStore, key: mcp_framing::dedupe::StoreKey) {
    /// assert!(store.redis_key(&key).starts_with("mcp-framing:dedupe:"));
    /// # }
    /// # let _ = run;
    /// ```
    #[must_use]
    pub fn redis_key(&self, key: &StoreKey) -> String {
        format!("{}{key}", self.prefix)
    }

    async fn run_claim(
        &self,
        key: &StoreKey,
        request: &ClaimRequest,
    ) -> Result<ClaimOutcome, StoreError> {
        let mut connection = self.connection.clone();
        let takeover = match request.on_expired_lease {
            LeaseExpiry::Reexecute => "1",
            _ => "0",
        };
        let reply: Value = self
            .scripts
            .claim
            .key(self.redis_key(key))
            .arg(request.fingerprint.to_string())
            .arg(request.token.to_string())
            .arg(millis(request.lease))
            .arg(millis(request.retention))
            .arg(takeover)
            .invoke_async(&mut connection)
            .await?;
        parse_claim(reply)
    }

    async fn run_flag(
        &self,
        script: &Script,
        key: &StoreKey,
        args: &[Vec<u8>],
    ) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let mut invocation = script.key(self.redis_key(key));
        for arg in args {
            invocation.arg(arg.as_slice());
        }
        let reply: i64 = invocation.invoke_async(&mut connection).await?;
        Ok(reply == 1)
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
            let payload = text(field(2)?).ok_or_else(|| corrupt("stored result"))?;
            let completed = match state.as_slice() {
                b"r" => Completed::Stored(StoredResponse::Result(Bytes::from(payload))),
                b"e" => Completed::Stored(StoredResponse::Error(Bytes::from(payload))),
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
            let args = [
                token.to_string().into_bytes(),
                millis(lease).to_string().into_bytes(),
            ];
            self.run_flag(&self.scripts.renew, key, &args).await
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
            let (state, payload): (&[u8], Vec<u8>) = match outcome {
                Completed::Stored(StoredResponse::Result(json)) => (b"r", json.to_vec()),
                Completed::Stored(StoredResponse::Error(json)) => (b"e", json.to_vec()),
                Completed::NotStored { size } => (b"n", size.to_string().into_bytes()),
            };
            let args = [
                token.to_string().into_bytes(),
                state.to_vec(),
                payload,
                millis(retention).to_string().into_bytes(),
            ];
            self.run_flag(&self.scripts.complete, key, &args).await
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        token: FencingToken,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            self.run_flag(
                &self.scripts.release,
                key,
                &[token.to_string().into_bytes()],
            )
            .await
        })
    }
}
