//! Oracle: `mcp_framing_fuzz::fixed_checksums` (see its module docs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mcp_framing_fuzz::fixed_checksums::run(data));
