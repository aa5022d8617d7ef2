//! The Streamable HTTP headers of a JSON-RPC request (MCP 2026-07-28, SEP-2243), written from the
//! request itself: `MCP-Protocol-Version` (which must match `_meta`), `Mcp-Method` and `Mcp-Name`.
//! Both clients' requests get them here: `DiscoveringResolver`'s `server/discover` and every
//! attempt of the client engine.

use bytes::BytesMut;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::meta::META_PROTOCOL_VERSION;

/// `MCP-Protocol-Version`: the revision the request speaks.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method`: the JSON-RPC method, for intermediaries that route without reading the body.
const METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`: the tool, prompt, resource or task the request names.
const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Adds to `headers` the Streamable HTTP headers of `request` that it does not carry already
/// (rmcp's client worker writes its own through the headers it hands the transport): for a
/// request that names its revision in `_meta` (`io.modelcontextprotocol/protocolVersion`, which
/// 2026-07-28 requires of every request), that revision as `MCP-Protocol-Version`, its method as
/// `Mcp-Method` and, for the methods that name something, `Mcp-Name` (`params.name` of
/// `tools/call` and `prompts/get`, `params.uri` of `resources/read`, `resources/subscribe` and
/// `resources/unsubscribe`, `params.taskId` of `tasks/get`, `tasks/update` and `tasks/cancel`;
/// in the `=?base64?…?=` form when the value is not plain visible ASCII). A request of an
/// earlier revision (no version in `_meta`) gets none: its session or the server's default
/// decides its revision.
pub(crate) fn add_request_headers(request: &Value, headers: &mut HeaderMap) {
    let Some(version) = request
        .get("params")
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
    else {
        return;
    };
    let method = request.get("method").and_then(Value::as_str);
    let name = method.and_then(|method| name_of(method, request.get("params")));
    for (header, value) in [
        (PROTOCOL_VERSION, Some(version.to_owned())),
        (METHOD, method.map(str::to_owned)),
        (NAME, name.map(header_text)),
    ] {
        let Some(value) = value.and_then(|value| HeaderValue::try_from(value).ok()) else {
            continue;
        };
        headers.entry(header).or_insert(value);
    }
}

/// What `Mcp-Name` carries for `method`, if the method names something.
fn name_of<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params?.get(key)?.as_str()
}

/// `value` as a header value: as it is when it is visible ASCII without a leading or trailing
/// blank (and does not look like the base64 form), else `=?base64?…?=` around its base64.
fn header_text(value: &str) -> String {
    let blank_at_an_end = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let visible_ascii = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let looks_encoded = value.starts_with("=?base64?") && value.ends_with("?=");
    if visible_ascii && !blank_at_an_end && !looks_encoded {
        return value.to_owned();
    }
    let mut text = BytesMut::from(&b"=?base64?"[..]);
    crate::mapping::sse::put_base64(value.as_bytes(), &mut text);
    text.extend_from_slice(b"?=");
    String::from_utf8(text.to_vec()).expect("base64 is ASCII")
}
