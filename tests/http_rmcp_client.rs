//! `FramingHttpClient` (through rmcp's client transport) against a hand-scripted server that
//! answers the tool call the way a test needs: bytes that are not UTF-8, unframed answers.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::response::IntoResponse;
use mcp_framing::rmcp_http::FramingHttpClient;
use mcp_framing::telemetry::CLIENT_RESPONSES;

mod metrics_support;
#[path = "rmcp_support/scripted.rs"]
mod scripted;
use metrics_support::Recorded;
use scripted::{call_tool, framed, outcome_data, scripted_server, tool_result};

#[tokio::test]
async fn a_verified_message_that_is_not_utf8_fails_the_call_instead_of_being_altered() {
    let addr = scripted_server(Arc::new(|id, headers| {
        // The result's text holds a lone 0xFF byte: verified by its digest, yet not UTF-8.
        let mut message = tool_result(&id, "caf\u{e9}").to_vec();
        let at = message
            .windows(2)
            .position(|w| w == "\u{e9}".as_bytes())
            .unwrap();
        message.splice(at..at + 2, [0xff]);
        framed(headers, vec![Bytes::from(message)])
    }))
    .await;
    for binary in [false, true] {
        let client = FramingHttpClient::new(reqwest::Client::new()).binary(binary);
        let stats = client.stats();
        let result = call_tool(addr, client).await;
        let data = outcome_data(&result);
        assert_eq!(data["kind"], "InvalidUtf8", "{data}");
        assert_eq!(data["classification"], "invalid_message");
        assert_eq!(data["retryDecision"], "do_not_retry");
        // Only the handshake's result was handed to rmcp.
        assert_eq!((stats.verified_messages(), stats.failed()), (1, 1));
    }
}

#[tokio::test]
async fn a_server_that_ignores_the_opt_in_is_a_contract_violation_whatever_its_body() {
    // Decided from the response headers, before the body: without `Mcp-Framing` and a framed
    // content type the response is not framed, even when its body holds nothing that looks
    // unframed (SPEC.md §16). Before, these bodies were `Truncated { NoFrame }`: abandoned, and
    // retried.
    let answers: [(&str, Option<&str>, &str); 6] = [
        (
            "priming event only",
            Some("text/event-stream"),
            "id: 0\nretry: 3000\n\n",
        ),
        (
            "comments only",
            Some("text/event-stream"),
            ": ping\n\n: ping\n\n",
        ),
        ("empty SSE body", Some("text/event-stream"), ""),
        ("empty body", None, ""),
        ("empty binary body", Some("application/vnd.mcp-framing"), ""),
        ("JSON", Some("application/json"), "{}"),
    ];
    for (what, content_type, body) in answers {
        let addr = scripted_server(Arc::new(move |id, _| {
            let body = if body == "{}" {
                tool_result(&id, "unframed").to_vec()
            } else {
                body.as_bytes().to_vec()
            };
            let mut response = Body::from(body).into_response();
            if let Some(content_type) = content_type {
                response
                    .headers_mut()
                    .insert("content-type", content_type.parse().unwrap());
            }
            response
        }))
        .await;
        let metrics = Recorded::new();
        let _recording = metrics.install_local(); // this runtime's tasks run on this thread
        let client = FramingHttpClient::new(reqwest::Client::new());
        let stats = client.stats();
        let result = call_tool(addr, client).await;
        let data = outcome_data(&result);
        assert_eq!(data["kind"], "NotFramed", "{what}: {data}");
        assert_eq!(data["classification"], "contract_violation", "{what}");
        assert_eq!(data["retryDecision"], "do_not_retry", "{what}");
        assert_eq!((stats.failed(), stats.abandoned()), (1, 0), "{what}");
        let responses = |outcome| metrics.counter(CLIENT_RESPONSES, &[("outcome", outcome)]);
        assert_eq!(
            (responses("contract_violation"), responses("abandoned")),
            (1, 0),
            "{what}"
        );
    }
}
