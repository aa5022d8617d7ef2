//! Request keys and attempt ids (SPEC.md §3 HEAD, §4, §10).

use std::fmt;
use std::str::FromStr;

/// Why a string is not a 128-bit identifier in 32 hex digits.
///
/// # Examples
///
/// ```
/// use mcp_framing::RequestKey;
/// assert!("not hex".parse::<RequestKey>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected 32 hex digits for a 128-bit id")]
pub struct ParseIdError(());

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; 16]);

        impl $name {
            /// Draws a fresh id from the operating system's CSPRNG.
            ///
            /// # Panics
            ///
            /// If the operating system has no random source (`getrandom` fails), which no
            /// supported platform does.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("use mcp_framing::", stringify!($name), ";")]
            #[doc = concat!("assert_ne!(", stringify!($name), "::random(), ", stringify!($name), "::random());")]
            /// ```
            #[must_use]
            pub fn random() -> Self {
                let mut bytes = [0u8; 16];
                getrandom::fill(&mut bytes).expect("the operating system has no random source");
                Self(bytes)
            }

            /// Wraps 16 raw bytes.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("use mcp_framing::", stringify!($name), ";")]
            #[doc = concat!("let id = ", stringify!($name), "::from_bytes([0xab; 16]);")]
            /// assert_eq!(id.to_string(), "ab".repeat(16));
            /// ```
            #[must_use]
            pub const fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(bytes)
            }

            /// The 16 raw bytes.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("use mcp_framing::", stringify!($name), ";")]
            #[doc = concat!("assert_eq!(", stringify!($name), "::from_bytes([1; 16]).as_bytes(), &[1; 16]);")]
            /// ```
            #[must_use]
            pub const fn as_bytes(&self) -> &[u8; 16] {
                &self.0
            }
        }

        impl fmt::Display for $name {
            /// Formats as 32 lowercase hex digits.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for byte in self.0 {
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($name))
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;

            /// Parses 32 hex digits (either case).
            ///
            /// # Errors
            ///
            /// [`ParseIdError`] if the string is not exactly 32 hex digits.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let raw = s.as_bytes();
                if raw.len() != 32 {
                    return Err(ParseIdError(()));
                }
                let mut out = [0u8; 16];
                for (i, pair) in raw.chunks_exact(2).enumerate() {
                    let hi = hex_val(pair[0]).ok_or(ParseIdError(()))?;
                    let lo = hex_val(pair[1]).ok_or(ParseIdError(()))?;
                    out[i] = (hi << 4) | lo;
                }
                Ok(Self(out))
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
    /// use mcp_framing::AttemptId;
    ///
    /// let id = AttemptId::from_bytes([0xA1, 0xA2, 0xA3, 0xA4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    /// assert_eq!(id.initial_sequence(), 0xA1A2_A3A4);
    /// ```
    AttemptId
);

impl AttemptId {
    /// The sequence number of this attempt's HEAD frame: the id's first four bytes, big-endian
    /// (SPEC.md §4).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::AttemptId;
    /// assert_eq!(AttemptId::from_bytes([0; 16]).initial_sequence(), 0);
    /// ```
    #[must_use]
    pub const fn initial_sequence(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }
}

impl RequestKey {
    /// The all-zero key, written in HEAD when the request carried no key (SPEC.md §3).
    pub(crate) const NONE: Self = Self([0; 16]);
}
