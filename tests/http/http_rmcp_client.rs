//! `FramingHttpClient` (through rmcp's client transport) against a hand-scripted server that
//! answers the tool call the way a test needs: bytes that are not UTF-8, unframed answers,
//! results over the limits configured in rmcp's transport.

use std::sync::Arc;

use axum::body::Body;
use axum::response::IntoResponse;
use mcp_framing::mapping::Mapping;
use mcp_framing::rmcp_http::FramingHttpClient;

use crate::support::metrics_support;
use crate::support::scripted;
use metrics_support::Recorded;
use scripted::{
    call_tool, call_tool_with, framed, not_utf8_result, outcome_data, scripted_server,
    scripted_server_with_get, stalled, tool_result,
};

#[tokio::test]
async fn a_verified_message_that_is_not_utf8_fails_the_call_instead_of_being_altered() {
    let addr = scripted_server(not_utf8_result()).await;
    for mapping in [Mapping::Sse, Mapping::Binary] {
        let client = FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
        let stats = client.stats();
        let result = call_tool(addr, client).await;
        let data = outcome_data(&result);
        assert_eq!(data["kind"], "InvalidUtf8", "{data}");
        assert_eq!(data["classification"], "invalid_message");
        assert_eq!(data["retryDecision"], "do_not_retry");
        // Only the handshake's result was handed to rmcp.
        assert_eq!((stats.verified_messages(), stats.failed()), (1, 1));
    }
    // The compatible mapping cannot carry such a message unchanged (SPEC.md §18.3): the server
    // aborts it (code 1) rather than alter it.
    let client = FramingHttpClient::new(reqwest::Client::new()).mapping(Mapping::Compat);
    let data = outcome_data(&call_tool(addr, client).await);
    assert_eq!(data["kind"], "PeerAbort", "{data}");
    assert!(
        data["detail"].as_str().unwrap().contains("not UTF-8"),
        "{data}"
    );
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
        let responses =
            |outcome| metrics.counter("mcp_framing.client.responses", &[("outcome", outcome)]);
        assert_eq!(
            (responses("contract_violation"), responses("abandoned")),
            (1, 0),
            "{what}"
        );
    }
}

/// A server whose tool call returns a text result of `len` bytes, framed.
async fn result_server(len: usize) -> std::net::SocketAddr {
    scripted_server(Arc::new(move |id, headers| {
        framed(headers, vec![tool_result(&id, &"r".repeat(len))])
    }))
    .await
}

#[tokio::test]
async fn the_limits_configured_in_rmcps_transport_hold_for_framed_responses() {
    // rmcp 3.11 passes `StreamableHttpResponseLimits` to `post_message_with_response_limits`: a
    // client that ignores them loses what its user configured. A framed message is bounded by
    // both the JSON body limit and the SSE event limit.
    let small = result_server(32 * 1024).await;
    let large = result_server(100 * 1024).await;
    type Config =
        fn(
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
        ) -> rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let configs: [(&str, Config); 2] = [
        ("max_json_response_size", |c| {
            c.max_json_response_size(64 * 1024)
        }),
        ("max_sse_event_size", |c| c.max_sse_event_size(64 * 1024)),
    ];
    for (what, config) in configs {
        for mapping in Mapping::ALL {
            let client = || FramingHttpClient::new(reqwest::Client::new()).mapping(mapping);
            let result = call_tool_with(small, client(), config).await;
            result.unwrap_or_else(|err| panic!("{what}, {mapping:?}: {err}"));
            // The client announced its limits (SPEC.md §11.3, §16): the server, told, aborts
            // with code 5 rather than sending what the client would refuse.
            let result = call_tool_with(large, client(), config).await;
            let data = outcome_data(&result);
            assert_eq!(data["kind"], "PeerAbort", "{what}, {mapping:?}: {data}");
            assert_eq!(data["classification"], "aborted", "{what}: {data}");
            let detail = data["detail"].as_str().unwrap();
            assert!(detail.contains("message too large"), "{what}: {detail}");
            assert_eq!(data["retryDecision"], "do_not_retry", "{what}: {data}");
        }
    }
}

#[tokio::test]
async fn the_error_body_limit_configured_in_rmcps_transport_bounds_the_diagnostic_text() {
    let addr = scripted_server(Arc::new(|_, _| {
        let page = format!("upstream down {}", "x".repeat(1 << 20));
        (http::StatusCode::BAD_GATEWAY, page).into_response()
    }))
    .await;
    let client = FramingHttpClient::new(reqwest::Client::new());
    let result = call_tool_with(addr, client, |c| c.max_error_response_size(100)).await;
    let err = result.expect_err("a 502 fails the call").to_string();
    assert!(err.contains("HTTP 502"), "{err}");
    assert!(
        err.contains("upstream down xxx"),
        "the diagnostic prefix is kept: {err}"
    );
    assert!(
        err.len() < 400,
        "at most 100 bytes of the body: {} bytes",
        err.len()
    );
}

#[tokio::test]
async fn the_get_stream_enforces_the_sse_event_limit_it_is_given() {
    use futures_util::StreamExt;
    use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpError};
    let small = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}"#;
    let large = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{}"}}}}"#,
        "y".repeat(4096)
    );
    let body: &'static str = Box::leak(
        format!(": ping\n\nevent: message\ndata: {small}\n\nevent: message\ndata: {large}\n\n")
            .into_boxed_str(),
    );
    let addr = scripted_server_with_get(
        Arc::new(|id, headers| framed(headers, vec![tool_result(&id, "")])),
        Some(body),
    )
    .await;
    let client = FramingHttpClient::new(reqwest::Client::new());
    let uri: Arc<str> = format!("http://{addr}/mcp").into();
    let mut stream = client
        .get_stream_with_max_sse_event_size(
            uri.clone(),
            Some("s".into()),
            None,
            None,
            Default::default(),
            1024,
        )
        .await
        .expect("the server offers a GET stream");
    let first = stream
        .next()
        .await
        .expect("an event")
        .expect("within the limit");
    assert_eq!(first.data.as_deref(), Some(small));
    let second = stream.next().await.expect("an item");
    let err = second.expect_err("an event over the limit is an error, not delivered");
    assert!(err.to_string().contains("1024"), "{err}");
    assert!(stream.next().await.is_none(), "nothing after the error");

    // A server without a GET stream: rmcp skips the standalone stream.
    let addr = result_server(10).await;
    let result = client
        .get_stream_with_max_sse_event_size(
            format!("http://{addr}/mcp").into(),
            Some("s".into()),
            None,
            None,
            Default::default(),
            1024,
        )
        .await;
    assert!(matches!(
        result,
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    ));
}

#[tokio::test]
async fn a_response_on_the_get_stream_is_refused_because_it_cannot_be_verified() {
    use futures_util::StreamExt;
    use rmcp::transport::streamable_http_client::StreamableHttpClient;
    // Responses are framed on their POST; one replayed on the GET stream would bypass that.
    let body = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
    let addr = scripted_server_with_get(
        Arc::new(|id, headers| framed(headers, vec![tool_result(&id, "")])),
        Some(body),
    )
    .await;
    let client = FramingHttpClient::new(reqwest::Client::new());
    let mut stream = client
        .get_stream_with_max_sse_event_size(
            format!("http://{addr}/mcp").into(),
            Some("s".into()),
            Some("41".into()),
            None,
            Default::default(),
            1 << 20,
        )
        .await
        .expect("a GET stream");
    let err = stream.next().await.expect("an item").expect_err("refused");
    assert!(err.to_string().contains("cannot be verified"), "{err}");
}

#[tokio::test]
async fn a_server_that_stops_sending_frames_is_abandoned_after_the_idle_timeout() {
    let addr = scripted_server(Arc::new(|_, headers| stalled(headers))).await;
    for mapping in Mapping::ALL {
        let idle = std::time::Duration::from_millis(300);
        let client = FramingHttpClient::new(reqwest::Client::new())
            .mapping(mapping)
            .idle_timeout(Some(idle));
        let stats = client.stats();
        let started = std::time::Instant::now();
        let result = call_tool(addr, client).await;
        let data = outcome_data(&result);
        assert_eq!(data["kind"], "IdleTimeout", "{data}");
        assert_eq!(data["classification"], "abandoned");
        assert_eq!(
            data["retryDecision"], "surface_to_caller",
            "abandoned; keyed, but this server declares no deduplication (SPEC.md §11.6)"
        );
        // FramedBody holds the HEAD frame until the first item, so that they leave in one
        // write: a server that stalls before its first message sent no frame at all.
        assert_eq!(data["framesReceived"], 0, "nothing arrived");
        assert_eq!(stats.abandoned(), 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}
