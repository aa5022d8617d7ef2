//! The 20-byte frame header (SPEC.md §2): layout, the "header first" checks, serialization.

use bytes::{BufMut, BytesMut};

use super::crc::{crc32, crc32_header};
use super::kind::FrameKind;
use super::layout::{HEADER_LEN, MAGIC, VERSION};

/// A frame header as it appears on the wire, before any stream rule is applied.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::frame::{FrameHeader, HEADER_LEN};
///
/// let payload = b"{}";
/// let header = FrameHeader::for_payload(0x02, 7, payload);
/// let bytes = header.to_bytes();
/// assert_eq!(bytes.len(), HEADER_LEN);
/// assert_eq!(FrameHeader::read(&bytes), header);
/// assert!(FrameHeader::header_crc_ok(&bytes));
///
/// let mut corrupt = bytes;
/// corrupt[9] ^= 0x01; // flip a bit of the length field
/// assert!(!FrameHeader::header_crc_ok(&corrupt));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The raw kind byte (see [`FrameKind::from_byte`](super::FrameKind::from_byte)).
    pub kind: u8,
    /// The frame's sequence number (SPEC.md §4).
    pub sequence: u32,
    /// The payload length in bytes.
    pub len: u32,
    /// The CRC-32 of the payload.
    pub payload_crc: u32,
}

/// Why 20 bytes are not a valid frame header (checked in the order of SPEC.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum HeaderError {
    /// The first two bytes are not [`MAGIC`].
    #[error("bad magic bytes {found:02x?}, not an mcp-framing stream")]
    BadMagic {
        /// The two bytes found.
        found: [u8; 2],
    },
    /// The version byte is not one this crate implements.
    #[error("unsupported format version {version}")]
    UnsupportedVersion {
        /// The version byte found.
        version: u8,
    },
    /// The header CRC does not match header bytes 0..16.
    #[error("header checksum mismatch: header says {stored:#010x}, bytes give {computed:#010x}")]
    Checksum {
        /// The CRC carried in the header.
        stored: u32,
        /// The CRC of the header bytes received.
        computed: u32,
    },
}

impl FrameHeader {
    /// Builds the header for `payload`, computing its CRC.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::FrameHeader;
    /// let h = FrameHeader::for_payload(0x06, 1, &[]);
    /// assert_eq!((h.len, h.payload_crc), (0, 0));
    /// ```
    ///
    /// # Panics
    ///
    /// If `payload` is longer than `u32::MAX` bytes.
    #[must_use]
    pub fn for_payload(kind: u8, sequence: u32, payload: &[u8]) -> Self {
        Self {
            kind,
            sequence,
            len: u32::try_from(payload.len()).expect("frame payload longer than u32::MAX"),
            payload_crc: crc32(payload),
        }
    }

    /// Checks magic, version and header CRC of a 20-byte header and returns its fields
    /// (SPEC.md §2 "Header first").
    ///
    /// # Errors
    ///
    /// A `HeaderError` names the first check that failed.
    #[inline]
    pub(crate) fn parse(bytes: &[u8; HEADER_LEN]) -> Result<Self, HeaderError> {
        if bytes[0..2] != MAGIC {
            return Err(HeaderError::BadMagic {
                found: [bytes[0], bytes[1]],
            });
        }
        if bytes[2] != VERSION {
            return Err(HeaderError::UnsupportedVersion { version: bytes[2] });
        }
        let stored = be_u32(bytes, 16);
        let computed = crc32_header(bytes);
        if stored != computed {
            return Err(HeaderError::Checksum { stored, computed });
        }
        Ok(Self::read(bytes))
    }

    /// Reads the fields of 20 header bytes **without any check** (not the magic, the version or
    /// the header CRC): for tools that list the frames of a damaged capture, or that walk frames
    /// an encoder just wrote. A decoder uses `parse`, which checks them.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::FrameHeader;
    /// let mut bytes = FrameHeader::for_payload(0x02, 9, b"abc").to_bytes();
    /// bytes[16] ^= 0xff; // a corrupt header CRC: a decoder refuses it, `read` does not look
    /// assert_eq!((FrameHeader::read(&bytes).sequence, FrameHeader::read(&bytes).len), (9, 3));
    /// assert!(!FrameHeader::header_crc_ok(&bytes));
    /// ```
    #[inline]
    #[must_use]
    pub fn read(bytes: &[u8; HEADER_LEN]) -> Self {
        Self {
            kind: bytes[3],
            sequence: be_u32(bytes, 4),
            len: be_u32(bytes, 8),
            payload_crc: be_u32(bytes, 12),
        }
    }

    /// Whether `payload` matches this header's payload CRC (SPEC.md §2).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::FrameHeader;
    /// let header = FrameHeader::for_payload(0x02, 0, b"{}");
    /// assert!(header.payload_crc_ok(b"{}"));
    /// assert!(!header.payload_crc_ok(b"[]"));
    /// ```
    #[must_use]
    pub fn payload_crc_ok(&self, payload: &[u8]) -> bool {
        crc32(payload) == self.payload_crc
    }

    /// The header CRC stored in 20 header bytes, and whether it matches bytes 0..16 (no other
    /// check).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::FrameHeader;
    /// let bytes = FrameHeader::for_payload(0x06, 1, &[]).to_bytes();
    /// assert!(FrameHeader::header_crc_ok(&bytes));
    /// ```
    #[must_use]
    pub fn header_crc_ok(bytes: &[u8; HEADER_LEN]) -> bool {
        be_u32(bytes, 16) == crc32_header(bytes)
    }

    /// Serializes the header, computing the header CRC.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::internals::frame::{FrameHeader, MAGIC};
    /// let bytes = FrameHeader::for_payload(0x06, 0xA1A2A3A4, &[]).to_bytes();
    /// assert_eq!(&bytes[..4], &[MAGIC[0], MAGIC[1], 0x01, 0x06]);
    /// assert_eq!(&bytes[4..8], &[0xA1, 0xA2, 0xA3, 0xA4]);
    /// ```
    #[must_use]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..2].copy_from_slice(&MAGIC);
        out[2] = VERSION;
        out[3] = self.kind;
        out[4..8].copy_from_slice(&self.sequence.to_be_bytes());
        out[8..12].copy_from_slice(&self.len.to_be_bytes());
        out[12..16].copy_from_slice(&self.payload_crc.to_be_bytes());
        let crc = crc32_header(&out);
        out[16..20].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Writes one whole frame (header and payload) into `dst`.
#[inline]
pub(crate) fn write_frame(kind: FrameKind, sequence: u32, payload: &[u8], dst: &mut BytesMut) {
    write_header(kind, sequence, payload, dst);
    dst.put_slice(payload);
}

/// Writes the header of a frame carrying `payload` into `dst`, without the payload: the
/// compatible SSE mapping carries a DATA payload in a `message` event (SPEC.md §18).
#[inline]
pub(crate) fn write_header(kind: FrameKind, sequence: u32, payload: &[u8], dst: &mut BytesMut) {
    let header = FrameHeader::for_payload(kind.to_byte(), sequence, payload);
    dst.put_slice(&header.to_bytes());
}

#[cfg(test)]
mod tests {
    use super::FrameHeader;

    #[test]
    fn a_header_read_back_is_the_header_written() {
        let header = FrameHeader::for_payload(0x02, 7, b"{}");
        assert_eq!(FrameHeader::parse(&header.to_bytes()), Ok(header));
    }

    #[test]
    fn a_flipped_bit_of_the_length_fails_the_header_checksum() {
        let mut bytes = FrameHeader::for_payload(0x02, 7, b"{}").to_bytes();
        bytes[9] ^= 0x01;
        let err = FrameHeader::parse(&bytes).unwrap_err();
        assert!(err.to_string().starts_with("header checksum mismatch"));
    }

    #[test]
    fn json_where_a_header_should_be_is_refused_for_its_magic() {
        let err = FrameHeader::parse(b"{\"jsonrpc\":\"2.0\",\"id").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad magic bytes [7b, 22], not an mcp-framing stream"
        );
    }

    #[test]
    fn a_version_this_crate_does_not_implement_is_refused() {
        let mut bytes = FrameHeader::for_payload(0x02, 0, b"x").to_bytes();
        bytes[2] = 9;
        let err = FrameHeader::parse(&bytes).unwrap_err();
        assert_eq!(err.to_string(), "unsupported format version 9");
    }
}
