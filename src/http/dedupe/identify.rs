//! Which request is a keyed call of a deduplicated method (SPEC.md §17.10): one JSON text read
//! strictly, a single request with an id, a deduplicated method, a request key.

use serde_json::Value;

use crate::dedupe::{
    Deduplicator, KeyedCall, Principal, PrincipalExtractor, RequestJsonError, parse_request_json,
};
use crate::ids::RequestKey;

/// A layer's configuration, shared by every service it makes (here, below the layer and the
/// service that both read it, so neither file imports the other for it).
pub(super) struct Config {
    pub(super) dedup: Deduplicator,
    pub(super) principal: Box<dyn PrincipalExtractor>,
    pub(super) methods: Vec<String>,
    pub(super) max_request_bytes: usize,
}

/// What a request body is to the layer.
pub(super) enum Identified {
    PassThrough,
    NotJson(RequestJsonError),
    Invalid(String),
    Keyed(KeyedCall, Value),
}

pub(super) fn identify(
    shared: &Config,
    principal: Principal,
    header_key: Option<RequestKey>,
    post: bool,
    bytes: &[u8],
) -> Identified {
    // A POST body must be one JSON text, read strictly (SPEC.md §17.10: UTF-8, nesting bounded,
    // no duplicate member names); else it is answered with a JSON-RPC parse error. Only a
    // single JSON-RPC request of a deduplicated method is a candidate; anything else
    // (notifications, responses, batches, other HTTP methods) is the inner service's.
    let request = match parse_request_json(bytes) {
        Ok(request) => request,
        Err(err) if post => return Identified::NotJson(err),
        Err(_) => return Identified::PassThrough,
    };
    let Some(id) = request.get("id").cloned() else {
        return Identified::PassThrough;
    };
    let deduplicated = request
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| shared.methods.iter().any(|d| d == m));
    if !deduplicated {
        return Identified::PassThrough;
    }
    match KeyedCall::from_request(principal, header_key, &request, shared.dedup.rules()) {
        Ok(Some(call)) => Identified::Keyed(call, id),
        Ok(None) => Identified::PassThrough,
        Err(err) => Identified::Invalid(err.to_string()),
    }
}
