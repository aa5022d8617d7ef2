//! Where the JSON-RPC scan stops inside a string: the bytes of a 64-byte block that are a quote,
//! a backslash or a control character (below 0x20, which JSON forbids in strings), as a bit mask
//! (bit `i` for byte `i`).
//!
//! One mask a block, then a bit a stop: a text with an escape every dozen bytes (a tool's
//! result, its lines' `\n`, quotes and tabs) stops the scan at every one of them, and a search
//! started again after each stop (`memchr`) cost more than the block it reads. On x86 the block
//! is compared 16 bytes at a time with SSE2 (every x86_64 processor has it) through `safe_arch`,
//! elsewhere eight bytes at a time in a `u64`; both give the same mask, exactly (every bit, not only the
//! lowest), so that the scan can take the stops of a block one after another.

/// The bytes of a block.
pub(super) const BLOCK: usize = 64;

/// The stops of `block`, bit `i` for `block[i]`.
#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse2"))]
#[inline(always)]
pub(super) fn mask(block: &[u8; BLOCK]) -> u64 {
    use safe_arch::move_mask_i8_m128i;
    let quarter = |i: usize| quarter_stops(block[16 * i..16 * (i + 1)].try_into().expect("16 bytes"));
    let quarters = [quarter(0), quarter(1), quarter(2), quarter(3)];
    // A block without stops (a long run of plain text) is told by one gathering of bits.
    if move_mask_i8_m128i(quarters[0] | quarters[1] | quarters[2] | quarters[3]) == 0 {
        return 0;
    }
    quarters.iter().enumerate().fold(0, |stops, (i, &quarter)| {
        // The sign bit of each byte, bit `i` for byte `i`: 16 bits.
        stops | (u64::from(move_mask_i8_m128i(quarter) as u16) << (16 * i))
    })
}

/// The stops of `block`, bit `i` for `block[i]`.
#[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse2")))]
#[inline(always)]
pub(super) fn mask(block: &[u8; BLOCK]) -> u64 {
    let quarter = |i: usize| {
        let bytes = block[16 * i..16 * (i + 1)].try_into().expect("16 bytes");
        u64::from(portable(bytes)) << (16 * i)
    };
    quarter(0) | quarter(1) | quarter(2) | quarter(3)
}

/// The bytes where a string's scan stops: `"`, `\` and the control characters.
#[cfg(test)]
fn is_stop(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// The stops of `block`: every bit of a byte set where it is one, clear elsewhere.
#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse2"))]
#[inline(always)]
fn quarter_stops(block: &[u8; 16]) -> safe_arch::m128i {
    use safe_arch::{
        bitxor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i,
        set_splat_i8_m128i,
    };
    let bytes = load_unaligned_m128i(block);
    // A quote or a control character in one compare: with bit 1 flipped, a control character
    // stays below 0x20, a quote (0x22) becomes 0x20 and every other byte is above 0x20; and
    // (unsigned) `b <= 0x20` exactly when `min(b, 0x20) == b`.
    let flipped = bitxor_m128i(bytes, set_splat_i8_m128i(0x02));
    let quote_or_control =
        cmp_eq_mask_i8_m128i(min_u8_m128i(flipped, set_splat_i8_m128i(0x20)), flipped);
    quote_or_control | cmp_eq_mask_i8_m128i(bytes, set_splat_i8_m128i(b'\\' as i8))
}

/// [`mask`] eight bytes at a time in a `u64`, for every target.
#[cfg_attr(
    all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse2"),
    cfg(test)
)]
#[inline(always)]
fn portable(block: &[u8; 16]) -> u32 {
    let (low, high) = block.split_at(8);
    let word = |half: &[u8]| u64::from_le_bytes(half.try_into().expect("eight bytes"));
    word_mask(word(low)) | (word_mask(word(high)) << 8)
}

/// The stops of the eight bytes of `word` (little-endian), bit `i` for byte `i`.
#[cfg_attr(
    all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse2"),
    cfg(test)
)]
#[inline(always)]
fn word_mask(word: u64) -> u32 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A byte's high bit is set here when the byte is not 0 (no carry crosses bytes: each adds
    // at most 0x7f + 0x7f).
    let nonzero = |x: u64| ((x & LOW7) + LOW7) | x;
    let not_quote = nonzero(word ^ (ONES * u64::from(b'"')));
    let not_backslash = nonzero(word ^ (ONES * u64::from(b'\\')));
    // Set when the byte is 0x20 or more: its low seven bits plus 0x60 reach 0x80, or its high
    // bit is set.
    let not_control = ((word & LOW7) + ONES * 0x60) | word;
    let stops = !(not_quote & not_backslash & not_control) & HIGH;
    // One bit a byte (bit 7 of byte `i` to bit `i`): the bytes' 0 or 1 gathered in the top
    // byte by one multiplication (no two products meet there, and those below cannot carry
    // into it).
    ((stops >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, a byte at a time.
    fn by_byte(block: &[u8]) -> u64 {
        (0..block.len()).fold(0, |stops, i| stops | (u64::from(is_stop(block[i])) << i))
    }

    /// The block's stops by [`mask`] and, a quarter at a time, by [`portable`].
    fn both(block: &[u8; BLOCK]) -> (u64, u64) {
        let portable = (0..4).fold(0, |stops, i| {
            let quarter = block[16 * i..16 * (i + 1)].try_into().unwrap();
            stops | (u64::from(portable(quarter)) << (16 * i))
        });
        (mask(block), portable)
    }

    #[test]
    fn every_byte_value_is_a_stop_exactly_when_json_ends_a_string_run_there() {
        for b in 0..=u8::MAX {
            for at in 0..BLOCK {
                // Among bytes that are never stops, and among stops.
                for fill in [b'a', 0xff, b'"', 0x1f] {
                    let mut block = [fill; BLOCK];
                    block[at] = b;
                    let expected = by_byte(&block);
                    assert_eq!(both(&block), (expected, expected), "{b:#x} at {at} in {fill:#x}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn a_block_of_any_bytes_has_the_stops_of_its_bytes(
            block in prop::collection::vec(prop_oneof![
                any::<u8>(),
                prop::sample::select(vec![b'"', b'\\', 0x1f, 0x20, 0x00, 0x02, 0x7f, 0x80, 0xa2, 0xdc]),
                Just(b'a'),
            ], BLOCK),
        ) {
            let expected = by_byte(&block);
            prop_assert_eq!(both(&block.try_into().unwrap()), (expected, expected));
        }
    }
}
