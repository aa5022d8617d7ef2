//! The HTTP binding over real HTTP on loopback: an axum server framing with `FramedBody`, a
//! reqwest client verifying with `VerifiedResponse`, and a server that misbehaves the way
//! proxies and backends do (cuts at chunk boundaries, re-chunks, keep-alive comments, `\r\n`,
//! unframed answers, aborts).

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::{StreamExt, stream};
use mcp_framing::{
    AbortCode, BodyError, DecodeError, Outgoing, StreamEncoder, StreamHead, Truncation,
};
use mcp_framing::{
    http::{Delivery, FramedBody, OptIn, ReceiveError, response_headers},
    mapping::Mapping,
};

use crate::support::http_support;

/// The messages of the test response: a progress notification, then a result in 14 pieces.
fn outgoing() -> Vec<Outgoing> {
    let mut items = vec![Outgoing::Message(
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#.into(),
    )];
    let result = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "abcdefgh".repeat(100)
    );
    for piece in result.as_bytes().chunks(64) {
        items.push(Outgoing::Chunk(Bytes::copy_from_slice(piece)));
    }
    items.push(Outgoing::FinishMessage);
    items
}

/// The body pieces the server adapter produces when the items come one at a time, as a producer
/// streams them: it hands out what is ready at each pause, so one frame per piece for
/// `outgoing()` (the HEAD with the first message, MESSAGE_END with STREAM_END).
async fn framed_pieces(opt_in: OptIn, abort_after: Option<usize>) -> Vec<Bytes> {
    let mut items: Vec<Result<Outgoing, String>> = outgoing().into_iter().map(Ok).collect();
    if let Some(n) = abort_after {
        items.truncate(n);
        items.push(Err("the model backend went away".to_owned()));
    }
    let encoder = StreamEncoder::builder()
        .frame_size(64)
        .build(StreamHead::for_request(opt_in.request_key));
    let paced = stream::iter(items).then(|item| async {
        tokio::task::yield_now().await;
        item
    });
    FramedBody::new(Box::pin(paced), encoder, opt_in.mapping())
        .map(|piece| piece.expect("infallible"))
        .collect()
        .await
}

async fn handler(Query(q): Query<HashMap<String, String>>, headers: HeaderMap) -> Response {
    let opt_in = OptIn::from_headers(&headers)
        .expect("valid opt-in")
        .expect("the tests opt in");
    if let Some(kind) = q.get("unframed") {
        // A backend that ignores the opt-in.
        let (content_type, body) = match kind.as_str() {
            "json" => (
                "application/json",
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            ),
            // Nothing in the body looks unframed: only the headers tell.
            "priming" => ("text/event-stream", "id: 0\nretry: 3000\n\n: ping\n\n"),
            "empty" => ("text/event-stream", ""),
            _ => (
                "text/event-stream",
                "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
            ),
        };
        return ([("content-type", content_type)], body).into_response();
    }
    let abort_after = q.get("abort").map(|n| n.parse().expect("number"));
    let mut pieces = framed_pieces(opt_in, abort_after).await;
    if let Some(cut) = q.get("cut") {
        pieces.truncate(cut.parse().expect("number"));
    }
    if q.contains_key("crlf") {
        pieces = pieces
            .iter()
            .map(|p| Bytes::from(String::from_utf8_lossy(p).replace('\n', "\r\n")))
            .collect();
    }
    if q.contains_key("keepalive") {
        pieces = pieces
            .into_iter()
            .flat_map(|p| [Bytes::from_static(b": keep-alive\n\n"), p])
            .collect();
    }
    match q.get("split").map(String::as_str) {
        Some("1") => {
            let all = pieces.concat();
            pieces = all.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
        }
        Some("merged") => pieces = vec![Bytes::from(pieces.concat())],
        _ => {}
    }
    let body = Body::from_stream(stream::iter(
        pieces.into_iter().map(Ok::<_, std::io::Error>),
    ));
    (response_headers(opt_in.mapping()), body).into_response()
}

async fn server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/mcp", post(handler));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

struct Received {
    messages: Vec<Bytes>,
    outcome: Result<(), ReceiveError<reqwest::Error>>,
    comments: u64,
}

async fn call(addr: SocketAddr, query: &str, binary: bool) -> Received {
    let request =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}});
    let url = format!("http://{addr}/mcp?{query}");
    let mut verified =
        match http_support::post_framed(&reqwest::Client::new(), &url, request, binary).await {
            Ok(verified) => verified,
            Err(err) => {
                return Received {
                    messages: vec![],
                    outcome: Err(err),
                    comments: 0,
                };
            }
        };
    let mut messages = Vec::new();
    let mut outcome = Err(ReceiveError::NotFramed { content_type: None });
    while let Some(item) = verified.next().await {
        match item {
            Ok(Delivery::Message(m)) => messages.push(m.into_bytes()),
            Ok(Delivery::Complete(_)) => outcome = Ok(()),
            Err(err) => outcome = Err(err),
            Ok(_) => unreachable!("no other deliveries"),
        }
    }
    Received {
        messages,
        outcome,
        comments: verified.sse_comments(),
    }
}

fn expected_messages() -> Vec<Bytes> {
    let mut result = Vec::new();
    let mut messages = Vec::new();
    for item in outgoing() {
        match item {
            Outgoing::Message(m) => messages.push(m),
            Outgoing::Chunk(c) => result.extend_from_slice(&c),
            Outgoing::FinishMessage => messages.push(Bytes::from(std::mem::take(&mut result))),
            _ => {}
        }
    }
    messages
}

/// Whole frames in a binary stream prefix (walks the length fields).
fn frames_in(mut bytes: &[u8]) -> u64 {
    let mut frames = 0;
    while bytes.len() >= 20 {
        let len = u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
        bytes = &bytes[20 + len..];
        frames += 1;
    }
    frames
}

#[tokio::test]
async fn delivers_a_clean_response_in_both_mappings() {
    let addr = server().await;
    for binary in [false, true] {
        let received = call(addr, "", binary).await;
        received.outcome.unwrap();
        assert_eq!(received.messages, expected_messages());
    }
}

#[tokio::test]
async fn classifies_a_cut_at_every_chunk_boundary_as_abandoned() {
    let addr = server().await;
    let opt_in = OptIn {
        request_key: None,
        accepts_binary: true,
        accepts_compat: false,
        max_frame_payload: None,
        max_message_size: None,
    };
    let binary_pieces = framed_pieces(opt_in, None).await;
    let pieces = binary_pieces.len();
    assert!(pieces > 10, "a multi-frame response");
    for binary in [false, true] {
        for cut in 0..pieces {
            let received = call(addr, &format!("cut={cut}"), binary).await;
            let err = received.outcome.unwrap_err();
            assert!(err.is_abandoned(), "cut {cut}: {err}");
            let ReceiveError::Invalid(BodyError::Decode(DecodeError::Truncated { at, progress })) =
                err
            else {
                panic!("cut {cut}: not a truncation: {err}");
            };
            // Only messages verified before the cut were delivered, never the cut one.
            assert_eq!(received.messages.len() as u64, progress.messages);
            assert_eq!(progress.frames, frames_in(&binary_pieces[..cut].concat()));
            if cut == 0 {
                assert_eq!(at, Truncation::NoFrame);
            }
        }
        let received = call(addr, &format!("cut={pieces}"), binary).await;
        received.outcome.unwrap();
    }
}

#[tokio::test]
async fn reports_a_server_abort_with_its_reason() {
    let addr = server().await;
    let received = call(addr, "abort=4", false).await;
    match received.outcome.unwrap_err() {
        ReceiveError::Invalid(BodyError::Decode(DecodeError::PeerAbort(abort))) => {
            assert_eq!(abort.code, AbortCode::InternalError);
            assert_eq!(abort.reason, "the model backend went away");
        }
        other => panic!("{other}"),
    }
    assert_eq!(
        received.messages.len(),
        1,
        "the notification was verified first"
    );
}

#[tokio::test]
async fn survives_a_proxy_that_rechunks_into_single_bytes_or_one_piece() {
    let addr = server().await;
    for binary in [false, true] {
        for split in ["1", "merged"] {
            let received = call(addr, &format!("split={split}"), binary).await;
            received.outcome.unwrap();
            assert_eq!(received.messages, expected_messages());
        }
    }
}

#[tokio::test]
async fn skips_keep_alive_comments_and_accepts_crlf_line_endings() {
    let addr = server().await;
    let received = call(addr, "keepalive=1&crlf=1&split=1", false).await;
    received.outcome.unwrap();
    assert_eq!(received.messages, expected_messages());
    assert!(received.comments > 10);
}

#[tokio::test]
async fn fails_closed_when_a_backend_ignores_the_opt_in() {
    let addr = server().await;
    // Decided from the response headers (no `Mcp-Framing`), before the body: a contract
    // violation whatever the body holds, never a truncation (SPEC.md §16).
    for kind in ["json", "sse", "priming", "empty"] {
        let received = call(addr, &format!("unframed={kind}"), false).await;
        let err = received.outcome.unwrap_err();
        assert!(
            matches!(err, ReceiveError::NotFramed { .. }),
            "{kind}: {err}"
        );
        assert!(!err.is_abandoned(), "{kind}");
        assert!(
            received.messages.is_empty(),
            "nothing unframed is delivered"
        );
    }
}

#[tokio::test]
async fn frames_nothing_for_a_request_that_did_not_opt_in() {
    assert_eq!(OptIn::from_headers(&HeaderMap::new()).unwrap(), None);
    let mut headers = HeaderMap::new();
    headers.insert("mcp-framing", "2".parse().unwrap());
    assert_eq!(
        OptIn::from_headers(&headers).unwrap(),
        None,
        "no version we speak"
    );
    assert_eq!(Mapping::from_content_type(Some("application/json")), None);
}

/// A backend's `server/discover` endpoint; `framed` says whether it declares the contract.
async fn discovery_backend(framed: bool) -> SocketAddr {
    let handler = move || async move {
        let mut result = serde_json::json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "extensions": {}},
        });
        if framed {
            mcp_framing::contract::FramingContract::v1()
                .declare_in(
                    &mut result,
                    mcp_framing::contract::DiscoverySource::Discover,
                )
                .unwrap();
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": result}).to_string();
        ([("content-type", "application/json")], body)
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/mcp", post(handler));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn discover(addr: SocketAddr) -> mcp_framing::internals::contract::ServerDiscovery {
    let response: serde_json::Value = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .body(r#"{"jsonrpc":"2.0","id":0,"method":"server/discover"}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    mcp_framing::internals::contract::ServerDiscovery::from_discover(&response["result"]).unwrap()
}

#[tokio::test]
async fn detects_a_discovery_downgrade_between_two_requests() {
    // The resolver re-resolves per request: the first lands on an upgraded backend, the
    // second on one that was rolled back without framing.
    let endpoints = [
        discovery_backend(true).await,
        discovery_backend(false).await,
    ];
    let policy = mcp_framing::internals::contract::ClientPolicy::builder()
        .build(&discover(endpoints[0]).await)
        .unwrap();
    assert_eq!(policy.regime(), mcp_framing::outcome::Regime::A);
    policy.recheck(&discover(endpoints[0]).await).unwrap();
    let err = policy.recheck(&discover(endpoints[1]).await).unwrap_err();
    assert!(
        matches!(
            err,
            mcp_framing::contract::ContractError::Downgrade {
                change: mcp_framing::contract::ContractChange::ContractDropped,
                ..
            }
        ),
        "{err}"
    );
    // And a client that starts on the rolled-back backend refuses to start (Regime C).
    let err = mcp_framing::internals::contract::ClientPolicy::builder()
        .build(&discover(endpoints[1]).await)
        .unwrap_err();
    assert!(
        matches!(err, mcp_framing::contract::ContractError::NoContract { .. }),
        "{err}"
    );
}
