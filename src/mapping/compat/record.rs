//! How a record line is spelled (SPEC.md §18.1, §18.2): the words both halves of the mapping
//! share.


/// What starts a record line: a comment whose text is `mcp-framing`, a space, then base64
/// (SPEC.md §18.2). Keep-alive comments (`:`, `: keep-alive`) never start with it.
pub const RECORD_PREFIX: &str = ":mcp-framing ";

/// The comment text that marks a record (the line without its leading `:`), up to the space.
pub(super) const RECORD_MARK: &[u8] = b"mcp-framing";

/// Bytes a record adds around its base64: [`RECORD_PREFIX`] and the final LF.
pub const RECORD_OVERHEAD: usize = RECORD_PREFIX.len() + 1;
