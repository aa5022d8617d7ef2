//! `mcp-frame proxy` against a direct connection and nginx: per-call latency and 32-way
//! throughput of `tools/call` round trips over loopback, and the sidecar's RSS over 10,000 calls.
//! Medians of one run, configurations interleaved (every round runs a batch of each in turn, so
//! that a noisy neighbour weighs on all of them alike and the ratios from one run stay
//! meaningful).
//!
//! `scripts/bench-proxy` starts the servers (the Rust example server `rmcp_server --mode plain`,
//! nginx with `proxy_buffering off` in front of it, and `mcp-frame proxy --dedupe off` in front
//! of it) and runs this with their URLs:
//!
//! ```text
//! cargo bench --features proxy,rmcp,demo,internals --bench proxy -- \
//!     --direct URL --nginx URL --sidecar URL --sidecar-pid PID [--rounds N] [--batch N] \
//!     [--tp-rounds N] [--rss-calls N] [--sizes 1024,65536,1048576] [--sections latency,throughput,rss]
//! ```
//!
//! `--sizes` and `--sections` restrict a quick run to some result sizes and some of the three
//! sections (latency, 32-way throughput, RSS); by default all of them run.
//!
//! Configurations: `direct` (the server itself), `nginx`, `pass-through` (the sidecar, the
//! client not opted in: the server's bytes), `compat` and `binary` (the client opted in to that
//! mapping: the sidecar frames, CRC-32 and SHA-256 of every byte). Each call posts
//! `generate_text` for a result of about 1 KiB, 64 KiB or 1 MiB and reads the whole body; the
//! time is the wall time from sending to the last byte. Framed bodies are verified (CRC-32s,
//! length, SHA-256, sentinel, request key) after the clock stopped (for the throughput, once the
//! round's calls all ended), so that the figures compare the proxies and not the client's
//! verification; a body that does not verify fails the run.
//!
//! Output: Markdown tables on stdout.

use std::time::{Duration, Instant};

use mcp_framing::http::opt_in_headers;
use mcp_framing::mapping::Mapping;
use mcp_framing::{BodyDecoder, Event, RequestKey, StreamDecoder};

/// Bytes of one line of `generate_text` on average (the example server's docs: 1200 lines are
/// 104 616 bytes).
const LINE_BYTES: usize = 87;

const SIZES: [(&str, usize); 3] = [("1 KiB", 1024), ("64 KiB", 64 * 1024), ("1 MiB", 1 << 20)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Direct,
    Nginx,
    PassThrough,
    Compat,
    Binary,
}

impl Mode {
    const ALL: [Mode; 5] = [
        Mode::Direct,
        Mode::Nginx,
        Mode::PassThrough,
        Mode::Compat,
        Mode::Binary,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Nginx => "nginx",
            Mode::PassThrough => "pass-through",
            Mode::Compat => "compat",
            Mode::Binary => "binary",
        }
    }

    fn mapping(self) -> Option<Mapping> {
        match self {
            Mode::Compat => Some(Mapping::Compat),
            Mode::Binary => Some(Mapping::Binary),
            _ => None,
        }
    }
}

struct Options {
    direct: String,
    nginx: String,
    sidecar: String,
    sidecar_pid: u32,
    rounds: usize,
    batch: usize,
    tp_rounds: usize,
    rss_calls: usize,
    /// The result sizes measured (`--sizes 1024,65536`; all three by default).
    sizes: Vec<(&'static str, usize)>,
    /// The sections run (`--sections latency,throughput,rss`; all by default).
    sections: Vec<String>,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let required = |name: &str| value(name).unwrap_or_else(|| panic!("{name} is required"));
    let number =
        |name: &str, default: usize| value(name).map_or(default, |v| v.parse().expect("a number"));
    Options {
        direct: required("--direct"),
        nginx: required("--nginx"),
        sidecar: required("--sidecar"),
        sidecar_pid: required("--sidecar-pid").parse().expect("a pid"),
        rounds: number("--rounds", 15),
        batch: number("--batch", 5),
        tp_rounds: number("--tp-rounds", 5),
        rss_calls: number("--rss-calls", 10_000),
        sizes: value("--sizes").map_or_else(
            || SIZES.to_vec(),
            |list| {
                list.split(',')
                    .map(|size| {
                        let size: usize = size.trim().parse().expect("a size in bytes");
                        *SIZES
                            .iter()
                            .find(|(_, s)| *s == size)
                            .unwrap_or_else(|| panic!("--sizes: {size} is not one of {SIZES:?}"))
                    })
                    .collect()
            },
        ),
        sections: value("--sections").map_or_else(
            || ["latency", "throughput", "rss"].map(str::to_owned).to_vec(),
            |list| list.split(',').map(|s| s.trim().to_owned()).collect(),
        ),
    }
}

impl Options {
    fn url(&self, mode: Mode) -> &str {
        match mode {
            Mode::Direct => &self.direct,
            Mode::Nginx => &self.nginx,
            _ => &self.sidecar,
        }
    }
}

/// One call: the body and how long it took; the body checked after the clock stopped.
async fn call(client: &reqwest::Client, url: &str, mode: Mode, size: usize) -> (Duration, usize) {
    let (elapsed, answer) = send(client, url, mode, size).await;
    answer.check();
    (elapsed, answer.body.len())
}

/// A call's body, to be checked once the clock stopped.
struct Answer {
    mode: Mode,
    key: RequestKey,
    body: bytes::Bytes,
    lines: usize,
}

impl Answer {
    fn check(&self) {
        check(self.mode, self.key, &self.body, self.lines);
    }
}

/// One call, timed from sending to the body's last byte; the body is not checked.
async fn send(client: &reqwest::Client, url: &str, mode: Mode, size: usize) -> (Duration, Answer) {
    let lines = (size / LINE_BYTES).max(1);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"generate_text","arguments":{{"seed":"bench","lines":{lines}}}}}}}"#
    );
    let key = RequestKey::random();
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    request = match mode.mapping() {
        Some(mapping) => {
            let mut headers = opt_in_headers(key, mapping == Mapping::Binary);
            if mapping == Mapping::Compat {
                headers.insert("mcp-framing-mapping", "compat".parse().unwrap());
            }
            headers
                .entry("accept")
                .or_insert("application/json, text/event-stream".parse().unwrap());
            request.headers(headers)
        }
        None => request.header("accept", "application/json, text/event-stream"),
    };
    let start = Instant::now();
    let response = request
        .body(body)
        .send()
        .await
        .expect("the call is answered");
    assert_eq!(response.status(), 200, "{}", mode.name());
    let body = response.bytes().await.expect("the body is read");
    let elapsed = start.elapsed();
    let answer = Answer {
        mode,
        key,
        body,
        lines,
    };
    (elapsed, answer)
}

/// The body holds the whole result: verified when framed.
fn check(mode: Mode, key: RequestKey, body: &[u8], lines: usize) {
    let last_line = format!("{:06} bench", lines - 1);
    let Some(mapping) = mode.mapping() else {
        let text = std::str::from_utf8(body).expect("UTF-8");
        assert!(
            text.contains(&last_line),
            "{}: the result is cut",
            mode.name()
        );
        return;
    };
    let mut decoder = BodyDecoder::new(
        mapping,
        StreamDecoder::builder().expect_request_key(key).build(),
    );
    decoder.feed(body);
    decoder.finish();
    let mut messages = Vec::new();
    loop {
        match decoder.next_event() {
            Ok(Some(Event::Message(message))) => messages.push(message),
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(err) => panic!("{}: the body does not verify: {err}", mode.name()),
        }
    }
    let last = messages.last().expect("a message");
    assert!(last.is_final_response(), "{}", mode.name());
    let text = std::str::from_utf8(last.bytes()).expect("UTF-8");
    assert!(
        text.contains(&last_line),
        "{}: the result is cut",
        mode.name()
    );
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A table row: the leading `cells`, each configuration's median with `decimals`, then the
/// `derived` cells.
fn row(cells: &[String], medians: &[f64], decimals: usize, derived: &[String]) {
    let medians = medians.iter().map(|m| format!("{m:.decimals$}"));
    let all: Vec<String> = cells
        .iter()
        .cloned()
        .chain(medians)
        .chain(derived.iter().cloned())
        .collect();
    println!("| {} |", all.join(" | "));
}

/// The sidecar's resident set (`VmRSS`, KiB).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the sidecar runs");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// `tasks` tasks making `calls` calls each, in turn, through `url`; `what(task, call)` says the
/// mode and result size of each. Returns how long they took; the bodies are checked after that,
/// so that the time is the proxies' and not the client's verification (as for the latency).
async fn in_flight(
    tasks: usize,
    calls: usize,
    client: &reqwest::Client,
    url: &str,
    what: impl Fn(usize, usize) -> (Mode, usize) + Send + Sync + Copy + 'static,
) -> Duration {
    let start = Instant::now();
    let mut running = Vec::new();
    for task in 0..tasks {
        let client = client.clone();
        let url = url.to_owned();
        running.push(tokio::spawn(async move {
            let mut answers = Vec::with_capacity(calls);
            for i in 0..calls {
                let (mode, size) = what(task, i);
                answers.push(send(&client, &url, mode, size).await.1);
            }
            answers
        }));
    }
    let mut answers = Vec::new();
    for task in running {
        answers.extend(task.await.expect("the calls succeed"));
    }
    let elapsed = start.elapsed();
    answers.iter().for_each(Answer::check);
    elapsed
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--drive") {
        return drive();
    }
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(options));
}

/// `--drive URL MODE SIZE CALLS [IN_FLIGHT]`: only makes `CALLS` calls of `MODE` (`direct`,
/// `nginx`, `pass-through`, `compat`, `binary`) with results of `SIZE` bytes through `URL`,
/// `IN_FLIGHT` at a time (32 unless given; 1: in sequence, as the latency is measured), after 64
/// calls of warm-up, and prints a line `start` on stdout before them and `end` after
/// them (`scripts/bench-proxy-cpu` counts a proxy's CPU between the two).
fn drive() {
    // `cargo bench` adds `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(2)
        .filter(|a| a != "--bench")
        .collect();
    let (url, mode, size, calls, tasks) = match args.as_slice() {
        [url, mode, size, calls] => (url, mode, size, calls, 32),
        [url, mode, size, calls, tasks] => {
            let tasks = tasks.parse().expect("a number of calls in flight");
            (url, mode, size, calls, tasks)
        }
        _ => panic!("--drive URL MODE SIZE CALLS [IN_FLIGHT]"),
    };
    let mode = *Mode::ALL
        .iter()
        .find(|m| m.name() == mode)
        .unwrap_or_else(|| panic!("no mode {mode}"));
    let size: usize = size.parse().expect("a size");
    let calls: usize = calls.parse().expect("a number of calls");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(64)
            .build()
            .unwrap();
        in_flight(32, 2, &client, url, move |_, _| (mode, size)).await;
        let signal = |line: &str| {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}")
                .and_then(|()| out.flush())
                .expect("stdout");
            // The counter's reader acknowledges on stdin.
            let mut ack = String::new();
            std::io::stdin().read_line(&mut ack).expect("stdin");
        };
        signal("start");
        let per_task = calls.div_ceil(tasks);
        in_flight(tasks, per_task, &client, url, move |_, _| (mode, size)).await;
        signal("end");
    });
}

async fn run(options: Options) {
    // TCP_NODELAY on the bench's own connections (reqwest's default, stated here because the
    // sequential calls depend on it; the example server sets it with `--nodelay`): on a quiet
    // machine a small write behind Nagle's algorithm waits for the peer's delayed ACK (40 ms).
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    // Warm-up: connections, the servers' first allocations.
    for mode in Mode::ALL {
        for (_, size) in SIZES {
            call(&client, options.url(mode), mode, size).await;
        }
    }

    let runs = |section: &str| options.sections.iter().any(|s| s == section);
    if runs("latency") {
        latency(&options, &client).await;
    }
    if runs("throughput") {
        throughput(&options, &client).await;
    }
    if runs("rss") {
        rss(&options, &client).await;
    }
}

/// Per-call latency, configurations interleaved.
async fn latency(options: &Options, client: &reqwest::Client) {
    println!("## Latency of one call (median, ms; calls in sequence on a kept-alive connection)\n");
    println!(
        "| result | body bytes (direct) | direct | nginx | pass-through | compat | binary | pass-through / nginx | binary - pass-through |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &(label, size) in &options.sizes {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); Mode::ALL.len()];
        let mut body_bytes = 0;
        for _ in 0..options.rounds {
            for (index, mode) in Mode::ALL.into_iter().enumerate() {
                for _ in 0..options.batch {
                    let (elapsed, len) = call(client, options.url(mode), mode, size).await;
                    times[index].push(elapsed.as_secs_f64() * 1e3);
                    if mode == Mode::Direct {
                        body_bytes = len;
                    }
                }
            }
        }
        let medians: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
        let m = &medians;
        let derived = [
            format!("{:.2}x", m[2] / m[1]),
            format!("{:+.3} ms", m[4] - m[2]),
        ];
        row(&[label.to_owned(), body_bytes.to_string()], m, 3, &derived);
    }
}

/// Calls per second with 32 in flight, configurations interleaved.
async fn throughput(options: &Options, client: &reqwest::Client) {
    println!("\n## Throughput with 32 calls in flight (median of rounds, calls/s)\n");
    println!(
        "| result | direct | nginx | pass-through | compat | binary | pass-through / nginx | compat / nginx | binary / nginx |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &(label, size) in &options.sizes {
        let per_task = if size >= 1 << 20 { 2 } else { 8 };
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); Mode::ALL.len()];
        for _ in 0..options.tp_rounds {
            for (index, mode) in Mode::ALL.into_iter().enumerate() {
                let elapsed = in_flight(32, per_task, client, options.url(mode), move |_, _| {
                    (mode, size)
                })
                .await;
                rates[index].push((32 * per_task) as f64 / elapsed.as_secs_f64());
            }
        }
        let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
        let m = &medians;
        let derived = [2, 3, 4].map(|i| format!("{:.2}x", m[i] / m[1]));
        row(&[label.to_owned()], m, 0, &derived);
    }
}

/// The sidecar's RSS over `rss_calls` calls.
async fn rss(options: &Options, client: &reqwest::Client) {
    println!(
        "\n## The sidecar's RSS over {} calls (1 KiB results; binary, compat and pass-through in turn, 8 in flight)\n",
        options.rss_calls
    );
    println!("| calls | RSS (KiB) |");
    println!("|---|---|");
    let step = (options.rss_calls / 10).max(1);
    let mut done = 0;
    println!("| 0 | {} |", rss_kib(options.sidecar_pid));
    let modes = [Mode::Binary, Mode::Compat, Mode::PassThrough];
    while done < options.rss_calls {
        let each = step / 8;
        in_flight(8, each, client, &options.sidecar, move |worker, i| {
            (modes[(worker + i) % modes.len()], 1024)
        })
        .await;
        done += each * 8;
        println!("| {done} | {} |", rss_kib(options.sidecar_pid));
    }
}
