//! Request keys and attempt ids (SPEC.md §3 HEAD, §4, §10).

use std::fmt;
use std::str::FromStr;

/// Why a string (or 16 bytes) is not a 128-bit identifier: not 32 hex digits, or, for a
/// [`RequestKey`], the all-zero value that means "no key" on the wire.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// assert!("not hex".parse::<RequestKey>().is_err());
/// let zero = "0".repeat(32).parse::<RequestKey>().unwrap_err();
/// assert_eq!(zero.to_string(), "the all-zero request key means \"no key\" and is not a key");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseIdError(IdErrorKind);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdErrorKind {
    NotHex,
    ZeroKey,
}

impl fmt::Display for ParseIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            IdErrorKind::NotHex => "expected 32 hex digits for a 128-bit id",
            IdErrorKind::ZeroKey => "the all-zero request key means \"no key\" and is not a key",
        })
    }
}

impl std::error::Error for ParseIdError {}

/// Parses 32 hex digits (either case) into 16 bytes.
fn parse_hex(s: &str) -> Result<[u8; 16], ParseIdError> {
    let raw = s.as_bytes();
    if raw.len() != 32 {
        return Err(ParseIdError(IdErrorKind::NotHex));
    }
    let mut out = [0u8; 16];
    for (i, pair) in raw.chunks_exact(2).enumerate() {
        let hi = hex_val(pair[0]).ok_or(ParseIdError(IdErrorKind::NotHex))?;
        let lo = hex_val(pair[1]).ok_or(ParseIdError(IdErrorKind::NotHex))?;
        out[i] = (hi << 4) | lo;
    }
    Ok(out)
}

/// The 16 bytes as 32 lowercase hex digits.
fn write_hex(bytes: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for byte in bytes {
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; 16]);

        impl $name {
            /// The 16 raw bytes.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("use mcp_framing::", stringify!($name), ";")]
            #[doc = concat!("assert_eq!(", stringify!($name), "::from_bytes([1; 16]).as_bytes(), &[1; 16]);")]
            /// ```
            // Hidden: ids travel as 32 hex digits (`Display`, `FromStr`, serde); the raw bytes
            // are the frame layer's, the stores' and the tests'.
            #[doc(hidden)]
            #[must_use]
            pub const fn as_bytes(&self) -> &[u8; 16] {
                &self.0
            }
        }

        impl fmt::Display for $name {
            /// Formats as 32 lowercase hex digits.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_hex(&self.0, f)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

    };
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

id_type!(
    /// A client-generated random 128-bit key naming one logical request, reused across its
    /// retries (SPEC.md §10). The server echoes it in the stream's HEAD frame.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::RequestKey;
    ///
    /// let key = RequestKey::random();
    /// let header_value = key.to_string(); // 32 lowercase hex digits
    /// assert_eq!(header_value.parse::<RequestKey>(), Ok(key));
    /// ```
    RequestKey
);

id_type!(
    /// A server-drawn random 128-bit id of one response attempt (SPEC.md §3 HEAD). Its first four
    /// bytes are the stream's first sequence number (SPEC.md §4), so two attempts of one request
    /// cannot be spliced at a frame boundary without the sequence check noticing.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{AttemptId, StreamHead};
    ///
    /// // Each response attempt draws its own id (`StreamHead::for_request`); a client reads it in
    /// // the HEAD it verified (`Event::Opened`, `Outcome::head`).
    /// let (first, retry) = (StreamHead::for_request(None), StreamHead::for_request(None));
    /// assert_ne!(first.attempt_id, retry.attempt_id);
    /// let logged = first.attempt_id.to_string(); // 32 lowercase hex digits
    /// assert_eq!(logged.parse::<AttemptId>(), Ok(first.attempt_id));
    /// ```
    AttemptId
);

/// Draws 16 bytes from the operating system's CSPRNG.
fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system has no random source");
    bytes
}

impl AttemptId {
    /// Draws a fresh id from the operating system's CSPRNG.
    ///
    /// # Panics
    ///
    /// If the operating system has no random source (`getrandom` fails), which no supported
    /// platform does.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::AttemptId;
    /// assert_ne!(AttemptId::random(), AttemptId::random());
    /// ```
    // Hidden: a server draws one per response (`StreamHead::for_request`); the tests and the
    // layers call it.
    #[doc(hidden)]
    #[must_use]
    pub fn random() -> Self {
        Self(random_bytes())
    }

    /// Wraps 16 raw bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::AttemptId;
    /// assert_eq!(AttemptId::from_bytes([0xab; 16]).to_string(), "ab".repeat(16));
    /// ```
    // Hidden: ids travel as 32 hex digits (`Display`, `FromStr`, serde); the raw bytes are the
    // frame layer's, the stores' and the tests'.
    #[doc(hidden)]
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The sequence number of this attempt's HEAD frame: the id's first four bytes, big-endian
    /// (SPEC.md §4).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::AttemptId;
    /// assert_eq!(AttemptId::from_bytes([0; 16]).initial_sequence(), 0);
    /// ```
    // Hidden: the encoder's and the decoder's (SPEC.md §4); the CLI prints it.
    #[doc(hidden)]
    #[must_use]
    pub const fn initial_sequence(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }
}

impl fmt::Debug for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AttemptId({self})")
    }
}

impl FromStr for AttemptId {
    type Err = ParseIdError;

    /// Parses 32 hex digits (either case).
    ///
    /// # Errors
    ///
    /// [`ParseIdError`] if the string is not exactly 32 hex digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_hex(s).map(Self)
    }
}

/// On the wire, 16 zero bytes in HEAD mean "the request carried no key" (SPEC.md §3).
pub(crate) const NO_KEY: [u8; 16] = [0; 16];

impl RequestKey {
    /// Draws a fresh key from the operating system's CSPRNG (never the all-zero value, which
    /// means "no key" on the wire).
    ///
    /// # Panics
    ///
    /// If the operating system has no random source (`getrandom` fails), which no supported
    /// platform does.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::RequestKey;
    /// assert_ne!(RequestKey::random(), RequestKey::random());
    /// ```
    #[must_use]
    pub fn random() -> Self {
        loop {
            let bytes = random_bytes();
            if bytes != NO_KEY {
                return Self(bytes);
            }
        }
    }

    /// Wraps 16 raw bytes; for bytes that may be all zero (read from storage or from a peer) use
    /// [`RequestKey::try_from`], which refuses them instead.
    ///
    /// # Panics
    ///
    /// If the bytes are all zero: that value means "no key" on the wire (SPEC.md §3, §10), so a
    /// key with it would be read back as none. In a `const` it fails to compile.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::RequestKey;
    /// const KEY: RequestKey = RequestKey::from_bytes([0xab; 16]);
    /// assert_eq!(KEY.to_string(), "ab".repeat(16));
    /// ```
    // Hidden: ids travel as 32 hex digits (`Display`, `FromStr`, serde); the raw bytes are the
    // frame layer's, the stores' and the tests'.
    #[doc(hidden)]
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != 0 {
                return Self(bytes);
            }
            i += 1;
        }
        panic!("the all-zero request key means \"no key\" and is not a key");
    }

    /// A fingerprint of the key for logs, traces and error messages: the first 8 bytes of the
    /// SHA-256 of the key's 16 bytes, shown as `sha256:` and 16 hex digits (SPEC.md §10). With
    /// deduplication a request key can replay a stored result, so the crate never shows a key
    /// in full where it is logged; the fingerprint still correlates the attempts of a request.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::RequestKey;
    /// let key = RequestKey::random();
    /// let shown = key.fingerprint().to_string();
    /// assert!(shown.starts_with("sha256:") && shown.len() == 7 + 16);
    /// assert!(!shown.contains(&key.to_string()));
    /// assert_eq!(format!("{key:?}"), format!("RequestKey({shown})"));
    /// ```
    #[must_use]
    pub fn fingerprint(&self) -> KeyFingerprint {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(self.0);
        let mut out = [0u8; 8];
        out.copy_from_slice(&digest[..8]);
        KeyFingerprint(out)
    }
}

impl TryFrom<[u8; 16]> for RequestKey {
    type Error = ParseIdError;

    /// Wraps 16 raw bytes.
    ///
    /// # Errors
    ///
    /// [`ParseIdError`] if the bytes are all zero (the value that means "no key" on the wire).
    fn try_from(bytes: [u8; 16]) -> Result<Self, Self::Error> {
        if bytes == NO_KEY {
            Err(ParseIdError(IdErrorKind::ZeroKey))
        } else {
            Ok(Self(bytes))
        }
    }
}

impl fmt::Debug for RequestKey {
    /// Shows the [fingerprint](RequestKey::fingerprint), never the key: debug output ends up in
    /// logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestKey({})", self.fingerprint())
    }
}

impl FromStr for RequestKey {
    type Err = ParseIdError;

    /// Parses 32 hex digits (either case).
    ///
    /// # Errors
    ///
    /// [`ParseIdError`] if the string is not exactly 32 hex digits, or if they are all zero (the
    /// value that means "no key" on the wire, SPEC.md §10).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(parse_hex(s)?)
    }
}

/// The fingerprint of a [`RequestKey`], as logs, traces and error messages show it:
/// `sha256:` and 16 hex digits (see [`RequestKey::fingerprint`]).
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// let key = RequestKey::random();
/// assert_eq!(key.fingerprint(), key.fingerprint());
/// assert_ne!(key.fingerprint(), RequestKey::random().fingerprint());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyFingerprint([u8; 8]);

impl fmt::Display for KeyFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        write_hex(&self.0, f)
    }
}

impl fmt::Debug for KeyFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
