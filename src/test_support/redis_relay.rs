//! A TCP relay of the tests' own between a Redis client and a `redis-server`, that sees each
//! round trip: the commands a client sends while none of its replies are outstanding start a
//! batch, and the commands it sends before the batch's replies are all back join it (a client's
//! pipeline is one batch). The relay logs every batch's command names, runs a hook of the test's
//! before it forwards a batch, and sends each batch either over the client's one connection to
//! the server or over a new connection of its own: the second is a client whose connection is
//! replaced (a reconnect) between any two of its round trips, where a connection's state
//! (`WAIT` counts the writes of its own connection) does not carry over.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::redis_servers::RedisServer;

/// One command as the client sent it: its arguments, the command's name first.
pub type Command = Vec<Vec<u8>>;

/// The hook run before a batch is forwarded, with the batch's commands.
type Hook = dyn Fn(&[Command]) + Send + Sync;

/// Which connection to the server a batch goes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// The one the relay opened for the client's connection (a proxy).
    PerClient,
    /// A new one for every batch.
    PerBatch,
}

/// A relay on a loopback port in front of one server (see the module docs); it stops accepting
/// when dropped.
pub struct RedisRelay {
    port: u16,
    batches: Arc<Mutex<Vec<Vec<String>>>>,
    stopped: Arc<AtomicBool>,
}

impl RedisRelay {
    /// Relays to `server`, each batch over `upstream`, running `before` ahead of each batch.
    pub fn start(
        server: &RedisServer,
        upstream: Upstream,
        before: impl Fn(&[Command]) + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port for the relay");
        let port = listener.local_addr().expect("the relay's address").port();
        let relay = Self {
            port,
            batches: Arc::default(),
            stopped: Arc::default(),
        };
        let (batches, stopped) = (relay.batches.clone(), relay.stopped.clone());
        let before: Arc<Hook> = Arc::new(before);
        let server = server.port();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let (batches, before) = (batches.clone(), before.clone());
                std::thread::spawn(move || {
                    relay_client(client, server, upstream, &*before, &batches)
                });
            }
        });
        relay
    }

    /// The URL a client connects to (instead of the server's).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Every batch relayed so far, in order: its commands' names, in capitals.
    pub fn batches(&self) -> Vec<Vec<String>> {
        self.batches.lock().unwrap().clone()
    }
}

impl Drop for RedisRelay {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The replies a client's batch still waits for, and the connection the batch went over.
struct Batch {
    outstanding: usize,
    upstream: Option<TcpStream>,
}

fn relay_client(
    mut client: TcpStream,
    server: u16,
    mode: Upstream,
    before: &Hook,
    batches: &Mutex<Vec<Vec<String>>>,
) {
    let batch = Arc::new(Mutex::new(Batch {
        outstanding: 0,
        upstream: None,
    }));
    let mut pending = Vec::new();
    while read_more(&mut client, &mut pending) {
        let (commands, used) = commands(&pending);
        if commands.is_empty() {
            continue;
        }
        let bytes: Vec<u8> = pending.drain(..used).collect();
        let mut current = batch.lock().unwrap();
        if current.outstanding == 0 {
            // A new round trip.
            before(&commands);
            batches.lock().unwrap().push(names(&commands));
            if mode == Upstream::PerBatch || current.upstream.is_none() {
                let upstream = TcpStream::connect(("127.0.0.1", server))
                    .expect("the relay connects to the server");
                upstream.set_nodelay(true).ok();
                let (reader, to_client) = (
                    upstream.try_clone().expect("a socket handle"),
                    client.try_clone().expect("a socket handle"),
                );
                let batch = batch.clone();
                std::thread::spawn(move || relay_replies(reader, to_client, &batch));
                // The one it replaces has no replies left to forward.
                if let Some(replaced) = current.upstream.replace(upstream) {
                    let _ = replaced.shutdown(Shutdown::Both);
                }
            }
        } else {
            // More of the round trip under way (a pipeline written in parts).
            batches
                .lock()
                .unwrap()
                .last_mut()
                .expect("a batch under way")
                .extend(names(&commands));
        }
        current.outstanding += commands.len();
        let upstream = current.upstream.as_mut().expect("an upstream connection");
        if upstream.write_all(&bytes).is_err() {
            break;
        }
    }
    if let Some(upstream) = &batch.lock().unwrap().upstream {
        let _ = upstream.shutdown(Shutdown::Both);
    }
}

/// Forwards the server's replies on one connection to the client, whole replies only, counting
/// them off the batch before the client can see them (so that what the client sends after
/// them starts a new batch).
fn relay_replies(mut upstream: TcpStream, mut client: TcpStream, batch: &Mutex<Batch>) {
    let mut pending = Vec::new();
    while read_more(&mut upstream, &mut pending) {
        let mut used = 0;
        let mut replies = 0;
        while let Some(end) = reply_end(&pending, used) {
            used = end;
            replies += 1;
        }
        if replies == 0 {
            continue;
        }
        {
            let mut batch = batch.lock().unwrap();
            batch.outstanding = batch.outstanding.saturating_sub(replies);
        }
        if client.write_all(&pending[..used]).is_err() {
            return;
        }
        pending.drain(..used);
    }
}

/// Appends what `stream` has to `pending`; false once it ended (or failed).
fn read_more(stream: &mut TcpStream, pending: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 16 * 1024];
    match stream.read(&mut buf) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            pending.extend_from_slice(&buf[..n]);
            true
        }
    }
}

fn names(commands: &[Command]) -> Vec<String> {
    commands
        .iter()
        .map(|command| String::from_utf8_lossy(&command[0]).to_uppercase())
        .collect()
}

/// The whole commands at the start of `bytes` (RESP arrays of bulk strings, as clients send
/// them), and the bytes they take.
fn commands(bytes: &[u8]) -> (Vec<Command>, usize) {
    let mut commands = Vec::new();
    let mut at = 0;
    'next: while let Some((Some(count), mut i)) = header(bytes, at, b'*') {
        let mut command = Vec::new();
        for _ in 0..count {
            let Some((Some(len), start)) = header(bytes, i, b'$') else {
                break 'next;
            };
            let end = start + len;
            if bytes.len() < end + 2 {
                break 'next;
            }
            command.push(bytes[start..end].to_vec());
            i = end + 2;
        }
        commands.push(command);
        at = i;
    }
    (commands, at)
}

/// The end of the reply that starts at `at`, once it is whole (RESP2, and the RESP3 types).
fn reply_end(bytes: &[u8], at: usize) -> Option<usize> {
    let kind = *bytes.get(at)?;
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {
            let line = bytes[at..].windows(2).position(|w| w == b"\r\n")?;
            Some(at + line + 2)
        }
        b'$' | b'!' | b'=' => match header(bytes, at, kind)? {
            // `$-1`: a null.
            (None, start) => Some(start),
            (Some(len), start) => (bytes.len() >= start + len + 2).then_some(start + len + 2),
        },
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let (count, mut i) = header(bytes, at, kind)?;
            let items = count.unwrap_or(0) * if matches!(kind, b'%' | b'|') { 2 } else { 1 };
            for _ in 0..items {
                i = reply_end(bytes, i)?;
            }
            Some(i)
        }
        other => panic!(
            "the relay cannot read a reply starting with {:?}",
            other as char
        ),
    }
}

/// A `<kind><decimal>\r\n` header at `at`, once it is whole: the number (`None` for a negative
/// one, a null) and where what follows it starts.
fn header(bytes: &[u8], at: usize, kind: u8) -> Option<(Option<usize>, usize)> {
    if *bytes.get(at)? != kind {
        return None;
    }
    let line = bytes[at + 1..].windows(2).position(|w| w == b"\r\n")?;
    let number: i64 = std::str::from_utf8(&bytes[at + 1..at + 1 + line])
        .ok()?
        .parse()
        .ok()?;
    Some((usize::try_from(number).ok(), at + 1 + line + 2))
}
