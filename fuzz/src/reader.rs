//! A mock `AsyncRead` that returns its bytes in scheduled pieces, with `Pending` in between.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Returns `data` in pieces chosen by a schedule, as a network would.
///
/// Each schedule byte is one read: bit 7 set means the read first returns `Pending` (waking the
/// task at once), bits 0..=6 the piece size: `0x7f` for everything left, otherwise the value plus
/// one (1..=127 bytes). The schedule repeats; an empty schedule returns everything in one read.
/// After the data, reads return end of file (never `Pending`).
#[derive(Debug)]
pub struct ScheduledReader<'a> {
    data: &'a [u8],
    schedule: &'a [u8],
    step: usize,
    pending_done: bool,
    pendings: usize,
}

impl<'a> ScheduledReader<'a> {
    /// A reader of `data` following `schedule`.
    #[must_use]
    pub fn new(data: &'a [u8], schedule: &'a [u8]) -> Self {
        Self {
            data,
            schedule,
            step: 0,
            pending_done: false,
            pendings: 0,
        }
    }

    /// How many times a read returned `Pending`.
    #[must_use]
    pub fn pendings(&self) -> usize {
        self.pendings
    }

    /// The size of the next piece per the schedule, and whether it comes after a `Pending`.
    fn next_op(&self) -> (usize, bool) {
        let Some(&op) = self.schedule.get(self.step % self.schedule.len().max(1)) else {
            return (usize::MAX, false);
        };
        let size = match op & 0x7f {
            0x7f => usize::MAX,
            n => usize::from(n) + 1,
        };
        (size, op & 0x80 != 0)
    }
}

impl AsyncRead for ScheduledReader<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.data.is_empty() {
            return Poll::Ready(Ok(()));
        }
        let (size, pending_first) = self.next_op();
        if pending_first && !self.pending_done {
            self.pending_done = true;
            self.pendings += 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = size.min(self.data.len()).min(buf.remaining());
        let (piece, rest) = self.data.split_at(n);
        buf.put_slice(piece);
        self.data = rest;
        self.step += 1;
        self.pending_done = false;
        Poll::Ready(Ok(()))
    }
}

/// `input` cut into pieces whose sizes follow `schedule` as [`ScheduledReader`]'s reads do
/// (bits 0..=6 of each byte, `0x7f` for the rest; bit 7 ignored), cycling; an empty schedule: one
/// piece. For the sans-I/O oracles that feed bodies in pieces.
pub fn pieces<'a>(input: &'a [u8], schedule: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = input;
    let mut step = 0;
    while !rest.is_empty() {
        let size = match schedule
            .get(step % schedule.len().max(1))
            .map(|op| op & 0x7f)
        {
            None | Some(0x7f) => rest.len(),
            Some(n) => usize::from(n) + 1,
        };
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        out.push(piece);
        rest = tail;
        step += 1;
    }
    out
}
