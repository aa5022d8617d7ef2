//! CRC-32 (SPEC.md §2.1): a slice-by-16 table for short inputs (headers, control frames, small
//! tokens), `crc32fast` for longer ones.

use super::layout::HEADER_LEN;

/// Inputs shorter than this take the table path of [`crc32`]; from 32 bytes on, `crc32fast`'s
/// carry-less multiplication folds beat chained table steps (the `tokens-*` benches measure both
/// sides of the threshold).
const SMALL_CRC_LEN: usize = 32;

/// CRC-32 (SPEC.md §2.1) of `bytes`.
///
/// Headers (16 covered bytes), STREAM_END payloads and small streamed tokens are short.
/// `crc32fast` picks its implementation at run time on every call, and for a few bytes that
/// dispatch costs about as much as the CRC itself; a slice-by-16 table does them in one or two
/// steps. Longer inputs go to `crc32fast` (PCLMULQDQ folding where the CPU has it).
#[inline]
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    if bytes.len() < SMALL_CRC_LEN {
        crc32_small(bytes)
    } else {
        crc32fast::hash(bytes)
    }
}

/// CRC-32 of frame payloads for a decoder: [`crc32`] with `crc32fast`'s implementation chosen
/// once, when the decoder is built, instead of on every call (`crc32fast::hash` runs its CPU
/// feature checks each time, a cost that shows on small token frames).
#[derive(Clone, Debug)]
pub(crate) struct PayloadCrc {
    /// A fresh hasher; cloned (a few words) for each payload, so its dispatch is already made.
    fresh: crc32fast::Hasher,
}

impl PayloadCrc {
    pub(crate) fn new() -> Self {
        Self {
            fresh: crc32fast::Hasher::new(),
        }
    }

    /// The CRC-32 of `bytes`, equal to [`crc32`]`(bytes)`.
    #[inline]
    pub(crate) fn checksum(&self, bytes: &[u8]) -> u32 {
        if bytes.len() < SMALL_CRC_LEN {
            crc32_small(bytes)
        } else {
            let mut hasher = self.fresh.clone();
            hasher.update(bytes);
            hasher.finalize()
        }
    }
}

/// `CRC_TABLES[k][b]`: the CRC register after byte `b` followed by `k` zero bytes (slice-by-16).
static CRC_TABLES: [[u32; 256]; 16] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 16] {
    let mut tables = [[0u32; 256]; 16];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            // The reflected polynomial 0x04C11DB7 (SPEC.md §2.1).
            crc = if crc & 1 == 1 {
                0xEDB8_8320 ^ (crc >> 1)
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][byte] = crc;
        byte += 1;
    }
    let mut byte = 0;
    while byte < 256 {
        let mut k = 1;
        while k < 16 {
            let prev = tables[k - 1][byte];
            tables[k][byte] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            k += 1;
        }
        byte += 1;
    }
    tables
}

/// CRC-32 of header bytes 0..16 (the header CRC field covers exactly these): one table step.
#[inline]
pub(super) fn crc32_header(header: &[u8; HEADER_LEN]) -> u32 {
    let (first, _) = header
        .split_first_chunk::<16>()
        .expect("a header has 20 bytes");
    !fold_16(!0, first)
}

/// One slice-by-16 step: the CRC register after 16 more bytes.
#[inline]
fn fold_16(crc: u32, b: &[u8; 16]) -> u32 {
    let t = &CRC_TABLES;
    let w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) ^ crc;
    t[15][(w & 0xFF) as usize]
        ^ t[14][((w >> 8) & 0xFF) as usize]
        ^ t[13][((w >> 16) & 0xFF) as usize]
        ^ t[12][(w >> 24) as usize]
        ^ t[11][b[4] as usize]
        ^ t[10][b[5] as usize]
        ^ t[9][b[6] as usize]
        ^ t[8][b[7] as usize]
        ^ t[7][b[8] as usize]
        ^ t[6][b[9] as usize]
        ^ t[5][b[10] as usize]
        ^ t[4][b[11] as usize]
        ^ t[3][b[12] as usize]
        ^ t[2][b[13] as usize]
        ^ t[1][b[14] as usize]
        ^ t[0][b[15] as usize]
}

fn crc32_small(mut bytes: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut crc = !0u32;
    while let Some((block, rest)) = bytes.split_first_chunk::<16>() {
        crc = fold_16(crc, block);
        bytes = rest;
    }
    if let Some((b, rest)) = bytes.split_first_chunk::<8>() {
        let w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) ^ crc;
        crc = t[7][(w & 0xFF) as usize]
            ^ t[6][((w >> 8) & 0xFF) as usize]
            ^ t[5][((w >> 16) & 0xFF) as usize]
            ^ t[4][(w >> 24) as usize]
            ^ t[3][b[4] as usize]
            ^ t[2][b[5] as usize]
            ^ t[1][b[6] as usize]
            ^ t[0][b[7] as usize];
        bytes = rest;
    }
    for &byte in bytes {
        crc = t[0][((crc as u8) ^ byte) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::{HEADER_LEN, PayloadCrc, crc32, crc32_header};

    #[test]
    fn table_crc_equals_crc32fast_at_every_length_and_offset() {
        let data: Vec<u8> = (0u32..600)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let payload_crc = PayloadCrc::new(); // one instance for every input: it must not drift
        for start in 0..17 {
            for len in 0..=300 {
                let bytes = &data[start..start + len];
                assert_eq!(crc32(bytes), crc32fast::hash(bytes), "len {len}");
                assert_eq!(
                    payload_crc.checksum(bytes),
                    crc32fast::hash(bytes),
                    "len {len}"
                );
            }
        }
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926); // SPEC.md §2.1 check value
        for start in 0..data.len() - HEADER_LEN {
            let header: [u8; HEADER_LEN] = data[start..start + HEADER_LEN].try_into().unwrap();
            assert_eq!(crc32_header(&header), crc32fast::hash(&header[..16]));
        }
    }
}
