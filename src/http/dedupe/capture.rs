//! Driving the inner response of an executed call to its end, whatever the client does, and
//! recording its final JSON-RPC response with the call's guard (SPEC.md §17.10).

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::{Body, Frame};
use http_body_util::BodyExt;

use super::body::{BoxError, ChannelBody, DedupeBody, DedupeBodyError, box_body, failing, full};
use crate::dedupe::ExecutionGuard;
use crate::jsonrpc::is_response;
use crate::limits::DEFAULT_MAX_MESSAGE_SIZE;
use crate::mapping::sse::{SseEvent, SseParser, is_message_event};

/// Frames relayed from the capture task to the client; a few, so that a slow client slows the
/// relay but a gone one does not stop the capture.
const RELAY_FRAMES: usize = 16;

/// Drives the inner response body to its end in a task of its own, finds the final JSON-RPC
/// response in it and records it with the guard (SPEC.md §17.10), whatever the client does: a
/// client that goes away stops the relay, never the recording. An `application/json` body (one
/// message) is collected, answered whole (with its length, in one write), then recorded; an SSE
/// body is relayed to the client as it comes.
pub(super) async fn capture<B>(response: Response<B>, guard: ExecutionGuard) -> Response<DedupeBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send,
{
    let (parts, body) = response.into_parts();
    if parts.status.is_client_error() {
        // Rejected before anything ran (HTTP semantics of 4xx): the key is free again at once.
        tokio::spawn(async move {
            let _ = guard.release().await;
        });
        return Response::from_parts(parts, box_body(body));
    }
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let sse = crate::mapping::Mapping::from_content_type(content_type)
        == Some(crate::mapping::Mapping::Sse);
    if !sse {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut body = std::pin::pin!(body);
            let mut whole = BytesMut::new();
            let mut failed = None;
            while let Some(frame) = body.as_mut().frame().await {
                match frame {
                    Ok(frame) => {
                        if let Some(data) = frame.data_ref() {
                            whole.extend_from_slice(data);
                        }
                    }
                    Err(err) => {
                        failed = Some(DedupeBodyError::Inner(err.into()));
                        break;
                    }
                }
            }
            match failed {
                Some(err) => {
                    no_final_response(&guard);
                    let _ = tx.send(Err(err));
                }
                None => {
                    let whole = whole.freeze();
                    // Answered first: recording is off the client's path (a retry that comes
                    // before it is recorded finds the claim in flight and waits for it).
                    let _ = tx.send(Ok(whole.clone()));
                    if whole.len() as u64 > DEFAULT_MAX_MESSAGE_SIZE {
                        record(guard, Found::TooLarge(whole.len() as u64)).await;
                    } else if std::str::from_utf8(&whole).is_ok_and(is_response) {
                        record(guard, Found::Message(whole)).await;
                    } else {
                        no_final_response(&guard);
                    }
                }
            }
        });
        let body = match rx.await {
            Ok(Ok(bytes)) => full(bytes),
            Ok(Err(err)) => failing(err),
            Err(_) => failing(DedupeBodyError::TaskStopped),
        };
        return Response::from_parts(parts, body);
    }
    let mut finder = FinalResponse::new();
    let (tx, rx) =
        tokio::sync::mpsc::channel::<Result<Frame<Bytes>, DedupeBodyError>>(RELAY_FRAMES);
    tokio::spawn(async move {
        let mut body = std::pin::pin!(body);
        let mut guard = Some(guard);
        let mut client_gone = false;
        while let Some(frame) = body.as_mut().frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                Err(err) => {
                    if !client_gone {
                        let _ = tx.send(Err(DedupeBodyError::Inner(err.into()))).await;
                    }
                    break;
                }
            };
            if let Some(data) = frame.data_ref() {
                if let Some(found) = finder.feed(data) {
                    if let Some(guard) = guard.take() {
                        record(guard, found).await;
                    }
                }
            }
            if !client_gone && tx.send(Ok(frame)).await.is_err() {
                client_gone = true;
                tracing::event!(target: "mcp_framing::dedupe", tracing::Level::DEBUG,
                    "client went away; driving the response to its end to record it");
            }
            if client_gone && guard.is_none() {
                // Recorded, and nobody listens: the rest of the body matters to no one.
                break;
            }
        }
        if let Some(guard) = guard.take() {
            no_final_response(&guard);
        }
    });
    Response::from_parts(parts, ChannelBody { rx }.boxed_unsync())
}

/// The response ended without a final response: the holder stopped, and the claim expires with
/// its lease (the guard is dropped by the caller).
fn no_final_response(guard: &ExecutionGuard) {
    tracing::event!(target: "mcp_framing::dedupe", tracing::Level::WARN,
        store_key = %guard.store_key(),
        "the response ended without a final response; the claim expires with its lease");
}

async fn record(guard: ExecutionGuard, found: Found) {
    let store_key = guard.store_key();
    let result = match found {
        Found::Message(message) => guard.complete(&message).await,
        Found::TooLarge(size) => guard.complete_not_stored(size).await,
    };
    if let Err(err) = result {
        tracing::event!(target: "mcp_framing::dedupe", tracing::Level::ERROR,
            store_key = %store_key, error = %err, "the result could not be recorded");
    }
}

enum Found {
    Message(Bytes),
    TooLarge(u64),
}

/// Finds the final JSON-RPC response in an SSE body: the first `message` event that is a
/// response.
struct FinalResponse {
    parser: SseParser,
    found: bool,
}

impl FinalResponse {
    fn new() -> Self {
        Self {
            parser: SseParser::with_max_event_data(DEFAULT_MAX_MESSAGE_SIZE as usize),
            found: false,
        }
    }

    fn feed(&mut self, data: &Bytes) -> Option<Found> {
        if self.found {
            return None;
        }
        let mut events: Vec<SseEvent> = Vec::new();
        if self.parser.feed(data, &mut events).is_err() {
            // An event over the bound: nothing more can be told from this body.
            self.found = true;
            return None;
        }
        for event in events {
            if is_message_event(event.event.as_deref()) && is_response(&event.data) {
                self.found = true;
                return Some(Found::Message(Bytes::from(event.data)));
            }
        }
        None
    }
}
