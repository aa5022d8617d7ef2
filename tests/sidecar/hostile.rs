//! Upstreams that fail or lie, and clients that send bad requests: each gets a precise answer,
//! and the proxy stays up for the next request.

use bytes::Bytes;
use mcp_framing::http::opt_in_headers;
use mcp_framing::mapping::Mapping;
use mcp_framing::{AbortCode, BodyError, DecodeError, RequestKey};
use serde_json::{Value, json};

use crate::support::{
    LAST_CHUNK, Proxy, Step, chunk, chunked_head, decode, http, post_call, request_id,
    scripted_upstream, tools_call,
};

/// A final response for the request in `seen`, as one SSE event.
fn answer(seen: &crate::support::Seen) -> Vec<Step> {
    let id = request_id(&seen.body);
    let event = format!(
        "event: message\ndata: {}\n\n",
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}})
    );
    vec![
        Step::Write(chunked_head("text/event-stream")),
        Step::Write(chunk(event.as_bytes())),
        Step::Write(Bytes::from_static(LAST_CHUNK)),
    ]
}

/// POSTs a keyed `tools/call` (id `id`) that opted in to the binary mapping.
async fn framed_call(proxy: &Proxy, id: u64) -> reqwest::Response {
    post_call(proxy, opt_in_headers(RequestKey::random(), true), id).await
}

/// The ABORT a binary body ends with.
async fn abort_of(response: reqwest::Response) -> mcp_framing::Abort {
    let decoded = decode(Mapping::Binary, &response.bytes().await.unwrap());
    match decoded.end {
        Err(BodyError::Decode(DecodeError::PeerAbort(abort))) => abort,
        other => panic!(
            "expected an ABORT, got {other:?} after {:?}",
            decoded.messages
        ),
    }
}

/// The JSON-RPC error body of a response, checked to name `cause` and echo `id`.
async fn jsonrpc_error(response: reqwest::Response, status: u16, id: Value, cause: &str) -> String {
    if response.status() != status {
        panic!("{} {:?}", response.status(), response.text().await);
    }
    assert_eq!(response.headers()["content-type"], "application/json");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["id"], id, "{error}");
    assert_eq!(error["error"]["data"]["cause"], cause, "{error}");
    error["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_upstream_is_a_502_naming_it_with_the_requests_id() {
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = Proxy::start(&format!("http://{gone}/mcp"), &[]);
    let message = jsonrpc_error(
        framed_call(&proxy, 41).await,
        502,
        json!(41),
        "upstream_unreachable",
    )
    .await;
    assert!(message.contains(&gone.to_string()), "{message}");
    assert!(message.contains("refused"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_sends_no_head_in_time_is_a_504_then_the_proxy_serves_on() {
    let (upstream, _) = scripted_upstream(|seen| {
        if request_id(&seen.body) == json!(1) {
            vec![Step::Hang]
        } else {
            answer(seen)
        }
    })
    .await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--head-timeout", "1s"]);
    let message = jsonrpc_error(
        framed_call(&proxy, 1).await,
        504,
        json!(1),
        "upstream_head_timeout",
    )
    .await;
    assert!(message.contains("1s"), "{message}");
    let decoded = decode(
        Mapping::Binary,
        &framed_call(&proxy, 2).await.bytes().await.unwrap(),
    );
    decoded.end.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_instead_of_http_is_a_502() {
    let (upstream, _) = scripted_upstream(|_| {
        vec![
            Step::Write(Bytes::from_static(b"\x00\xff\xfeSSH-2.0-nonsense\r\n\r\n")),
            Step::Close,
        ]
    })
    .await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--dedupe", "off"]);
    jsonrpc_error(
        framed_call(&proxy, 9).await,
        502,
        json!(9),
        "upstream_protocol_error",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_cut_inside_its_body_is_an_abort_of_code_4() {
    let (upstream, _) = scripted_upstream(|_| {
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"res",
            )),
            Step::Close,
        ]
    })
    .await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--dedupe", "off"]);
    let abort = abort_of(framed_call(&proxy, 1).await).await;
    assert_eq!(abort.code, AbortCode::UpstreamFailed);
    assert!(
        abort.reason.starts_with("upstream body failed: "),
        "{}",
        abort.reason
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_never_ends_is_cut_at_the_idle_bound_as_an_abort_of_code_4() {
    let (upstream, _) = scripted_upstream(|_| {
        vec![
            // The head and the notification in one write: they arrive together, and only the
            // silence after them is timed.
            Step::Write(Bytes::from(
                [
                    chunked_head("text/event-stream"),
                    chunk(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"),
                ]
                .concat(),
            )),
            Step::Hang,
        ]
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--idle-timeout", "1s", "--dedupe", "off"],
    );
    let response = framed_call(&proxy, 1).await;
    let decoded = decode(Mapping::Binary, &response.bytes().await.unwrap());
    assert_eq!(decoded.messages.len(), 1, "the notification is delivered");
    let Err(BodyError::Decode(DecodeError::PeerAbort(abort))) = decoded.end else {
        panic!("{:?}", decoded.end);
    };
    assert_eq!(abort.code, AbortCode::UpstreamFailed);
    assert!(
        abort.reason.contains("sent nothing for 1s"),
        "{}",
        abort.reason
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_line_is_an_abort_of_code_5_and_the_proxy_serves_on() {
    let (upstream, _) = scripted_upstream(|seen| {
        if request_id(&seen.body) != json!(1) {
            return answer(seen);
        }
        let mut steps = vec![Step::Write(chunked_head("text/event-stream"))];
        steps.push(Step::Write(chunk(b"data: ")));
        let piece = chunk(&[b'x'; 16 * 1024]);
        // 2 MiB of one line, then it goes on: far past the limit.
        steps.extend(std::iter::repeat_n(Step::Write(piece), 128));
        steps.push(Step::Hang);
        steps
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--max-message-bytes", "65536", "--dedupe", "off"],
    );
    let abort = abort_of(framed_call(&proxy, 1).await).await;
    assert_eq!(abort.code, AbortCode::MessageTooLarge);
    decode(
        Mapping::Binary,
        &framed_call(&proxy, 2).await.bytes().await.unwrap(),
    )
    .end
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_utf8_from_the_upstream_reaches_framing_clients_as_stock_sse_clients_read_it() {
    let (upstream, _) = scripted_upstream(|_| {
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\xfe\"}\n\n",
            )),
            Step::Write(Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await;
    let proxy = Proxy::start(&format!("http://{upstream}/mcp"), &["--dedupe", "off"]);
    let body = framed_call(&proxy, 1).await.bytes().await.unwrap();
    let decoded = decode(Mapping::Binary, &body);
    decoded.end.unwrap();
    // WHATWG SSE decodes UTF-8 with replacement: the framed message is what a stock client reads.
    assert_eq!(
        decoded.messages,
        ["{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\u{fffd}\u{fffd}\"}"]
    );
}

/// An upstream whose final event is `last` (after a notification), answering any request.
async fn upstream_ending_with(last: &'static [u8]) -> std::net::SocketAddr {
    let (upstream, _) = scripted_upstream(move |_| {
        vec![
            Step::Write(chunked_head("text/event-stream")),
            Step::Write(chunk(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n",
            )),
            Step::Write(chunk(last)),
            Step::Write(Bytes::from_static(LAST_CHUNK)),
        ]
    })
    .await;
    upstream
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_that_is_no_jsonrpc_message_or_answers_another_id_is_never_framed() {
    for (last, reason) in [
        (
            &b"event: message\ndata: <html>502 Bad Gateway</html>\n\n"[..],
            "not a JSON-RPC message",
        ),
        (
            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n\n",
            "answers id 99, not the request's 1",
        ),
    ] {
        let upstream = upstream_ending_with(last).await;
        let proxy = Proxy::start(
            &format!("http://{upstream}/mcp"),
            &["--dedupe", "off", "--frame-all", "compat"],
        );
        // A framing client (binary) and a stock client (compatible mapping): the notification,
        // then ABORT code 1 (an invalid inner response), never the event as a message.
        for (mapping, headers) in [
            (Mapping::Binary, opt_in_headers(RequestKey::random(), true)),
            (Mapping::Compat, reqwest::header::HeaderMap::new()),
        ] {
            let body = post_call(&proxy, headers, 1).await.bytes().await.unwrap();
            let decoded = decode(mapping, &body);
            assert_eq!(decoded.messages.len(), 1, "{mapping:?}: {decoded:?}");
            let Err(BodyError::Decode(DecodeError::PeerAbort(abort))) = &decoded.end else {
                panic!("{mapping:?}: {decoded:?}");
            };
            assert_eq!(abort.code, AbortCode::InternalError, "{mapping:?}");
            assert!(
                abort.reason.contains(reason),
                "{mapping:?}: {}",
                abort.reason
            );
            if mapping == Mapping::Compat {
                // Nor does a stock client read it: the event is not sent.
                let text =
                    String::from_utf8_lossy(&crate::support::without_records(&body)).into_owned();
                assert!(
                    !text.contains("502 Bad Gateway") && !text.contains("\"id\":99"),
                    "{text}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_precise_errors() {
    let (upstream, seen) = scripted_upstream(answer).await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--max-request-bytes", "100000"],
    );
    // Not JSON: deduplication reads it, JSON-RPC parse error.
    let response = http()
        .post(proxy.url("/mcp"))
        .headers(opt_in_headers(RequestKey::random(), true))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32700);
    // Declared too large: refused before a byte is read.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{{\"name\":\"t\",\"arguments\":{{\"x\":\"{}\"}}}}}}",
        "y".repeat(200_000)
    );
    let response = http()
        .post(proxy.url("/mcp"))
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    jsonrpc_error(response, 413, Value::Null, "request_too_large").await;
    // Too large without a length (chunked): refused when it passes the bound.
    let stream = futures::stream::iter(
        big.into_bytes()
            .chunks(8192)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let response = http()
        .post(proxy.url("/mcp"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    jsonrpc_error(response, 413, Value::Null, "request_too_large").await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    // And the proxy serves on.
    decode(
        Mapping::Binary,
        &framed_call(&proxy, 5).await.bytes().await.unwrap(),
    )
    .end
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_calls_is_bounded_and_the_excess_is_told_to_come_back() {
    let (upstream, seen) = scripted_upstream(|seen| {
        if request_id(&seen.body) == json!(0) {
            answer(seen)
        } else {
            vec![Step::Hang]
        }
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        // The bound is the sidecar's, whichever worker accepts a connection.
        &["--max-concurrent", "4", "--dedupe", "off", "--workers", "3"],
    );
    let mut held = Vec::new();
    for id in 1..=4 {
        let url = proxy.url("/mcp");
        held.push(tokio::spawn(async move {
            http()
                .post(url)
                .header("content-type", "application/json")
                .body(tools_call(id, "t", json!({})))
                .send()
                .await
        }));
    }
    // The four reach the upstream (and stay there): the bound is full.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while seen.lock().unwrap().len() < 4 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for id in 5..=40 {
        let response = http()
            .post(proxy.url("/mcp"))
            .header("content-type", "application/json")
            .body(tools_call(id, "t", json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["retry-after"], "1");
        jsonrpc_error(response, 503, Value::Null, "overloaded").await;
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        4,
        "the excess never reached the upstream"
    );
    // Their clients go: their places free up.
    for call in held {
        call.abort();
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let response = framed_call(&proxy, 0).await;
        if response.status() == 200 {
            decode(Mapping::Binary, &response.bytes().await.unwrap())
                .end
                .unwrap();
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the places never freed up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_of_a_known_length_passed_through_leave_their_upstream_connection_for_the_next_call()
 {
    // A JSON answer and an SSE answer with `Content-Length`, not framed: hyper ends the client's
    // response at the last byte the length promised, without asking the body for its end, and
    // the connection must still go back to the pool.
    let (upstream, seen) = scripted_upstream(|seen| {
        let id = request_id(&seen.body);
        let message = json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}).to_string();
        let (content_type, body) = if seen.head.contains("x-answer: sse") {
            (
                "text/event-stream",
                format!("event: message\ndata: {message}\n\n"),
            )
        } else {
            ("application/json", message)
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        vec![Step::Write(Bytes::from(head + &body))]
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--dedupe", "off", "--workers", "1"],
    );
    for id in 1..=6 {
        let answer = if id % 2 == 0 { "sse" } else { "json" };
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-answer", answer.parse().unwrap());
        let response = post_call(&proxy, headers, id).await;
        assert_eq!(response.status(), 200, "call {id}");
        let body = response.text().await.unwrap();
        assert!(body.contains(&format!("\"id\":{id}")), "{body}");
        assert_eq!(
            body.starts_with("event: message"),
            answer == "sse",
            "{body}"
        );
    }
    let connections: Vec<usize> = seen.lock().unwrap().iter().map(|s| s.connection).collect();
    assert_eq!(connections, [0; 6], "the calls' upstream connections");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_closes_each_connection_after_its_answer_gets_each_call_on_a_new_one() {
    let (upstream, seen) = scripted_upstream(|seen| {
        let mut steps = answer(seen);
        steps[0] = Step::Write(Bytes::from_static(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        ));
        steps.push(Step::Close);
        steps
    })
    .await;
    let proxy = Proxy::start(
        &format!("http://{upstream}/mcp"),
        &["--dedupe", "off", "--workers", "1"],
    );
    // Calls in sequence: a connection the upstream closed is never used again.
    for id in 1..=6 {
        let response = post_call(&proxy, reqwest::header::HeaderMap::new(), id).await;
        assert_eq!(response.status(), 200, "call {id}");
        let body = response.text().await.unwrap();
        assert!(body.contains(&format!("\"id\":{id}")), "{body}");
    }
    let connections: Vec<usize> = seen.lock().unwrap().iter().map(|s| s.connection).collect();
    assert_eq!(
        connections,
        [0, 1, 2, 3, 4, 5],
        "the calls' upstream connections"
    );
}
