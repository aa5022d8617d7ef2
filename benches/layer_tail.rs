//! What `FramingLayer` adds after the inner server's last byte: a 1 MiB `tools/call` result (an
//! SSE event, a text like the example server's `generate_text`: escapes and non-ASCII on every
//! line) arrives in 64 KiB chunks; everything but the last chunk is framed first (the framed
//! body is read until it has nothing ready), then the clock runs from the last chunk to the
//! framed body's end (binary mapping). That time is what a framed call takes longer than a
//! pass-through one once the upstream has finished, whatever the load of the network: the
//! framing work left at the message's end (its JSON-RPC reading, the CRC-32 and SHA-256 of what
//! was not framed yet, the terminal frames). One thread, no network. The same for the compatible
//! mapping (a stock client's request to a layer that frames every response), whose record goes
//! before the message's event (SPEC.md §18.4): the whole event leaves after the last chunk.
//!
//! With `--whole` the clock runs over the whole call instead, from the inner body's first chunk
//! to the framed body's end: the work the layer does on every byte as the message passes (its
//! SSE line reading, UTF-8 check, JSON-RPC reading, copies, CRC-32 and SHA-256). `--only binary`
//! or `--only compat` runs one mapping; `--chunk N` cuts the event in chunks of `N` bytes instead
//! of 64 KiB (an HTTP client's reads are often smaller: hyper's start at 8 KiB). For counts independent of the machine's load, run it
//! under callgrind and count only the calls (`--toggle-collect`), for example:
//!
//! ```text
//! cargo bench --features rmcp-server --bench layer_tail [-- --reps N] [--whole] [--only binary|compat] [--chunk N]
//! valgrind --tool=callgrind --toggle-collect='*layer_tail::call*' target/release/deps/layer_tail-HASH --reps 4 --only binary
//! ```
//!
//! Output: the minimum and the median over the repetitions (the minimum is the one a loaded
//! machine disturbs least).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use http_body::Frame;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use mcp_framing::RequestKey;
use mcp_framing::http::opt_in_headers;
use mcp_framing::rmcp_http::FramingLayer;
use tower_layer::Layer;
use tower_service::Service;

/// An inner server answering with an SSE body fed through a channel.
#[derive(Clone)]
struct Inner(Arc<Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>>);

impl<B: Send + 'static> Service<http::Request<B>> for Inner {
    type Response = http::Response<BoxBody<Bytes, Infallible>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<B>) -> Self::Future {
        let pieces = self.0.lock().unwrap().take().expect("one request");
        Box::pin(async move {
            let body = http_body_util::StreamBody::new(
                pieces.map(|piece| Ok::<_, Infallible>(Frame::data(piece))),
            );
            Ok(http::Response::builder()
                .header("content-type", "text/event-stream")
                .body(BodyExt::boxed(body))
                .unwrap())
        })
    }
}

/// The SSE event of a final response of about 1 MiB, lines as `generate_text` writes them.
fn event() -> Bytes {
    let mut text = String::new();
    let mut i = 0usize;
    while text.len() < 1 << 20 {
        let run = char::from(b'a' + (i % 26) as u8).to_string().repeat(i % 64);
        text.push_str(&format!(
            "{i:06} 7 \"quoted\" back\\slash\ttab café ✓ {run}\n"
        ));
        i += 1;
    }
    let text = serde_json::to_string(&text).unwrap();
    let message = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":{text}}}],"isError":false}}}}"#
    );
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// How the call is framed.
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// A framing client's request (opted in, binary mapping accepted).
    Binary,
    /// A stock client's request to a layer that frames every response: the compatible mapping.
    Compat,
}

/// One call: the time from the inner body's last chunk (or, `whole`, its first) to the framed
/// body's end.
async fn call(chunks: &[Bytes], framing: Framing, whole: bool) -> Duration {
    let (send, pieces) = mpsc::unbounded();
    let (last, before) = chunks.split_last().unwrap();
    let first = Instant::now();
    for chunk in before {
        send.unbounded_send(chunk.clone()).unwrap();
    }
    let mut service = FramingLayer::new()
        .head_wait(Duration::ZERO)
        .frame_all_responses(matches!(framing, Framing::Compat))
        .layer(Inner(Arc::new(Mutex::new(Some(pieces)))));
    let mut request = http::Request::post("/mcp");
    match framing {
        Framing::Binary => {
            for (name, value) in &opt_in_headers(RequestKey::random(), true) {
                request = request.header(name, value);
            }
        }
        Framing::Compat => {
            request = request.header("accept", "application/json, text/event-stream");
        }
    }
    let response = service.call(request.body(String::new()).unwrap()).await;
    let mut body = response.unwrap().into_body();
    let mut framed = 0;
    // What is framed before the last chunk: read until the body has nothing ready (a few polls
    // in a row, as the body yields between pieces of a message).
    let mut idle = 0;
    while idle < 5 {
        match body.frame().now_or_never() {
            Some(Some(frame)) => {
                framed += frame.unwrap().into_data().unwrap().len();
                idle = 0;
            }
            Some(None) => panic!("the framed body ended before the message did"),
            None => idle += 1,
        }
    }
    let start = Instant::now();
    send.unbounded_send(last.clone()).unwrap();
    drop(send);
    while let Some(frame) = body.frame().await {
        framed += frame.unwrap().into_data().unwrap().len();
    }
    let elapsed = if whole { first } else { start }.elapsed();
    assert!(framed > 1 << 20, "the whole message framed");
    elapsed
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .map_or(50, |n| n.parse().expect("a number"));
    let whole = args.iter().any(|a| a == "--whole");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let chunk = args
        .iter()
        .position(|a| a == "--chunk")
        .and_then(|i| args.get(i + 1))
        .map_or(64 * 1024, |n| n.parse().expect("a number"));
    let event = event();
    let chunks: Vec<Bytes> = (0..event.len())
        .step_by(chunk)
        .map(|at| event.slice(at..(at + chunk).min(event.len())))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for framing in [Framing::Binary, Framing::Compat] {
        let name = format!("{framing:?}").to_lowercase();
        if only.is_some_and(|only| only != name) {
            continue;
        }
        let mut tails: Vec<Duration> = runtime.block_on(async {
            let mut tails = Vec::with_capacity(reps);
            for _ in 0..reps {
                tails.push(call(&chunks, framing, whole).await);
            }
            tails
        });
        tails.sort();
        println!(
            "a {} byte event in {} chunks, {framing:?}: from the {} chunk to the framed body's end, min {:.3} ms, median {:.3} ms ({reps} calls)",
            event.len(),
            chunks.len(),
            if whole { "first" } else { "last" },
            tails[0].as_secs_f64() * 1e3,
            tails[reps / 2].as_secs_f64() * 1e3,
        );
    }
}
