//! Arbitrary bytes through the streaming decoder, with the heap capped around every call.
//! Oracle: `mcp_framing_fuzz::decode_raw`.
#![no_main]

use std::alloc::System;

use cap::Cap;
use libfuzzer_sys::fuzz_target;
use mcp_framing_fuzz::MemoryGuard;

/// The global allocator, counting bytes and failing allocations past a settable limit.
#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

struct CappedHeap;

impl MemoryGuard for CappedHeap {
    fn allocated(&self) -> usize {
        ALLOCATOR.allocated()
    }

    fn set_limit(&self, limit: Option<usize>) {
        let limit = limit.unwrap_or(usize::MAX);
        if ALLOCATOR.set_limit(limit).is_err() {
            panic!(
                "heap already holds {} bytes, over the budget of {limit}: memory retained across calls",
                ALLOCATOR.allocated()
            );
        }
    }
}

fuzz_target!(|data: &[u8]| mcp_framing_fuzz::decode_raw::run(data, &CappedHeap));
