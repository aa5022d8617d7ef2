//! Oracle: `mcp_framing_fuzz::compat_decode` (see its module docs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mcp_framing_fuzz::compat_decode::run(data));
