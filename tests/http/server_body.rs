//! `FramedBody` hands out what is ready as one chunk (issue 14): HEAD with the first item, a
//! message's frames together, MESSAGE_END with STREAM_END; it flushes as soon as its source is
//! pending, so a slow upstream's first message reaches the client before the upstream ends.

use std::time::Duration;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::{FutureExt, SinkExt, StreamExt, stream};
use mcp_framing::internals::sse::SseFrameDecoder;
use mcp_framing::{AbortCode, DecodeError, Outgoing, StreamDecoder, StreamEncoder, StreamHead};
use mcp_framing::{
    http::{Delivery, FramedBody, OptIn, response_headers},
    mapping::Mapping,
};

use crate::support::http_support;

type Item = Result<Outgoing, std::io::Error>;

fn encoder() -> StreamEncoder {
    StreamEncoder::new(StreamHead::for_request(None))
}

/// The chunks of the body of one ready message.
async fn chunks_of(message: Bytes, encoder: StreamEncoder, mapping: Mapping) -> Vec<Bytes> {
    let source = stream::iter([Ok::<_, std::io::Error>(Outgoing::Message(message))]);
    FramedBody::new(source, encoder, mapping)
        .map(|chunk| chunk.unwrap())
        .collect()
        .await
}

/// The frame bytes of a chunk of `mapping`.
fn frames_of(chunk: &[u8], mapping: Mapping) -> Vec<u8> {
    match mapping {
        Mapping::Binary => chunk.to_vec(),
        _ => {
            let mut frames = bytes::BytesMut::new();
            SseFrameDecoder::new().feed(chunk, &mut frames).unwrap();
            frames.to_vec()
        }
    }
}

/// The kinds of the frames in `frames` (byte 3 of each header), walking the length fields.
fn kinds(mut frames: &[u8]) -> Vec<u8> {
    let mut kinds = Vec::new();
    while frames.len() >= 20 {
        let len = u32::from_be_bytes(frames[8..12].try_into().unwrap()) as usize;
        kinds.push(frames[3]);
        frames = &frames[20 + len..];
    }
    assert!(frames.is_empty(), "whole frames only");
    kinds
}

const HEAD: u8 = 0x01;
const DATA: u8 = 0x02;
const MESSAGE_END: u8 = 0x03;
const STREAM_END: u8 = 0x04;
const ABORT: u8 = 0x05;

#[tokio::test]
async fn a_ready_response_is_one_chunk_from_head_to_sentinel() {
    for mapping in [Mapping::Binary, Mapping::Sse] {
        let message = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{}"}}}}"#,
            "a".repeat(40_000)
        ));
        let chunks = chunks_of(message.clone(), encoder(), mapping).await;
        assert_eq!(chunks.len(), 1, "{mapping:?}");
        let frames = frames_of(&chunks[0], mapping);
        assert_eq!(
            kinds(&frames),
            [HEAD, DATA, DATA, DATA, MESSAGE_END, STREAM_END],
            "{mapping:?}"
        );
        let stream = StreamDecoder::new().decode_all(&frames).unwrap();
        assert_eq!(stream.messages[0].bytes(), &message);
    }
}

#[tokio::test]
async fn holds_the_head_until_the_first_item_and_flushes_each_item_while_the_source_waits() {
    let (mut tx, rx) = mpsc::channel::<Item>(4);
    let mut body = FramedBody::new(rx, encoder(), Mapping::Binary);
    // Nothing yet: the HEAD alone is not worth a write.
    assert!(body.next().now_or_never().is_none());

    tx.send(Ok(Outgoing::Message(
        r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.into(),
    )))
    .await
    .unwrap();
    let first = body.next().now_or_never().flatten().unwrap().unwrap();
    assert_eq!(kinds(&first), [HEAD, DATA, MESSAGE_END]);
    // The source is pending: the notification went out, nothing more is ready.
    assert!(body.next().now_or_never().is_none());

    tx.send(Ok(Outgoing::Chunk(r#"{"jsonrpc":"2.0","id":1,"#.into())))
        .await
        .unwrap();
    let second = body.next().now_or_never().flatten().unwrap().unwrap();
    assert_eq!(kinds(&second), [DATA]);

    tx.send(Ok(Outgoing::Chunk(r#""result":{}}"#.into())))
        .await
        .unwrap();
    tx.send(Ok(Outgoing::FinishMessage)).await.unwrap();
    drop(tx);
    // Both items and the end were ready: one chunk, MESSAGE_END with STREAM_END.
    let last = body.next().now_or_never().flatten().unwrap().unwrap();
    assert_eq!(kinds(&last), [DATA, MESSAGE_END, STREAM_END]);
    assert!(body.next().now_or_never().flatten().is_none());

    let stream = StreamDecoder::new()
        .decode_all(&[first, second, last].concat())
        .unwrap();
    assert_eq!(stream.messages.len(), 2);
    assert_eq!(
        stream.messages[1].bytes(),
        &br#"{"jsonrpc":"2.0","id":1,"result":{}}"#[..]
    );
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Wakes(std::sync::atomic::AtomicUsize);

impl futures::task::ArcWake for Wakes {
    fn wake_by_ref(arc_self: &std::sync::Arc<Self>) {
        arc_self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_large_message_goes_out_a_piece_at_a_time_with_a_yield_between_pieces() {
    // Issue 21: a 1 MiB message is handed out in pieces, 64 KiB first (four 16 KiB frames), then
    // 256 KiB (sixteen), each as soon as it is hashed, so that the HTTP server writes it while
    // the next is hashed, in 5 writes rather than 16; the body's task yields (pending, woken at
    // once) between pieces, so that the server does write it. The frames are those of the
    // message written at once, and its ends go together.
    for mapping in [Mapping::Binary, Mapping::Sse] {
        let message = Bytes::from(vec![b'x'; 1 << 20]);
        let source = stream::iter([Ok::<_, std::io::Error>(Outgoing::Message(message.clone()))]);
        let head = StreamHead::for_request(None);
        let mut body = FramedBody::new(source, StreamEncoder::new(head), mapping);
        let wakes = std::sync::Arc::new(Wakes::default());
        let waker = futures::task::waker(wakes.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let (mut chunks, mut yields) = (Vec::new(), 0);
        loop {
            match body.poll_next_unpin(&mut cx) {
                std::task::Poll::Ready(Some(chunk)) => chunks.push(chunk.unwrap()),
                std::task::Poll::Ready(None) => break,
                std::task::Poll::Pending => {
                    yields += 1;
                    assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), yields);
                }
            }
        }
        assert_eq!(chunks.len(), 5, "{mapping:?}");
        assert_eq!(yields, 4, "{mapping:?}: one yield between pieces");
        let frames: Vec<Vec<u8>> = chunks.iter().map(|c| frames_of(c, mapping)).collect();
        for (i, frames) in frames.iter().enumerate() {
            let kinds = kinds(frames);
            let expected: Vec<u8> = match i {
                0 => [HEAD, DATA, DATA, DATA, DATA].into(),
                // 1 MiB - 64 KiB - 3 x 256 KiB: the last piece takes the 192 KiB left.
                4 => [&[DATA; 12][..], &[MESSAGE_END, STREAM_END]].concat(),
                _ => [DATA; 16].into(),
            };
            assert_eq!(kinds, expected, "{mapping:?} chunk {i}");
        }
        // Byte for byte what the message written at once is (the same head, the same frames).
        let mut whole = bytes::BytesMut::new();
        let mut encoder =
            mcp_framing::internals::body::MappingEncoder::new(mapping, StreamEncoder::new(head));
        encoder.message(&message, &mut whole).unwrap();
        encoder.end(&mut whole).unwrap();
        assert_eq!(chunks.concat(), whole, "{mapping:?}");
        let stream = StreamDecoder::new().decode_all(&frames.concat()).unwrap();
        assert_eq!(stream.messages[0].bytes(), &message);
    }
}

#[tokio::test]
async fn a_message_within_a_piece_and_a_half_goes_out_at_once() {
    // 96 KiB: no short last piece; the compatible mapping's event carries any message whole.
    for (mapping, len) in [
        (Mapping::Binary, 96 * 1024),
        (Mapping::Sse, 96 * 1024),
        (Mapping::Compat, 1 << 20),
    ] {
        let message = Bytes::from(vec![b'x'; len]);
        let chunks = chunks_of(message.clone(), encoder(), mapping).await;
        assert_eq!(chunks.len(), 1, "{mapping:?}");
    }
}

#[tokio::test]
async fn ready_items_are_gathered_up_to_about_64_kib_a_chunk() {
    // 100 ready messages of 4 KiB: chunks of about 64 KiB (the last item past it, and one more
    // look at the source), never one item split.
    const ITEM: usize = 4096 + 20 + 60; // its DATA and MESSAGE_END frames
    let items =
        (0..100).map(|_| Ok::<_, std::io::Error>(Outgoing::Message(Bytes::from(vec![b'y'; 4096]))));
    let chunks: Vec<Bytes> = FramedBody::new(stream::iter(items), encoder(), Mapping::Binary)
        .map(|chunk| chunk.unwrap())
        .collect()
        .await;
    assert!(chunks.len() >= 6, "{}", chunks.len());
    for chunk in &chunks[..chunks.len() - 1] {
        assert!(
            (64 * 1024..64 * 1024 + 2 * ITEM + 52).contains(&chunk.len()),
            "{}",
            chunk.len()
        );
        assert_eq!(kinds(chunk).last(), Some(&MESSAGE_END));
    }
    let stream = StreamDecoder::new().decode_all(&chunks.concat()).unwrap();
    assert_eq!(stream.messages.len(), 100);
}

#[tokio::test]
async fn a_large_message_over_the_limit_is_refused_before_any_of_its_frames() {
    // 200 KiB, which would go out in pieces: refused whole, before the first piece.
    let encoder = StreamEncoder::builder()
        .max_message_size(100 * 1024)
        .build(StreamHead::for_request(None));
    let chunks = chunks_of(
        Bytes::from(vec![b'x'; 200 * 1024]),
        encoder,
        Mapping::Binary,
    )
    .await;
    let wire = chunks.concat();
    assert_eq!(kinds(&wire), [HEAD, ABORT]);
    let Err(DecodeError::PeerAbort(abort)) = StreamDecoder::new().decode_all(&wire) else {
        panic!("an abort");
    };
    assert_eq!(abort.code, AbortCode::MessageTooLarge);
}

#[tokio::test]
async fn a_slow_upstreams_first_message_reaches_the_client_before_the_upstream_ends() {
    // Over real HTTP, `axum::serve` as is (Nagle's algorithm on): the upstream sends a
    // notification, then waits for the test to see it arrive before it sends the result.
    let (tx, rx) = mpsc::channel::<Item>(4);
    let source = std::sync::Arc::new(std::sync::Mutex::new(Some(rx)));
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let rx = source.lock().unwrap().take().expect("one request");
            async move {
                let opt_in = OptIn::from_headers(&headers).unwrap().unwrap();
                let body = FramedBody::new(
                    rx,
                    StreamEncoder::new(StreamHead::for_request(opt_in.request_key)),
                    opt_in.mapping(),
                );
                (
                    response_headers(opt_in.mapping()),
                    axum::body::Body::from_stream(body),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut tx = tx;
    let client = reqwest::Client::new();
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"});
    let url = format!("http://{addr}/mcp");
    let response = http_support::post_framed(&client, &url, request, true);
    let sender = async {
        tx.send(Ok(Outgoing::Message(
            r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.into(),
        )))
        .await
        .unwrap();
    };
    let (verified, ()) = tokio::join!(response, sender);
    let mut verified = verified.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), verified.next())
        .await
        .expect("the notification arrives while the upstream is still open");
    let Some(Ok(Delivery::Message(message))) = first else {
        panic!("a verified message, got {first:?}");
    };
    assert!(
        message
            .bytes()
            .starts_with(b"{\"jsonrpc\":\"2.0\",\"method\"")
    );
    tx.send(Ok(Outgoing::Message(
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into(),
    )))
    .await
    .unwrap();
    tx.close_channel();
    assert!(matches!(
        verified.next().await,
        Some(Ok(Delivery::Message(_)))
    ));
    assert!(matches!(
        verified.next().await,
        Some(Ok(Delivery::Complete(_)))
    ));
}
