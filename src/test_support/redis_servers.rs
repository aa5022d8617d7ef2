//! Real `redis-server` processes for the deduplication tests, benches and the soak: one server
//! on a free loopback port (with or without persistence, stopped, restarted, paused), and a
//! Redis Cluster of such servers. Nothing skips: a missing `redis-server` or `redis-cli` fails
//! with the reason (`scripts/test` installs them with apt-get; `REDIS_SERVER` and `REDIS_CLI`
//! name other binaries).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a server keeps its data across a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// None (`--save "" --appendonly no`): a restart starts empty.
    None,
    /// AOF with `appendfsync always`: every write is on disk before it is acknowledged.
    AofAlways,
}

/// A `redis-server` on a free loopback port, owned by the test: killed on drop, or earlier with
/// [`RedisServer::stop`] (SIGKILL: an outage, not a shutdown), restarted on the same port and
/// directory with [`RedisServer::restart`].
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    /// Whether the directory is the server's own (removed on drop).
    owns_dir: bool,
}

fn binary(variable: &str, default: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| default.to_owned())
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A directory of its own for one server (a counter, not a port: two servers sharing one would
/// share a cluster's `nodes.conf`, and the first one removed would take the other's with it).
fn scratch_dir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "mcp-framing-redis-{}-{name}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory for redis-server");
    dir
}

/// The last lines of a server's log, for a failure message.
fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl RedisServer {
    /// A server without persistence.
    pub fn start() -> Self {
        Self::start_with(Persistence::None, &[])
    }

    /// A server with `persistence` and extra configuration (`["--cluster-enabled", "yes"]`).
    pub fn start_with(persistence: Persistence, extra: &[&str]) -> Self {
        let mut args: Vec<String> = match persistence {
            Persistence::None => vec!["--save", "", "--appendonly", "no"],
            Persistence::AofAlways => vec![
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
        }
        .into_iter()
        .map(str::to_owned)
        .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        for _ in 0..5 {
            let mut server = Self {
                child: None,
                port: free_port(),
                dir: scratch_dir("node"),
                args: args.clone(),
                owns_dir: true,
            };
            if server.spawn() {
                return server;
            }
            server.stop(); // the port was taken in between: try another
        }
        panic!("redis-server did not start on a loopback port");
    }

    /// A replica of `primary` (without persistence), once it acknowledges `primary`'s writes:
    /// a write and a `WAIT` for one replica on one connection came back with 1.
    pub fn start_replica_of(primary: &Self) -> Self {
        // The first synchronisation at once (Redis waits 5 s by default for more replicas).
        let _: () = primary.command(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
        let port = primary.port().to_string();
        let replica = Self::start_with(Persistence::None, &["--replicaof", "127.0.0.1", &port]);
        let acknowledged: Vec<i64> = redis::pipe()
            .cmd("SET")
            .arg("replica-ready")
            .arg(1)
            .ignore()
            .cmd("DEL")
            .arg("replica-ready")
            .ignore()
            .cmd("WAIT")
            .arg(1)
            .arg(60_000)
            .query(&mut primary.connection())
            .expect("WAIT on the primary");
        assert_eq!(
            acknowledged,
            [1],
            "the replica on port {} did not acknowledge within 60 s",
            replica.port()
        );
        replica
    }

    /// Starts the process (on `self.port`, in `self.dir`) and waits until it answers `PING`
    /// (after loading its AOF, if any).
    fn spawn(&mut self) -> bool {
        let redis_server = binary("REDIS_SERVER", "redis-server");
        let child = Command::new(&redis_server)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot run `{redis_server}` ({err}): the Redis tests need a real redis-server \
                     on PATH (scripts/test installs it with apt-get; or set REDIS_SERVER)"
                )
            });
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(30))
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                let mut reply = [0u8; 7];
                if stream.write_all(b"PING\r\n").is_ok()
                    && stream.read_exact(&mut reply).is_ok()
                    && &reply == b"+PONG\r\n"
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL: an outage, not a shutdown) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same port, in the same directory, with the
    /// same configuration: what survives is what its persistence kept.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.start_again(),
            "redis-server did not come back on port {}",
            self.port
        );
    }

    /// Starts a stopped server again (same port, directory and configuration).
    pub fn start_again(&mut self) -> bool {
        assert!(self.child.is_none(), "the server is running");
        // The port was ours a moment ago; a few tries cover a slow release.
        for _ in 0..50 {
            if self.spawn() {
                return true;
            }
            self.stop();
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Freezes the process (SIGSTOP): it holds its connections but answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.pid().expect("the server runs");
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// A synchronous connection (for setting up and inspecting the server).
    pub fn connection(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("a Redis URL");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match client.get_connection_with_timeout(Duration::from_secs(5)) {
                Ok(connection) => return connection,
                Err(err) if Instant::now() > deadline => panic!("connect to {}: {err}", self.url()),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Runs one command and returns its reply.
    pub fn command<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command
            .query(&mut self.connection())
            .unwrap_or_else(|err| panic!("{args:?} on port {}: {err}", self.port))
    }

    /// The value of `field` in `INFO section`.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info: String = self.command(&["INFO", section]);
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A Redis Cluster on loopback: `primaries` primaries with `replicas` replicas each, every node
/// a [`RedisServer`] with `--cluster-enabled yes`, joined with `redis-cli --cluster create`.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

/// Milliseconds without an answer after which the cluster counts a node as failed (and
/// promotes a replica of a failed primary): short for tests, long enough for a loaded machine.
pub const CLUSTER_NODE_TIMEOUT_MS: u64 = 2000;

impl RedisCluster {
    pub fn start(primaries: usize, replicas: usize, persistence: Persistence) -> Self {
        let timeout = CLUSTER_NODE_TIMEOUT_MS.to_string();
        let nodes: Vec<RedisServer> = (0..primaries * (1 + replicas))
            .map(|_| {
                let bus = free_port().to_string();
                RedisServer::start_with(
                    persistence,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        &timeout,
                        "--cluster-port",
                        &bus,
                        // A replica of a failed primary is promoted however far behind it was.
                        "--cluster-replica-validity-factor",
                        "0",
                    ],
                )
            })
            .collect();
        let redis_cli = binary("REDIS_CLI", "redis-cli");
        let mut create = Command::new(&redis_cli);
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let out = nodes[0].dir().join("cluster-create.log");
        let mut child = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("a log file"))
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot run `{redis_cli}` ({err}): the cluster tests need redis-cli on PATH \
                     (it comes with redis-server; scripts/test installs it)"
                )
            });
        // redis-cli waits for the nodes to join without end: bounded here (generously).
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.try_wait().expect("redis-cli") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if status.is_none_or(|status| !status.success()) {
            let logs: Vec<String> = nodes
                .iter()
                .map(|n| format!("node {}:\n{}", n.port(), log_tail(n.dir())))
                .collect();
            panic!(
                "redis-cli --cluster create failed ({status:?}):\n{}\n{}",
                std::fs::read_to_string(&out).unwrap_or_default(),
                logs.join("\n")
            );
        }
        let cluster = Self { nodes };
        cluster.wait_healthy(Duration::from_secs(60));
        cluster.wait_replicas_online(replicas, Duration::from_secs(60));
        cluster
    }

    /// Waits until every running primary has `replicas` replicas online (synchronised and
    /// streaming), and every replica's link to its primary is up.
    pub fn wait_replicas_online(&self, replicas: usize, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let ready = self.nodes.iter().filter(|n| n.is_running()).all(|node| {
                match node.info_field("replication", "role").as_deref() {
                    Some("master") => node.replica_ports().len() == replicas,
                    _ => {
                        node.info_field("replication", "master_link_status")
                            .as_deref()
                            == Some("up")
                    }
                }
            });
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replicas did not come online within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A `redis+cluster://` URL naming every node as a seed.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// Waits until every running node says `cluster_state:ok` with all 16384 slots served by
    /// running nodes, and they agree on who serves each slot.
    pub fn wait_healthy(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let running: Vec<&RedisServer> = self.nodes.iter().filter(|n| n.is_running()).collect();
            let healthy = running.iter().all(|node| {
                node.info_cluster("cluster_state").as_deref() == Some("ok")
                    && node.info_cluster("cluster_slots_ok").as_deref() == Some("16384")
            });
            let layouts: Vec<Vec<(i64, i64, u16)>> =
                running.iter().map(|node| node.slot_owners()).collect();
            // Every slot served by a node that runs (a stopped primary's slots taken over).
            let served = layouts
                .iter()
                .flatten()
                .all(|(_, _, port)| running.iter().any(|node| node.port() == *port));
            if healthy && served && layouts.windows(2).all(|w| w[0] == w[1]) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not become healthy within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The node serving `key` as primary now (by index).
    pub fn primary_of(&self, key: &str) -> usize {
        let node = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a node runs");
        let slot: i64 = node.command(&["CLUSTER", "KEYSLOT", key]);
        let port = node
            .slot_owners()
            .into_iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, port)| port)
            .expect("every slot is served");
        self.index_of(port)
    }

    /// The replicas of the primary `index` online now (by index), as the primary reports them.
    pub fn replicas_of(&self, index: usize) -> Vec<usize> {
        self.nodes[index]
            .replica_ports()
            .into_iter()
            .map(|port| self.index_of(port))
            .collect()
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .expect("a node of this cluster")
    }

    /// Keys held by each running primary (`DBSIZE`), by index.
    pub fn keys_per_primary(&self) -> Vec<(usize, i64)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                n.is_running() && n.info_field("replication", "role").as_deref() == Some("master")
            })
            .map(|(i, n)| (i, n.command::<i64>(&["DBSIZE"])))
            .collect()
    }
}

impl RedisServer {
    /// The ports of this primary's replicas that are online (`INFO replication`).
    pub fn replica_ports(&self) -> Vec<u16> {
        let info: String = self.command(&["INFO", "replication"]);
        info.lines()
            .filter(|line| line.starts_with("slave") && line.contains("state=online"))
            .filter_map(|line| {
                line.split(',')
                    .find_map(|part| part.strip_prefix("port="))
                    .and_then(|port| port.parse().ok())
            })
            .collect()
    }

    fn info_cluster(&self, field: &str) -> Option<String> {
        let info: String = self.command(&["CLUSTER", "INFO"]);
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_owned())
    }

    /// `CLUSTER SLOTS` as (first slot, last slot, primary's port), sorted.
    fn slot_owners(&self) -> Vec<(i64, i64, u16)> {
        let slots: Vec<redis::Value> = self.command(&["CLUSTER", "SLOTS"]);
        let mut owners: Vec<(i64, i64, u16)> = slots
            .into_iter()
            .filter_map(|range| {
                let redis::Value::Array(items) = range else {
                    return None;
                };
                let int = |v: &redis::Value| match v {
                    redis::Value::Int(i) => Some(*i),
                    _ => None,
                };
                let (start, end) = (int(items.first()?)?, int(items.get(1)?)?);
                let redis::Value::Array(primary) = items.get(2)? else {
                    return None;
                };
                let port = u16::try_from(int(primary.get(1)?)?).ok()?;
                Some((start, end, port))
            })
            .collect();
        owners.sort_unstable();
        owners
    }
}
