//! Oracle: `mcp_framing_fuzz::dedupe_request` (see its module docs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mcp_framing_fuzz::dedupe_request::run(data));
