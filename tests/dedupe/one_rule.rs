//! One rule each for "is this SSE event a message event" (`sse::is_message_event`) and "is this
//! the final JSON-RPC response" (`jsonrpc::is_response`), decided the same by the layer in every
//! mapping, the compatible mapping's decoder and the deduplication layer (issue 18, defect 9).
//! Before, an event with an empty `event` field (a `message` event for WHATWG, rmcp and the SDKs)
//! was dropped by the layer's framed mappings and refused by the compatible decoder, and the
//! deduplication layer alone did not take a response with `"id": null` for a final response.

use std::convert::Infallible;
use std::future::Ready;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use mcp_framing::dedupe::{Deduplicator, MemoryStore};
use mcp_framing::internals::sse_compat::CompatDecoder;
use mcp_framing::rmcp_http::FramingLayer;
use mcp_framing::{RequestKey, StreamDecoder};
use mcp_framing::{
    http::{DedupeLayer, Delivery, VerifiedResponse},
    internals::http::DEDUPE_HEADER,
    mapping::Mapping,
};
use tower_layer::Layer;
use tower_service::Service;

use crate::support::http_support::opt_in_headers_asking;

/// An inner server answering every request with `body` as `content_type`, counting its calls.
#[derive(Clone)]
struct Inner {
    content_type: &'static str,
    body: &'static str,
    calls: Arc<AtomicUsize>,
}

impl Inner {
    fn new(content_type: &'static str, body: &'static str) -> Self {
        Self {
            content_type,
            body,
            calls: Arc::default(),
        }
    }
}

impl<B> Service<Request<B>> for Inner {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let response = Response::builder()
            .header("content-type", self.content_type)
            .body(Full::new(Bytes::from_static(self.body.as_bytes())))
            .unwrap();
        std::future::ready(Ok(response))
    }
}

const RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;

/// The final response in an event whose `event` field is empty, with and without the space.
const EMPTY_EVENT_FIELDS: [&str; 2] = [
    "id: 0\nretry: 3000\n\nevent:\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n",
    "event: \ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n",
];

/// Sends an opted-in request for `mapping` through the layer; returns the verified messages, or
/// the error that ended the response.
async fn framed_messages(inner: Inner, mapping: Mapping) -> Result<Vec<Bytes>, String> {
    let key = RequestKey::random();
    let headers = opt_in_headers_asking(key, mapping);
    let mut request = Request::post("/mcp");
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    let response = FramingLayer::new()
        .layer(inner)
        .call(request.body(Full::new(Bytes::new())).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    assert_eq!(
        Mapping::from_response_headers(&parts.headers),
        Some(mapping)
    );
    let decoder = StreamDecoder::builder().expect_request_key(key).build();
    let mut verified =
        VerifiedResponse::from_headers(body.into_data_stream(), &parts.headers, decoder)
            .expect("a framed response");
    let mut messages = Vec::new();
    while let Some(item) = verified.next().await {
        match item {
            Ok(Delivery::Message(message)) => messages.push(message.bytes().clone()),
            Ok(_) => return Ok(messages),
            Err(err) => return Err(err.to_string()),
        }
    }
    unreachable!("a verified response ends with Complete or an error")
}

/// Sends a request that did not opt in through a layer framing every response; returns the
/// messages a framing client verifies in the compatible mapping.
async fn unsolicited_compat_messages(inner: Inner) -> Result<Vec<Bytes>, String> {
    let request = Request::post("/mcp")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = FramingLayer::new()
        .frame_all_responses(true)
        .layer(inner)
        .call(request)
        .await
        .unwrap();
    assert_eq!(response.headers()["mcp-framing"], "1; mapping=compat");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let mut compat = CompatDecoder::new();
    let mut frames = BytesMut::new();
    compat.feed(&body, &mut frames).map_err(|e| e.to_string())?;
    compat.finish();
    let stream = StreamDecoder::new()
        .decode_all(&frames)
        .map_err(|e| e.to_string())?;
    Ok(stream.messages.iter().map(|m| m.bytes().clone()).collect())
}

#[tokio::test]
async fn an_event_with_an_empty_event_field_is_a_message_in_every_mapping_of_the_layer() {
    for body in EMPTY_EVENT_FIELDS {
        for mapping in Mapping::ALL {
            let inner = Inner::new("text/event-stream", body);
            let messages = framed_messages(inner, mapping).await;
            assert_eq!(
                messages,
                Ok(vec![Bytes::from_static(RESULT.as_bytes())]),
                "{mapping:?}: {body:?}"
            );
        }
        let messages = unsolicited_compat_messages(Inner::new("text/event-stream", body)).await;
        assert_eq!(
            messages,
            Ok(vec![Bytes::from_static(RESULT.as_bytes())]),
            "unsolicited: {body:?}"
        );
    }
}

#[tokio::test]
async fn an_event_of_another_type_is_no_message_in_any_mapping_of_the_layer() {
    // Event types are case-sensitive: `Message` is not `message`, for SSE and for the layer.
    let body = "event: Message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    for mapping in Mapping::ALL {
        let messages = framed_messages(Inner::new("text/event-stream", body), mapping).await;
        let err = messages.expect_err("no message");
        // The compatible mapping passes the event through unframed, which its decoder refuses;
        // the other mappings carry no such event, and the layer saw no final response.
        let expected = match mapping {
            Mapping::Compat => "unexpected SSE event \"Message\"",
            _ => "before its final response",
        };
        assert!(err.contains(expected), "{mapping:?}: {err:?}");
    }
}

/// A keyed `tools/call` with JSON-RPC id `id`.
fn keyed_call(key: RequestKey, id: u64) -> Request<Full<Bytes>> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","arguments":{{}},"_meta":{{"io.github.mcp-framing/requestKey":"{key}"}}}}}}"#
    );
    Request::post("/mcp")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// Calls the deduplication layer around `inner` twice with one key; returns the second answer's
/// decision and its body.
async fn twice_through_dedupe(inner: Inner) -> (String, Bytes) {
    let dedup = Deduplicator::new(MemoryStore::new()).wait(Duration::ZERO);
    let mut service = DedupeLayer::new(dedup).layer(inner.clone());
    let calls = inner.calls.load(Ordering::SeqCst);
    let key = RequestKey::random();
    let first = service.call(keyed_call(key, 1)).await.unwrap();
    assert_eq!(first.headers()[DEDUPE_HEADER], "execute");
    // The capture task records the final response before it relays it: once the body is read,
    // the record is there.
    first.into_body().collect().await.unwrap();
    let second = service.call(keyed_call(key, 2)).await.unwrap();
    let decision = second.headers()[DEDUPE_HEADER].to_str().unwrap().to_owned();
    let body = second.into_body().collect().await.unwrap().to_bytes();
    let executed = inner.calls.load(Ordering::SeqCst) - calls;
    assert_eq!(executed, 1, "{decision}: {body:?}");
    (decision, body)
}

#[tokio::test]
async fn the_deduplication_layer_records_a_final_response_in_an_event_with_an_empty_event_field() {
    for body in EMPTY_EVENT_FIELDS {
        let (decision, replayed) =
            twice_through_dedupe(Inner::new("text/event-stream", body)).await;
        assert_eq!(decision, "replay", "{body:?}");
        let value: serde_json::Value = serde_json::from_slice(&replayed).unwrap();
        assert_eq!(value["id"], 2);
        assert_eq!(value["result"]["content"], serde_json::json!([]));
    }
}

#[tokio::test]
async fn a_final_response_with_a_null_id_is_final_for_the_deduplication_layer_as_for_the_framing_layer()
 {
    // JSON-RPC 2.0 §5: a server that could not read the request's id answers with `"id": null`.
    const NULL_ID: &str =
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#;
    let event: &'static str = Box::leak(format!("data: {NULL_ID}\n\n").into_boxed_str());
    for inner in [
        Inner::new("application/json", NULL_ID),
        Inner::new("text/event-stream", event),
    ] {
        // The framing layer ends the stream after it (the final response) ...
        let messages = framed_messages(inner.clone(), Mapping::Binary).await;
        assert_eq!(messages, Ok(vec![Bytes::from_static(NULL_ID.as_bytes())]));
        // ... and the deduplication layer records it, so a retry is answered with it.
        let (decision, replayed) = twice_through_dedupe(inner).await;
        assert_eq!(decision, "replay");
        let value: serde_json::Value = serde_json::from_slice(&replayed).unwrap();
        assert_eq!(value["error"]["code"], -32603);
    }
}
