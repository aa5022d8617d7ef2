//! Every byte of an upstream's SSE line endings reaches the client through `FramingLayer`, in
//! every mapping, whatever the chunking: LF, CRLF (the Python SDK's server), CR and a mix. A body
//! ending `\r\n\r` (the LF after the last CR lost) leaves the TypeScript SDK's parser waiting for
//! its 60 s timeout.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use mcp_framing::RequestKey;
use mcp_framing::http::opt_in_headers;
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::{FramingLayer, RequestBody};
use tower_layer::Layer;
use tower_service::Service;

use crate::support::{decode, without_records};

const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#;
const RESULT: &str =
    r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"caf\u00e9 ✓"}]}}"#;

/// An SSE body as a server writes it, every line ended by `ends[i % ends.len()]`: a priming
/// event (an id, no data), a progress notification, then the final response.
fn sse_body(ends: &[&str]) -> String {
    let lines = [
        "id: 0".to_owned(),
        "retry: 1000".to_owned(),
        String::new(),
        "event: message".to_owned(),
        format!("data: {PROGRESS}"),
        String::new(),
        "id: 1".to_owned(),
        "event: message".to_owned(),
        format!("data: {RESULT}"),
        String::new(),
    ];
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| format!("{line}{}", ends[i % ends.len()]))
        .collect()
}

/// An inner server answering every request with `chunks` as an SSE body.
#[derive(Clone)]
struct Sse(Vec<Bytes>);

type Chunks =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

impl Service<http::Request<RequestBody<String>>> for Sse {
    type Response = http::Response<Chunks>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<RequestBody<String>>) -> Self::Future {
        let chunks: Vec<_> = self.0.iter().cloned().map(|c| Ok(Frame::data(c))).collect();
        Box::pin(async move {
            // Read the request, as a server does.
            let _ = request.into_body().collect().await;
            Ok(http::Response::builder()
                .header("content-type", "text/event-stream")
                .body(StreamBody::new(futures::stream::iter(chunks)))
                .unwrap())
        })
    }
}

/// How a client asks.
#[derive(Clone, Copy, Debug)]
enum Asker {
    /// A stock client, the layer framing every response (`frame_all_responses`).
    Stock,
    /// A framing client asking for `mapping`.
    OptIn(Mapping),
}

async fn through_layer(asker: Asker, chunks: Vec<Bytes>) -> (http::HeaderMap, Bytes) {
    let layer = FramingLayer::new().frame_all_responses(matches!(asker, Asker::Stock));
    let mut service = layer.layer(Sse(chunks));
    let mut headers = match asker {
        Asker::Stock => http::HeaderMap::new(),
        Asker::OptIn(mapping) => {
            let mut headers = opt_in_headers(RequestKey::random(), mapping == Mapping::Binary);
            if mapping == Mapping::Compat {
                headers.insert("mcp-framing-mapping", "compat".parse().unwrap());
            }
            headers
        }
    };
    headers
        .entry("accept")
        .or_insert("application/json, text/event-stream".parse().unwrap());
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#;
    let mut request = http::Request::post("/mcp").body(body.to_owned()).unwrap();
    *request.headers_mut() = headers;
    let response = service.call(request).await.unwrap();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (headers, body)
}

/// The body cut at `cuts` (sorted offsets) into chunks.
fn split(body: &[u8], cuts: &[usize]) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain([&body.len()]) {
        chunks.push(Bytes::copy_from_slice(&body[from..cut]));
        from = cut;
    }
    chunks
}

const ENDINGS: [(&str, &[&str]); 5] = [
    ("LF", &["\n"]),
    ("CRLF", &["\r\n"]),
    ("CR", &["\r"]),
    ("mixed CRLF, LF, CR", &["\r\n", "\n", "\r"]),
    ("mixed CR, CRLF", &["\r", "\r\n"]),
];

#[tokio::test]
async fn a_stock_client_gets_every_byte_of_every_line_ending_at_every_split() {
    for (name, ends) in ENDINGS {
        let inner = sse_body(ends);
        for cut in 0..=inner.len() {
            let (headers, body) =
                through_layer(Asker::Stock, split(inner.as_bytes(), &[cut])).await;
            assert_eq!(
                headers["mcp-framing"], "1; mapping=compat",
                "{name} cut at {cut}"
            );
            assert_eq!(
                String::from_utf8(without_records(&body)).unwrap(),
                inner,
                "{name} cut at {cut}: the upstream's bytes, line endings included"
            );
            let decoded = decode(Mapping::Compat, &body);
            assert_eq!(decoded.messages, [PROGRESS, RESULT], "{name} cut at {cut}");
            decoded
                .end
                .unwrap_or_else(|err| panic!("{name} cut at {cut}: {err}"));
        }
    }
}

#[tokio::test]
async fn a_body_ending_in_crlf_keeps_its_last_lf_when_it_comes_in_a_chunk_of_its_own() {
    let inner = sse_body(&["\r\n"]);
    let (last, body) = inner.as_bytes().split_last().unwrap();
    assert_eq!(*last, b'\n');
    for asker in [Asker::Stock, Asker::OptIn(Mapping::Compat)] {
        let chunks = vec![Bytes::copy_from_slice(body), Bytes::from_static(b"\n")];
        let (_, framed) = through_layer(asker, chunks).await;
        assert!(
            framed.ends_with(b"\r\n\r\n"),
            "{asker:?}: {:?}",
            String::from_utf8_lossy(&framed)
        );
        assert_eq!(
            String::from_utf8(without_records(&framed)).unwrap(),
            inner,
            "{asker:?}"
        );
    }
}

#[tokio::test]
async fn every_byte_alone_still_passes_every_line_ending() {
    for (name, ends) in ENDINGS {
        let inner = sse_body(ends);
        let cuts: Vec<usize> = (1..inner.len()).collect();
        for asker in [Asker::Stock, Asker::OptIn(Mapping::Compat)] {
            let (_, body) = through_layer(asker, split(inner.as_bytes(), &cuts)).await;
            assert_eq!(
                String::from_utf8(without_records(&body)).unwrap(),
                inner,
                "{name} {asker:?}"
            );
            let decoded = decode(Mapping::Compat, &body);
            assert_eq!(decoded.messages, [PROGRESS, RESULT], "{name} {asker:?}");
            decoded
                .end
                .unwrap_or_else(|err| panic!("{name} {asker:?}: {err}"));
        }
    }
}

#[tokio::test]
async fn framing_clients_verify_both_messages_for_every_line_ending_at_every_split() {
    for (name, ends) in ENDINGS {
        let inner = sse_body(ends);
        for mapping in [Mapping::Compat, Mapping::Binary, Mapping::Sse] {
            for cut in 0..=inner.len() {
                let (headers, body) =
                    through_layer(Asker::OptIn(mapping), split(inner.as_bytes(), &[cut])).await;
                assert!(
                    headers.contains_key("mcp-framing"),
                    "{name} {mapping:?} cut at {cut}"
                );
                let decoded = decode(mapping, &body);
                assert_eq!(
                    decoded.messages,
                    [PROGRESS, RESULT],
                    "{name} {mapping:?} cut at {cut}: {:?}",
                    decoded.end
                );
                decoded
                    .end
                    .unwrap_or_else(|err| panic!("{name} {mapping:?} cut at {cut}: {err}"));
            }
        }
    }
}

#[tokio::test]
async fn keep_alive_comments_become_records_whole_with_their_line_ending_at_every_split() {
    // sse_starlette's pings (the Python SDK 1.x, FastMCP 3): a comment line and a blank line.
    for (name, end) in [("LF", "\n"), ("CRLF", "\r\n"), ("CR", "\r")] {
        let ping = format!(": ping - 2026-12-05 10:00:00.000000+00:00{end}{end}");
        let progress = format!("event: message{end}data: {PROGRESS}{end}{end}");
        let result = format!("event: message{end}data: {RESULT}{end}{end}");
        let inner = format!("{ping}{progress}{ping}{result}");
        // What a stock client reads: the events and the pings' blank lines, the comments turned
        // into records (which it drops as it drops comments).
        let stock = format!("{end}{progress}{end}{result}");
        for cut in 0..=inner.len() {
            let (_, body) = through_layer(Asker::Stock, split(inner.as_bytes(), &[cut])).await;
            assert_eq!(
                String::from_utf8(without_records(&body)).unwrap(),
                stock,
                "{name} cut at {cut}"
            );
            let decoded = decode(Mapping::Compat, &body);
            assert_eq!(decoded.messages, [PROGRESS, RESULT], "{name} cut at {cut}");
            decoded
                .end
                .unwrap_or_else(|err| panic!("{name} cut at {cut}: {err}"));
        }
    }
}
