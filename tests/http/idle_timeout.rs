//! `VerifiedResponse` bounds the time between frames: a peer that holds a response open without
//! sending frames (silence, SSE comments, a frame trickled a byte at a time) is abandoned after
//! the idle timeout, never waited on for ever; KEEPALIVE frames keep a slow response alive.
//! The clock is tokio's paused test clock, so minutes pass in no time.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt, stream};
use mcp_framing::internals::sse::SseFrameEncoder;
use mcp_framing::{RequestKey, StreamDecoder, StreamEncoder, StreamHead, outcome::Verdict};
use mcp_framing::{
    http::{Delivery, ReceiveError, VerifiedResponse},
    mapping::Mapping,
};

type Piece = Result<Bytes, std::io::Error>;

/// The idle timeout a `VerifiedResponse` starts with, as its documentation says.
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The body pieces, each after its delay; then the body stays open without sending anything.
fn paced(pieces: Vec<(Duration, Bytes)>) -> impl Stream<Item = Piece> + Unpin {
    Box::pin(
        stream::iter(pieces)
            .then(|(delay, piece)| async move {
                tokio::time::sleep(delay).await;
                Ok(piece)
            })
            .chain(stream::pending()),
    )
}

/// Reads `response` to its end (at most a virtual day); the items and the virtual time taken.
async fn read_all<S: Stream<Item = Piece> + Unpin>(
    mut response: VerifiedResponse<S>,
) -> (
    Vec<Result<Delivery, ReceiveError<std::io::Error>>>,
    Duration,
    VerifiedResponse<S>,
) {
    let start = tokio::time::Instant::now();
    let mut items = Vec::new();
    let day = Duration::from_secs(24 * 3600);
    while let Some(item) = tokio::time::timeout(day, response.next())
        .await
        .expect("the response ended within a day: it is not waited on for ever")
    {
        items.push(item);
    }
    (items, start.elapsed(), response)
}

fn frames(build: impl FnOnce(&mut StreamEncoder, &mut BytesMut)) -> (RequestKey, BytesMut) {
    let key = RequestKey::random();
    let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    let mut wire = BytesMut::new();
    build(&mut enc, &mut wire);
    (key, wire)
}

fn assert_idle_abandoned<S>(
    items: &[Result<Delivery, ReceiveError<std::io::Error>>],
    response: &VerifiedResponse<S>,
    key: RequestKey,
) {
    let Some(Err(err)) = items.last() else {
        panic!("expected an error, got {items:?}");
    };
    assert!(matches!(err, ReceiveError::IdleTimeout { .. }), "{err}");
    assert_eq!(err.kind(), "IdleTimeout");
    assert!(err.is_abandoned());
    let outcome = response.outcome().expect("an outcome");
    assert!(
        matches!(outcome.verdict, Verdict::Abandoned { .. }),
        "{outcome:?}"
    );
    // Abandoned: a keyed request is retried where the server declares deduplication, as after a
    // cut (retry/tests.rs).
    assert_eq!(outcome.head.and_then(|head| head.request_key), Some(key));
}

#[tokio::test(start_paused = true)]
async fn a_silent_peer_is_abandoned_after_the_default_idle_timeout() {
    let (key, head) = frames(|enc, wire| enc.open(wire).unwrap());
    let body = paced(vec![(Duration::ZERO, head.freeze())]);
    let decoder = StreamDecoder::builder().expect_request_key(key).build();
    let (items, took, response) =
        read_all(VerifiedResponse::new(body, Mapping::Binary, decoder)).await;
    assert_idle_abandoned(&items, &response, key);
    assert!(
        took >= DEFAULT_IDLE_TIMEOUT && took < DEFAULT_IDLE_TIMEOUT + Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(
        response.outcome().unwrap().received.frames,
        1,
        "the HEAD frame"
    );
}

#[tokio::test(start_paused = true)]
async fn sse_comments_and_a_trickled_frame_do_not_reset_the_idle_timer() {
    // A peer that keeps the connection busy without ever completing a frame.
    let (key, wire) = frames(|enc, wire| {
        enc.open(wire).unwrap();
        enc.push(b"{\"jsonrpc\":\"2.0\"", wire).unwrap();
    });
    let head_len = 52;
    let sse_head = SseFrameEncoder::new().to_events(&wire[..head_len]);
    let ten = Duration::from_secs(10);
    let comments = std::iter::once((Duration::ZERO, sse_head))
        .chain((0..100).map(|_| (ten, Bytes::from_static(b": ping\n\n"))))
        .collect();
    let trickle = std::iter::once((Duration::ZERO, Bytes::copy_from_slice(&wire[..head_len])))
        .chain(
            wire[head_len..]
                .iter()
                .map(|b| (ten, Bytes::copy_from_slice(&[*b]))),
        )
        .collect();
    for (mapping, pieces) in [(Mapping::Sse, comments), (Mapping::Binary, trickle)] {
        let decoder = StreamDecoder::builder().expect_request_key(key).build();
        let response = VerifiedResponse::new(paced(pieces), mapping, decoder)
            .idle_timeout(Some(Duration::from_secs(30)));
        let (items, took, response) = read_all(response).await;
        assert_idle_abandoned(&items, &response, key);
        assert!(
            took >= Duration::from_secs(30) && took <= Duration::from_secs(40),
            "{mapping:?}: {took:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn keep_alive_frames_keep_a_slow_response_alive() {
    // A tool call that takes ten minutes, with a KEEPALIVE frame every 30 s (as FramingLayer
    // sends for rmcp's keep-alive comments), is not cut by the one-minute default.
    let key = RequestKey::random();
    let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    let mut piece = |f: &mut dyn FnMut(&mut StreamEncoder, &mut BytesMut)| {
        let mut wire = BytesMut::new();
        f(&mut enc, &mut wire);
        wire.freeze()
    };
    let thirty = Duration::from_secs(30);
    let mut pieces = vec![(Duration::ZERO, piece(&mut |e, w| e.open(w).unwrap()))];
    for _ in 0..20 {
        pieces.push((thirty, piece(&mut |e, w| e.keep_alive(w).unwrap())));
    }
    pieces.push((
        thirty,
        piece(&mut |e, w| {
            e.message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, w)
                .unwrap();
            e.end(w).unwrap();
        }),
    ));
    // The body then ends.
    let body = Box::pin(stream::iter(pieces).then(|(delay, piece)| async move {
        tokio::time::sleep(delay).await;
        Ok::<_, std::io::Error>(piece)
    }));
    let decoder = StreamDecoder::builder().expect_request_key(key).build();
    let (items, took, response) =
        read_all(VerifiedResponse::new(body, Mapping::Binary, decoder)).await;
    assert!(
        matches!(items.last(), Some(Ok(Delivery::Complete(_)))),
        "{items:?}"
    );
    assert!(response.outcome().unwrap().is_clean());
    assert!(took >= Duration::from_secs(630), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn the_idle_timeout_can_be_turned_off() {
    let (key, head) = frames(|enc, wire| enc.open(wire).unwrap());
    let body = paced(vec![(Duration::ZERO, head.freeze())]);
    let decoder = StreamDecoder::builder().expect_request_key(key).build();
    let mut response = VerifiedResponse::new(body, Mapping::Binary, decoder).idle_timeout(None);
    let waited = tokio::time::timeout(Duration::from_secs(3600), response.next()).await;
    assert!(waited.is_err(), "still waiting after an hour: {waited:?}");
}
