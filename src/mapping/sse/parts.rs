//! [`Parts`]: the bytes of a line (or of an event's data) that arrived in several reads, kept as
//! they came rather than copied into one buffer.

use bytes::{Bytes, BytesMut};

/// A read's part at least this long is kept as it came (a slice of the read's shared buffer);
/// a shorter one is copied after the bytes before it, so that a line that arrives a few bytes a
/// read is held in one buffer, not as many small parts (each costs a handle, and reading the
/// line walks them).
const SHARE_FROM: usize = 4096;

/// Bytes in order: slices of the shared buffers they arrived in, then a buffer of its own for
/// those that came in small reads or from a caller without a shared buffer. A long line that
/// arrives in large reads (a 1 MiB result in 64 KiB chunks) is never copied on its way through.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    /// The first bytes, as slices of the buffers they came in.
    shared: Vec<Bytes>,
    /// The bytes after them, copied.
    tail: BytesMut,
    /// Bytes in `shared`.
    shared_len: usize,
}

impl Parts {
    /// How many bytes.
    pub(crate) fn len(&self) -> usize {
        self.shared_len + self.tail.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the bytes are in one buffer of their own (no shared part): what
    /// [`copied`](Self::copied) shows.
    pub(crate) fn is_copied(&self) -> bool {
        self.shared.is_empty()
    }

    /// The bytes, when they are in one buffer of their own ([`is_copied`](Self::is_copied));
    /// otherwise only those after the shared parts.
    pub(crate) fn copied(&self) -> &[u8] {
        &self.tail
    }

    /// Appends `part` of a shared buffer: kept as it is if long or first (a body of one chunk
    /// is that chunk), copied if short ([`push_copy`](Self::push_copy), within `max` bytes).
    pub(crate) fn push_shared(&mut self, part: Bytes, max: usize) {
        if part.is_empty() {
            return;
        }
        if part.len() < SHARE_FROM && !self.is_empty() {
            self.push_copy(&part, max);
            return;
        }
        if !self.tail.is_empty() {
            let tail = self.tail.split().freeze();
            self.shared_len += tail.len();
            self.shared.push(tail);
        }
        self.shared_len += part.len();
        self.shared.push(part);
    }

    /// Appends a copy of `bytes`; a buffer that outgrows its room gets four times what it holds
    /// (at most `max`): a long line copied read by read is moved to a larger buffer less often
    /// than by doubling, each move a copy of all it holds.
    pub(crate) fn push_copy(&mut self, bytes: &[u8], max: usize) {
        let len = self.tail.len();
        if len + bytes.len() > self.tail.capacity() {
            let room = len.saturating_mul(4).min(max).max(len + bytes.len());
            self.tail.reserve(room - len);
        }
        self.tail.extend_from_slice(bytes);
    }

    /// The pieces in order (the shared parts, then the copied bytes), as slices.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        self.shared
            .iter()
            .map(|part| &part[..])
            .chain(Some(&self.tail[..]).filter(|tail| !tail.is_empty()))
    }

    /// The pieces of the bytes from `from` on, in order, found from the end (the bytes after
    /// `from` are usually the last read's: the walk does not start at the first part).
    #[cfg(any(test, feature = "rmcp-server"))]
    pub(crate) fn pieces_from(&self, from: usize) -> impl Iterator<Item = &[u8]> {
        let mut first = self.shared.len();
        let mut start = self.shared_len;
        while first > 0 && start > from {
            first -= 1;
            start -= self.shared[first].len();
        }
        // The part `first` starts at `start` (<= `from` unless `from` is in the tail).
        let skip = from.saturating_sub(start);
        let shared = self.shared[first..].iter().map(|part| &part[..]);
        let tail = Some(&self.tail[..]).filter(|tail| !tail.is_empty());
        let mut skip = skip;
        shared.chain(tail).filter_map(move |piece| {
            if skip >= piece.len() {
                skip -= piece.len();
                None
            } else {
                let piece = &piece[skip..];
                skip = 0;
                Some(piece)
            }
        })
    }

    /// The first `n` bytes (fewer if there are fewer), copied.
    pub(crate) fn prefix(&self, n: usize) -> Vec<u8> {
        let mut prefix = Vec::with_capacity(n);
        for piece in self.pieces() {
            let take = piece.len().min(n - prefix.len());
            prefix.extend_from_slice(&piece[..take]);
            if prefix.len() == n {
                break;
            }
        }
        prefix
    }

    /// Where the value of the SSE `data` line these bytes hold starts: after `data:` and one
    /// space, if there is one (as [`data_value`](super::data_value) reads a line), once the
    /// line's first six bytes are here; `None` for any other line, or before they are.
    pub(crate) fn data_value_start(&self) -> Option<usize> {
        const DATA: &[u8] = b"data: ";
        let head = self.prefix(DATA.len());
        (head.len() == DATA.len() && head.starts_with(b"data:"))
            .then(|| DATA.len() - usize::from(head[5] != b' '))
    }

    /// The bytes of `range`, copied (a short range: a JSON-RPC id).
    #[cfg(any(test, feature = "rmcp-server"))]
    pub(crate) fn copy_range(&self, range: std::ops::Range<usize>) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(range.len());
        let mut at = 0;
        for piece in self.pieces() {
            let (start, end) = (at, at + piece.len());
            at = end;
            if end <= range.start {
                continue;
            }
            if start >= range.end {
                break;
            }
            let from = range.start.max(start) - start;
            let to = range.end.min(end) - start;
            bytes.extend_from_slice(&piece[from..to]);
        }
        bytes
    }

    /// The bytes from `from` on, as the same parts (shared, not copied); the copied bytes after
    /// them become shared.
    pub(crate) fn split_off(mut self, from: usize) -> Parts {
        let tail = self.tail.split().freeze();
        let mut rest = Parts::default();
        let mut at = 0;
        for part in self.shared.into_iter().chain(Some(tail)) {
            let (start, end) = (at, at + part.len());
            at = end;
            if end <= from || part.is_empty() {
                continue;
            }
            let part = part.slice(from.max(start) - start..);
            rest.shared_len += part.len();
            rest.shared.push(part);
        }
        rest
    }

    /// The bytes of `buffers`, in order, as they are.
    #[cfg(any(test, feature = "rmcp-server"))]
    pub(crate) fn from_buffers(buffers: impl IntoIterator<Item = Bytes>) -> Self {
        let mut parts = Parts::default();
        for buffer in buffers.into_iter().filter(|buffer| !buffer.is_empty()) {
            parts.shared_len += buffer.len();
            parts.shared.push(buffer);
        }
        parts
    }

    /// The shared parts, the copied bytes last (each part as one buffer).
    #[cfg(any(test, feature = "rmcp-server"))]
    pub(crate) fn into_buffers(mut self) -> impl Iterator<Item = Bytes> {
        let tail = self.tail.split().freeze();
        self.shared
            .into_iter()
            .chain(Some(tail).filter(|tail| !tail.is_empty()))
    }

    /// The bytes as one buffer: the part itself when there is one, else a copy of them all.
    pub(crate) fn into_bytes(mut self) -> Bytes {
        if self.shared.is_empty() {
            return self.tail.freeze();
        }
        if self.shared.len() == 1 && self.tail.is_empty() {
            return self.shared.pop().unwrap_or_default();
        }
        let mut joined = BytesMut::with_capacity(self.len());
        for piece in self.pieces() {
            joined.extend_from_slice(piece);
        }
        joined.freeze()
    }

    /// Forgets the bytes.
    pub(crate) fn clear(&mut self) {
        self.shared.clear();
        self.shared_len = 0;
        self.tail.clear();
    }
}

impl From<Bytes> for Parts {
    fn from(bytes: Bytes) -> Self {
        let mut parts = Parts::default();
        if !bytes.is_empty() {
            parts.shared_len = bytes.len();
            parts.shared.push(bytes);
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `bytes` pushed in reads of the lengths `reads` (shared or copied by turns when `mixed`).
    fn parts_of(bytes: &[u8], reads: &[usize], mixed: bool) -> Parts {
        let shared = Bytes::copy_from_slice(bytes);
        let mut parts = Parts::default();
        let mut at = 0;
        for (index, &len) in reads.iter().enumerate() {
            let end = (at + len).min(bytes.len());
            if mixed && index % 2 == 1 {
                parts.push_copy(&bytes[at..end], usize::MAX);
            } else {
                parts.push_shared(shared.slice(at..end), usize::MAX);
            }
            at = end;
        }
        parts.push_shared(shared.slice(at..), usize::MAX);
        parts
    }

    proptest! {
        #[test]
        fn parts_read_back_as_the_bytes_they_were_given_whatever_the_reads(
            bytes in prop::collection::vec(any::<u8>(), 0..20_000),
            reads in prop::collection::vec(0usize..9000, 0..8),
            mixed in any::<bool>(),
            from in any::<prop::sample::Index>(),
            to in any::<prop::sample::Index>(),
        ) {
            let parts = parts_of(&bytes, &reads, mixed);
            prop_assert_eq!(parts.len(), bytes.len());
            let joined: Vec<u8> = parts.pieces().flatten().copied().collect();
            prop_assert_eq!(&joined, &bytes);
            let (a, b) = (from.index(bytes.len() + 1), to.index(bytes.len() + 1));
            let (a, b) = (a.min(b), a.max(b));
            let after: Vec<u8> = parts.pieces_from(a).flatten().copied().collect();
            prop_assert_eq!(&after[..], &bytes[a..]);
            prop_assert_eq!(&parts.prefix(b)[..], &bytes[..b]);
            prop_assert_eq!(&parts.copy_range(a..b)[..], &bytes[a..b]);
            let rest = parts_of(&bytes, &reads, mixed).split_off(a);
            prop_assert_eq!(&rest.into_bytes()[..], &bytes[a..]);
            let buffers: Vec<u8> = parts_of(&bytes, &reads, mixed)
                .into_buffers()
                .flat_map(|b| b.to_vec())
                .collect();
            prop_assert_eq!(&buffers, &bytes);
            prop_assert_eq!(&parts.into_bytes()[..], &bytes[..]);
        }
    }

    #[test]
    fn a_long_part_of_a_shared_buffer_is_kept_as_it_came_and_a_short_one_is_copied() {
        let read = Bytes::from(vec![7u8; SHARE_FROM]);
        let mut parts = Parts::default();
        parts.push_shared(read.slice(..10), usize::MAX);
        parts.push_shared(read.clone(), usize::MAX);
        parts.push_shared(read.slice(..10), usize::MAX);
        assert!(!parts.is_copied());
        let buffers: Vec<Bytes> = parts.into_buffers().collect();
        assert_eq!(buffers.len(), 3);
        assert_eq!(buffers[1].as_ptr(), read.as_ptr(), "the long part is the read's own buffer");
        let one = Parts::from(read.clone());
        assert_eq!(one.into_bytes().as_ptr(), read.as_ptr(), "one part is not copied");
        let mut short = Parts::default();
        short.push_shared(read.slice(..10), usize::MAX);
        assert_eq!(short.into_bytes().as_ptr(), read.as_ptr(), "nor a short first one");
        let mut several = Parts::default();
        for piece in [&b"ab"[..], b"", b"cde", b"f", b"ghij"] {
            several.push_shared(Bytes::copy_from_slice(piece), usize::MAX);
        }
        assert_eq!(several.into_bytes(), Bytes::from_static(b"abcdefghij"));
    }
}
