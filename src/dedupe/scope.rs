//! Who a request key belongs to (SPEC.md §17.2): the caller's principal, the method and the
//! tool name.

use std::fmt;

use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::ids::RequestKey;

/// The caller a request key is scoped to: a SHA-256 digest of whatever identifies the caller
/// (an `Authorization` header, a user id, a tenant), or anonymous.
///
/// Only the digest is kept, so a store never holds a credential. Two callers with different
/// principals never share a record, whatever key they send (SPEC.md §17.2): a leaked key does not
/// hand out someone else's result.
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::Principal;
///
/// let alice = Principal::from_id(b"user:alice");
/// assert_eq!(alice, Principal::from_id(b"user:alice"));
/// assert_ne!(alice, Principal::from_id(b"user:bob"));
/// assert_ne!(alice, Principal::anonymous()); // a caller that presented no identity
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Principal(Option<[u8; 32]>);

impl Principal {
    /// The principal of a caller that presented no identity. All anonymous callers share it:
    /// on a server without authentication, request keys are the only separation (they are
    /// 128-bit random values, SPEC.md §10).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::Principal;
    ///
    /// // A server without authentication: every caller is the same principal.
    /// assert_eq!(Principal::anonymous(), Principal::anonymous());
    /// assert_ne!(Principal::anonymous(), Principal::from_id(b""));
    /// ```
    #[must_use]
    pub const fn anonymous() -> Self {
        Self(None)
    }

    /// The principal identified by `id` (any bytes: a user id, a tenant id, a token), kept as its
    /// SHA-256 digest.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::Principal;
    ///
    /// // The tenant and user an authentication layer verified, whatever token they came with.
    /// let tenant = "acme";
    /// let user = "alice";
    /// let principal = Principal::from_id(format!("{tenant}/{user}"));
    /// assert_eq!(principal, Principal::from_id(b"acme/alice"));
    /// assert_ne!(principal, Principal::from_id(b"acme/bob"));
    /// ```
    #[must_use]
    pub fn from_id(id: impl AsRef<[u8]>) -> Self {
        Self(Some(Sha256::digest(id.as_ref()).into()))
    }

    /// The default extraction: the SHA-256 of the request's `Authorization` header value(s),
    /// anonymous when there is none. Two requests with the same credentials share a principal;
    /// a rotated token is a new principal (its earlier keys no longer match).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::Principal;
    /// let mut headers = http::HeaderMap::new();
    /// assert_eq!(Principal::from_authorization(&headers), Principal::anonymous());
    /// headers.insert("authorization", "Bearer t0k3n".parse().unwrap());
    /// assert_eq!(Principal::from_authorization(&headers), Principal::from_id(b"Bearer t0k3n"));
    /// ```
    // Hidden: what `AuthorizationPrincipal` answers, the one way users take it; the tests call it.
    #[doc(hidden)]
    #[must_use]
    pub fn from_authorization(headers: &HeaderMap) -> Self {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let Some(first) = values.next() else {
            return Self::anonymous();
        };
        let mut hasher = Sha256::new();
        hasher.update(first.as_bytes());
        for value in values {
            // Several headers: joined as a list would be, so that their order counts.
            hasher.update(b",");
            hasher.update(value.as_bytes());
        }
        Self(Some(hasher.finalize().into()))
    }

    /// Whether this is the anonymous principal.
    ///
    /// # Examples
    ///
    /// See [`Principal`].
    // Hidden: the engine's question, asked by the tests.
    #[doc(hidden)]
    #[must_use]
    pub const fn is_anonymous(&self) -> bool {
        self.0.is_none()
    }

    /// The digest, `None` for the anonymous principal.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::Principal;
    /// assert_eq!(Principal::anonymous().digest(), None);
    /// assert_eq!(Principal::from_id("x").digest().map(|d| d.len()), Some(32));
    /// ```
    // Hidden: the engine hashes it into the store key; an extractor only builds principals.
    #[doc(hidden)]
    #[must_use]
    pub const fn digest(&self) -> Option<&[u8; 32]> {
        self.0.as_ref()
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("Principal(anonymous)"),
            // The first 8 bytes of the digest are enough to tell principals apart in a log.
            Some(digest) => write!(f, "Principal({}..)", hex(&digest[..8])),
        }
    }
}

/// Finds the caller's [`Principal`] in a request's headers (server side).
///
/// Implemented for [`AuthorizationPrincipal`] (the default) and for every
/// `Fn(&http::HeaderMap) -> Principal`, so a closure is an extractor:
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Principal, PrincipalExtractor};
///
/// // A gateway that authenticated the caller and passes the tenant on:
/// let by_tenant = |headers: &http::HeaderMap| match headers.get("x-tenant-id") {
///     Some(tenant) => Principal::from_id(tenant.as_bytes()),
///     None => Principal::anonymous(),
/// };
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-tenant-id", "acme".parse().unwrap());
/// assert_eq!(by_tenant.principal(&headers), Principal::from_id("acme"));
/// ```
pub trait PrincipalExtractor: Send + Sync + 'static {
    /// The principal of the request with these headers.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, MemoryStore, Principal, PrincipalExtractor};
    /// use mcp_framing::http::DedupeLayer;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// // Callers told apart by a header a gateway in front of the server sets after authentication.
    /// struct TenantHeader;
    /// impl PrincipalExtractor for TenantHeader {
    ///     fn principal(&self, headers: &http::HeaderMap) -> Principal {
    ///         match headers.get("x-tenant") {
    ///             Some(tenant) => Principal::from_id(tenant.as_bytes()),
    ///             None => Principal::anonymous(),
    ///         }
    ///     }
    /// }
    /// let as_tenant = |tenant: &'static str, mut request: http::Request<Full<Bytes>>| {
    ///     request.headers_mut().insert("x-tenant", http::HeaderValue::from_static(tenant));
    ///     request
    /// };
    /// let dedup = Deduplicator::new(MemoryStore::new());
    /// let mut service = DedupeLayer::new(dedup).principal(TenantHeader).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(send(&mut service, as_tenant("acme", tools_call(key, "t"))).await, "execute");
    /// assert_eq!(send(&mut service, as_tenant("acme", tools_call(key, "t"))).await, "replay");
    /// // Another tenant sending the same key is another caller: its call runs, it gets no one else's result.
    /// assert_eq!(send(&mut service, as_tenant("umbrella", tools_call(key, "t"))).await, "execute");
    /// # });
    /// # }
    /// ```
    fn principal(&self, headers: &HeaderMap) -> Principal;
}

impl<F> PrincipalExtractor for F
where
    F: Fn(&HeaderMap) -> Principal + Send + Sync + 'static,
{
    fn principal(&self, headers: &HeaderMap) -> Principal {
        self(headers)
    }
}

/// The default [`PrincipalExtractor`]: [`Principal::from_authorization`].
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{AuthorizationPrincipal, Principal, PrincipalExtractor};
/// let headers = http::HeaderMap::new();
/// assert_eq!(AuthorizationPrincipal.principal(&headers), Principal::anonymous());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthorizationPrincipal;

impl PrincipalExtractor for AuthorizationPrincipal {
    fn principal(&self, headers: &HeaderMap) -> Principal {
        Principal::from_authorization(headers)
    }
}

/// What a request key is scoped to (SPEC.md §17.2): the principal, the JSON-RPC method and, for
/// `tools/call`, the tool name. The same key under another scope is another record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    principal: Principal,
    method: String,
    tool: Option<String>,
}

impl Scope {
    /// The scope of `method` (and `tool`, the `params.name` of a `tools/call`) for `principal`.
    #[must_use]
    pub(crate) fn new(principal: Principal, method: impl Into<String>, tool: Option<&str>) -> Self {
        Self {
            principal,
            method: method.into(),
            tool: tool.map(str::to_owned),
        }
    }

    /// The JSON-RPC method.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{FingerprintRules, Principal};
    /// use mcp_framing::internals::dedupe::KeyedCall;
    /// let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"});
    /// let call = KeyedCall::from_request(Principal::anonymous(), Some(mcp_framing::RequestKey::random()),
    ///                                    &request, &FingerprintRules::default())?.expect("keyed");
    /// assert_eq!(call.scope().method(), "tools/call");
    /// # Ok::<(), mcp_framing::internals::dedupe::KeyedCallError>(())
    /// ```
    #[must_use]
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The tool name, for a `tools/call`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{FingerprintRules, Principal};
    /// use mcp_framing::internals::dedupe::KeyedCall;
    /// let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
    ///                                  "params": {"name": "t", "arguments": {}}});
    /// let call = KeyedCall::from_request(Principal::anonymous(), Some(mcp_framing::RequestKey::random()),
    ///                                    &request, &FingerprintRules::default())?.expect("keyed");
    /// assert_eq!(call.scope().tool(), Some("t"));
    /// # Ok::<(), mcp_framing::internals::dedupe::KeyedCallError>(())
    /// ```
    #[must_use]
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The store key of `key` in this scope (SPEC.md §17.2): the SHA-256 of a domain tag, the
    /// principal, the method, the tool name and the request key, each length-delimited so that
    /// no two scopes encode alike. A store sees only this digest: no credential, no tool name.
    #[must_use]
    pub(crate) fn store_key(&self, key: RequestKey) -> StoreKey {
        let mut hasher = Sha256::new();
        hasher.update(b"mcp-framing/dedupe/v1\0");
        match &self.principal.0 {
            None => hasher.update([0]),
            Some(digest) => {
                hasher.update([1]);
                hasher.update(digest);
            }
        }
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_be_bytes());
            hasher.update(bytes);
        };
        field(self.method.as_bytes());
        match &self.tool {
            None => field(&[]),
            Some(tool) => {
                // A tool named "" and no tool differ: the tag byte tells them apart.
                field(&[1]);
                field(tool.as_bytes());
            }
        }
        hasher.update(key.as_bytes());
        StoreKey(hasher.finalize().into())
    }
}

/// The key of one record in a [`DedupeStore`](super::DedupeStore): the digest of a [`Scope`]
/// and a request key ([`Scope::store_key`]). Shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreKey([u8; 32]);

impl StoreKey {
    /// The 32 digest bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreKey({self})")
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Principal, Scope};
    use crate::ids::RequestKey;

    #[test]
    fn the_same_key_of_another_principal_or_tool_has_another_store_key() {
        let key = RequestKey::random();
        let alice = Scope::new(Principal::from_id("alice"), "tools/call", Some("send_email"));
        let bob = Scope::new(Principal::from_id("bob"), "tools/call", Some("send_email"));
        assert_ne!(alice.store_key(key), bob.store_key(key));
        let other_tool = Scope::new(Principal::from_id("alice"), "tools/call", Some("open_ticket"));
        assert_ne!(alice.store_key(key), other_tool.store_key(key));
        assert_eq!(alice.store_key(key), alice.clone().store_key(key));
    }
}
