//! How a record line is spelled (SPEC.md §18.1, §18.2): the words both halves of the mapping
//! share.


/// What starts a record line: a comment whose text is `mcp-framing`, a space, then base64
/// (SPEC.md §18.2). Keep-alive comments (`:`, `: keep-alive`) never start with it.
pub const RECORD_PREFIX: &str = ":mcp-framing ";

/// The comment text that marks a record (the line without its leading `:`), up to the space.
pub(super) const RECORD_MARK: &[u8] = b"mcp-framing";

/// Bytes a record adds around its base64: [`RECORD_PREFIX`] and the final LF.
pub(crate) const RECORD_OVERHEAD: usize = RECORD_PREFIX.len() + 1;

#[cfg(test)]
mod tests {
    use super::RECORD_OVERHEAD;

    #[test]
    fn the_record_of_a_one_frame_message_with_head_and_sentinel_is_230_bytes() {
        // SPEC.md §18.6: HEAD 52 + DATA header 20 + MESSAGE_END 60 + STREAM_END 28 = 160 bytes
        // of frames, in base64 216 bytes, behind the prefix and before the LF.
        assert_eq!(RECORD_OVERHEAD + 160usize.div_ceil(3) * 4, 230);
    }
}
