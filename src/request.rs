//! How a request carries its request key and its opt-in to framing (SPEC.md §10).
//!
//! A client draws one [`RequestKey`] per logical request and sends it with every attempt of that
//! request, in the `Mcp-Framing-Request-Key` HTTP header (`http::REQUEST_KEY_HEADER`, feature
//! `http`) and in the JSON-RPC request's
//! `params._meta[`[`REQUEST_KEY_META`]`]`. The server echoes it in the stream head; a decoder built
//! with [`DecoderBuilder::expect_request_key`](crate::DecoderBuilder::expect_request_key) (as
//! the clients' decoders do) reports another key as
//! [`DecodeError::RequestKeyMismatch`](crate::DecodeError::RequestKeyMismatch), a cross-wired
//! response.
//!
//! ```
//! use mcp_framing::RequestKey;
//! use mcp_framing::request::{request_key, set_request_key};
//!
//! let key = RequestKey::random(); // once per logical request; reused on retries
//! let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
//!                                      "params": {"name": "search", "arguments": {}}});
//! set_request_key(&mut request, key)?;
//! let header = ("Mcp-Framing-Request-Key", key.to_string());
//! assert_eq!(request_key(&request)?, Some(key));
//! assert_eq!(header.1.len(), 32);
//! # Ok::<(), mcp_framing::request::RequestKeyError>(())
//! ```

use serde_json::{Map, Value};

use crate::ids::{ParseIdError, RequestKey};

/// The `params._meta` key carrying the request key as 32 lowercase hex digits (SPEC.md §10). A
/// reverse-DNS `{prefix}/{name}` key, as MCP requires for `_meta` keys outside its own prefixes.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// use mcp_framing::request::{REQUEST_KEY_META, request_key, set_request_key};
///
/// let key = RequestKey::random();
/// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
///     "params": {"name": "t", "arguments": {}}});
/// set_request_key(&mut request, key)?;
/// // A proxy that forwards to a backend outside the fleet takes the key out first:
/// request["params"]["_meta"].as_object_mut().unwrap().remove(REQUEST_KEY_META);
/// assert_eq!(request_key(&request)?, None);
/// # Ok::<(), mcp_framing::request::RequestKeyError>(())
/// ```
pub const REQUEST_KEY_META: &str = "io.github.mcp-framing/requestKey";

/// Why a JSON-RPC request's request key could not be written or read.
///
/// # Examples
///
/// ```
/// use mcp_framing::{request::{RequestKeyError, set_request_key}, RequestKey};
/// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1, 2]});
/// assert!(matches!(set_request_key(&mut request, RequestKey::random()),
///                  Err(RequestKeyError::NotAnObject { member: "params" })));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestKeyError {
    /// The request, its `params` or its `params._meta` is not a JSON object, so it cannot carry
    /// the key (by-position `params` have no `_meta`).
    #[error("the {member} is not a JSON object, so it cannot carry the request key")]
    NotAnObject {
        /// Which: `"request"`, `"params"` or `"params._meta"`.
        member: &'static str,
    },
    /// The key is present but not 32 hex digits.
    #[error("params._meta[\"{REQUEST_KEY_META}\"] is not a request key: {0}")]
    InvalidKey(#[source] ParseIdError),
}

/// Writes `key` into a JSON-RPC request's `params._meta[REQUEST_KEY_META]`, creating `params` and
/// `_meta` if absent, replacing an earlier key.
///
/// # Errors
///
/// [`RequestKeyError`] if the request, its `params` or its `_meta` is not a JSON object.
///
/// # Examples
///
/// ```
/// use mcp_framing::{request::{REQUEST_KEY_META, set_request_key}, RequestKey};
/// let key = RequestKey::random();
/// let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
/// set_request_key(&mut request, key)?;
/// assert_eq!(request["params"]["_meta"][REQUEST_KEY_META], key.to_string());
/// # Ok::<(), mcp_framing::request::RequestKeyError>(())
/// ```
pub fn set_request_key(request: &mut Value, key: RequestKey) -> Result<(), RequestKeyError> {
    let request = request
        .as_object_mut()
        .ok_or(RequestKeyError::NotAnObject { member: "request" })?;
    let params = request
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(RequestKeyError::NotAnObject { member: "params" })?;
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(RequestKeyError::NotAnObject {
            member: "params._meta",
        })?;
    meta.insert(REQUEST_KEY_META.to_owned(), Value::String(key.to_string()));
    Ok(())
}

/// Reads the request key from a JSON-RPC request's `params._meta[REQUEST_KEY_META]` (the server
/// side, or a client checking what it sends). `Ok(None)` when there is none.
///
/// # Errors
///
/// [`RequestKeyError`] if the request is not an object, or the key is present but is not 32 hex
/// digits.
///
/// # Examples
///
/// ```
/// use mcp_framing::request::{request_key, RequestKeyError};
/// let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
/// assert_eq!(request_key(&request), Ok(None));
/// let bad = serde_json::json!({"params": {"_meta": {"io.github.mcp-framing/requestKey": "xyz"}}});
/// assert!(matches!(request_key(&bad), Err(RequestKeyError::InvalidKey(_))));
/// ```
pub fn request_key(request: &Value) -> Result<Option<RequestKey>, RequestKeyError> {
    let request = request
        .as_object()
        .ok_or(RequestKeyError::NotAnObject { member: "request" })?;
    let Some(raw) = request
        .get("params")
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(REQUEST_KEY_META))
    else {
        return Ok(None);
    };
    // A value that is not a string is not 32 hex digits either.
    raw.as_str()
        .unwrap_or_default()
        .parse()
        .map(Some)
        .map_err(RequestKeyError::InvalidKey)
}
