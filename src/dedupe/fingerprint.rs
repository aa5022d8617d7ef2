//! The fingerprint of a request's parameters (SPEC.md §17.3): SHA-256 of their canonical JSON,
//! `_meta` left out.

use std::fmt;
use std::io::{self, Write};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::scope::hex;

/// The SHA-256 of a request's canonical parameters ([`FingerprintRules::fingerprint`]). The same
/// request key with another fingerprint is a conflict (SPEC.md §17.3). Shown as 64 hex digits.
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::FingerprintRules;
/// use serde_json::json;
///
/// let rules = FingerprintRules::default();
/// let a = rules.fingerprint(&json!({"name": "send", "arguments": {"to": "a@example.com", "n": 1}}));
/// // Member order, whitespace and per-attempt `_meta` (progress token, request key) do not count:
/// let b = rules.fingerprint(&json!({"arguments": {"n": 1, "to": "a@example.com"}, "name": "send",
///                                    "_meta": {"progressToken": 7}}));
/// assert_eq!(a, b);
/// assert_ne!(a, rules.fingerprint(&json!({"name": "send", "arguments": {"to": "b@example.com", "n": 1}})));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// Wraps 32 digest bytes (a store reading a record back: `RedisStore`'s).
    #[cfg(any(test, feature = "redis"))]
    #[must_use]
    pub(crate) const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 digest bytes.
    #[cfg(test)]
    #[must_use]
    pub(crate) const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// Which parts of `params` the fingerprint covers (SPEC.md §17.3).
///
/// Everything in `params` except `params._meta`, by default. `_meta` is metadata about one
/// attempt, not the call: MCP puts the progress token there (a retry may draw a new one), this
/// crate puts the request key (which is the key, not the payload) and the client capabilities,
/// and tracing adds `traceparent`-style entries. Covering them would turn ordinary retries into
/// conflicts. A server whose tools read application data from `_meta` names those entries with
/// [`include_meta`](Self::include_meta), and they are fingerprinted too.
///
/// # Examples
///
/// ```
/// use mcp_framing::dedupe::{Deduplicator, FingerprintRules, MemoryStore};
/// use mcp_framing::http::DedupeLayer;
/// use serde_json::json;
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
/// # fn main() {
/// # paused_runtime().block_on(async {
/// // A server whose tools read the tenant from `_meta`: the tenant is part of the call.
/// let rules = FingerprintRules::default().include_meta(["com.example/tenant"]);
/// let dedup = Deduplicator::new(MemoryStore::new()).fingerprint_rules(rules);
/// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
/// let params = |tenant: &str| json!({"name": "t", "arguments": {}, "_meta": {"com.example/tenant": tenant}});
/// let key = RequestKey::random();
/// assert_eq!(send(&mut service, request(key, params("acme"))).await, "execute");
/// // The same key for another tenant is another call: refused, never answered with acme's result.
/// assert_eq!(send(&mut service, request(key, params("umbrella"))).await, "key_conflict");
/// # });
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FingerprintRules {
    include_meta: Vec<String>,
}

impl FingerprintRules {
    /// Also covers these `params._meta` entries (default: none).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::dedupe::{Deduplicator, FingerprintRules, MemoryStore};
    /// use mcp_framing::http::DedupeLayer;
    /// use serde_json::json;
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
    /// # fn main() {
    /// # paused_runtime().block_on(async {
    /// let params = |tenant: &str, token: u32| {
    ///     json!({"name": "t", "arguments": {}, "_meta": {"com.example/tenant": tenant, "progressToken": token}})
    /// };
    /// // By default `_meta` is left out: a retry that names another tenant is replayed.
    /// let mut service = DedupeLayer::new(Deduplicator::new(MemoryStore::new())).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(send(&mut service, request(key, params("acme", 1))).await, "execute");
    /// assert_eq!(send(&mut service, request(key, params("umbrella", 1))).await, "replay");
    ///
    /// let rules = FingerprintRules::default().include_meta(["com.example/tenant"]);
    /// let dedup = Deduplicator::new(MemoryStore::new()).fingerprint_rules(rules);
    /// let mut service = DedupeLayer::new(dedup).layer(Tool::new("{}"));
    /// let key = RequestKey::random();
    /// assert_eq!(send(&mut service, request(key, params("acme", 1))).await, "execute");
    /// assert_eq!(send(&mut service, request(key, params("umbrella", 1))).await, "key_conflict");
    /// // Other `_meta` entries (a new progress token on a retry) still do not count:
    /// assert_eq!(send(&mut service, request(key, params("acme", 2))).await, "replay");
    /// # });
    /// # }
    /// ```
    #[must_use]
    pub fn include_meta<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.include_meta.extend(keys.into_iter().map(Into::into));
        self.include_meta.sort();
        self.include_meta.dedup();
        self
    }

    /// The fingerprint of a request's `params` (pass `Value::Null` when the request has none):
    /// SHA-256 of [`canonical_json`] of `params` without `_meta`, or with a `_meta` holding only
    /// the [`include_meta`](Self::include_meta) entries present (left out when none is).
    ///
    /// # Examples
    ///
    /// See [`Fingerprint`].
    // Hidden: the engine fingerprints each call; users choose the rules (`include_meta`).
    #[doc(hidden)]
    #[must_use]
    pub fn fingerprint(&self, params: &Value) -> Fingerprint {
        let mut hasher = HashWriter(Sha256::new());
        match params {
            Value::Object(map) if map.contains_key("_meta") => {
                let mut kept = map.clone();
                let meta = kept.remove("_meta");
                if let Some(Value::Object(meta)) = meta {
                    let included: serde_json::Map<String, Value> = meta
                        .into_iter()
                        .filter(|(k, _)| self.include_meta.binary_search(k).is_ok())
                        .collect();
                    if !included.is_empty() {
                        kept.insert("_meta".to_owned(), Value::Object(included));
                    }
                }
                write_canonical(&Value::Object(kept), &mut hasher)
            }
            _ => write_canonical(params, &mut hasher),
        }
        .expect("hashing does not fail");
        Fingerprint(hasher.0.finalize().into())
    }
}

/// The canonical JSON text of `value` (SPEC.md §17.3): no whitespace; object members sorted by
/// key, keys compared as UTF-8 byte strings (which is Unicode code point order); strings with
/// only `"`, `\` and U+0000..=U+001F escaped (`\b \f \n \r \t`, else `\u00xx` in lowercase hex),
/// everything else as raw UTF-8; integers in plain decimal; other numbers in the shortest form
/// that reads back as the same IEEE 754 double (so `1` and `1.0` differ, `1e2` is `100.0`; laid
/// out as SPEC.md §17.12.1 says, `1e+16`, `0.00001`, `1e-6`);
/// `true`, `false`, `null`; arrays in order.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::dedupe::canonical_json;
/// let value: serde_json::Value = serde_json::from_str(r#"{ "b": [1, 2.50, "x/\u00e9"], "a": {"é": null, "z": true} }"#).unwrap();
/// assert_eq!(String::from_utf8(canonical_json(&value)).unwrap(),
///            r#"{"a":{"z":true,"é":null},"b":[1,2.5,"x/é"]}"#);
/// ```
#[must_use]
pub fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(value, &mut out).expect("writing to a Vec does not fail");
    out
}

fn write_canonical<W: Write>(value: &Value, out: &mut W) -> io::Result<()> {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            // `String`'s order is byte order: UTF-8 bytes compare like code points.
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.write_all(b"{")?;
            for (i, (key, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, key)?;
                out.write_all(b":")?;
                write_canonical(value, out)?;
            }
            out.write_all(b"}")
        }
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(item, out)?;
            }
            out.write_all(b"]")
        }
        Value::Number(number) => match number.as_f64().filter(|_| number.is_f64()) {
            Some(double) => out.write_all(canonical_double(double).as_bytes()),
            // i64 and u64 in plain decimal.
            None => Ok(serde_json::to_writer(out, number)?),
        },
        // Strings (only `"`, `\` and controls escaped), booleans and null, as serde_json writes them.
        scalar => Ok(serde_json::to_writer(out, scalar)?),
    }
}

/// A finite double laid out as SPEC.md §17.12.1 says: the shortest digits that read back as
/// `double` (of two equally close, the even one, as JavaScript and Python choose), in positional
/// form when the decimal point falls within 16 digits after the first or 4 zeros before it, else
/// as `d.ddde+x`. The digits are `zmij`'s, the layout is written here: serde_json's float layout
/// changed between its versions (`1e20`, then `1e+20`), and a fingerprint must not depend on a
/// dependency's version.
fn canonical_double(double: f64) -> String {
    let mut buffer = zmij::Buffer::new();
    let (sign, digits, point) = decimal_digits(buffer.format_finite(double));
    if digits.is_empty() {
        return format!("{sign}0.0");
    }
    // The value is 0.d1..dn x 10^k.
    let (n, k) = (digits.len() as i64, point);
    let zeros = |count: i64| "0".repeat(usize::try_from(count).unwrap_or(0));
    if n <= k && k <= 16 {
        format!("{sign}{digits}{}.0", zeros(k - n))
    } else if 0 < k && k <= 16 {
        let (int, frac) = digits.split_at(usize::try_from(k).unwrap_or(0));
        format!("{sign}{int}.{frac}")
    } else if (-4..=0).contains(&k) {
        format!("{sign}0.{}{digits}", zeros(-k))
    } else {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let exponent = k - 1;
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{first}{point}{rest}e{exponent_sign}{}",
            exponent.unsigned_abs()
        )
    }
}

/// The sign, the significant digits (no leading or trailing zeros; empty for zero) and the
/// decimal point's position `k` (the value is 0.digits x 10^k) of a decimal number written in any
/// of the usual layouts (`-12.5`, `0.001`, `1e+20`, `1.5e-7`).
fn decimal_digits(text: &str) -> (&'static str, String, i64) {
    let (sign, unsigned) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().unwrap_or(0)),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = int.chars().chain(frac.chars()).collect();
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_matches('0').to_owned();
    (sign, digits, int.len() as i64 - leading as i64 + exponent)
}

struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Fingerprint;

    #[test]
    fn a_fingerprint_read_back_from_a_store_keeps_its_32_digest_bytes() {
        assert_eq!(Fingerprint::from_bytes([7; 32]).as_bytes(), &[7; 32]);
    }
}
