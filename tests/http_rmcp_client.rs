//! `FramingHttpClient` (through rmcp's client transport) against a hand-scripted server that
//! answers the tool call the way a test needs: bytes that are not UTF-8, unframed answers.

use std::sync::Arc;

use axum::body::Bytes;
use mcp_framing::rmcp_http::FramingHttpClient;

#[path = "rmcp_support/scripted.rs"]
mod scripted;
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
