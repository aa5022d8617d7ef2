//! Oracle: `mcp_framing_fuzz::jsonrpc_scan` (see its module docs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mcp_framing_fuzz::jsonrpc_scan::run(data));
