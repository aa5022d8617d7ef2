//! `_meta` edits of a JSON-RPC request (SPEC.md §16): the framing capability of a 2026-07-28
//! request.

/// `_meta` key under which a 2026-07-28 request carries its client capabilities.
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a 2026-07-28 request's protocol version.
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The MCP revision of the requests a client sends without a session (`DiscoveringResolver`'s
/// `server/discover`, `RetryingClient`'s calls): 2026-07-28, in which every request carries its
/// revision and capabilities.
#[cfg(feature = "client")]
const STATELESS_VERSION: &str = "2026-07-28";

/// Makes `request` a 2026-07-28 one, unless it names a revision already: writes
/// [`STATELESS_VERSION`] as its `_meta` protocol version and empty client capabilities (when it
/// has none) into its `params` (made an object when it has none; a request whose `params` or
/// `_meta` is not an object is left as it is).
#[cfg(feature = "client")]
pub(crate) fn make_stateless(request: &mut serde_json::Value) {
    let Some(object) = request.as_object_mut() else {
        return;
    };
    let Some(params) = object
        .entry("params")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
    else {
        return;
    };
    let Some(meta) = params
        .entry("_meta")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
    else {
        return;
    };
    if meta.contains_key(META_PROTOCOL_VERSION) {
        return;
    }
    meta.insert(META_PROTOCOL_VERSION.to_owned(), STATELESS_VERSION.into());
    meta.entry(META_CLIENT_CAPABILITIES)
        .or_insert_with(|| serde_json::json!({}));
}

/// Declares the framing capability in a 2026-07-28 request (SPEC.md §16):
/// `params._meta["io.modelcontextprotocol/clientCapabilities"].extensions["io.github.mcp-framing/framing"]
/// = {"versions": [1]}`. Only requests that carry `_meta["io.modelcontextprotocol/protocolVersion"]`
/// (stateless requests carry their capabilities with them) are changed; returns whether it did.
// The clients' (feature `client`).
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn declare_framing_capability(request: &mut serde_json::Value) -> bool {
    let Some(meta) = request
        .get_mut("params")
        .and_then(|p| p.get_mut("_meta"))
        .and_then(serde_json::Value::as_object_mut)
    else {
        return false;
    };
    if !meta.contains_key(META_PROTOCOL_VERSION) {
        return false;
    }
    let capabilities = meta
        .entry(META_CLIENT_CAPABILITIES)
        .or_insert_with(|| serde_json::json!({}));
    let Some(extensions) = capabilities
        .as_object_mut()
        .map(|c| {
            c.entry("extensions")
                .or_insert_with(|| serde_json::json!({}))
        })
        .and_then(serde_json::Value::as_object_mut)
    else {
        return false;
    };
    extensions.insert(
        crate::contract::EXTENSION_KEY.to_owned(),
        serde_json::json!({"versions": [1]}),
    );
    true
}

#[cfg(test)]
mod tests {
    use super::declare_framing_capability;

    #[test]
    fn a_stateless_request_gets_the_framing_capability_and_a_legacy_one_is_left_alone() {
        let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        assert!(declare_framing_capability(&mut request));
        assert_eq!(
            request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
                ["io.github.mcp-framing/framing"],
            serde_json::json!({"versions": [1]})
        );
        let mut legacy = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        assert!(!declare_framing_capability(&mut legacy));
        assert_eq!(
            legacy,
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        );
    }
}
