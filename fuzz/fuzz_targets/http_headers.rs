//! Oracle: `mcp_framing_fuzz::http_headers` (see its module docs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mcp_framing_fuzz::http_headers::run(data));
