//! Replays the saved inputs of the server-side fuzz targets (`fuzz/corpus/{dedupe_request,
//! http_headers}/` and any crash inputs in `fuzz/regressions/`) through their oracles, on
//! stable, as part of `cargo test` (the oracles are the fuzz crate's own files, compiled here).

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

#[path = "../fuzz/src/dedupe_request.rs"]
#[allow(unreachable_pub)]
mod dedupe_request;
#[path = "../fuzz/src/http_headers.rs"]
#[allow(unreachable_pub)]
mod http_headers;

/// Runs `oracle` on every saved input of `target`; returns how many there were.
fn replay(target: &str, oracle: impl Fn(&[u8])) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut count = 0;
    for kind in ["regressions", "corpus"] {
        let Ok(entries) = fs::read_dir(fuzz.join(kind).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|entry| entry.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            let bytes = fs::read(&path).unwrap();
            let outcome = catch_unwind(AssertUnwindSafe(|| oracle(&bytes)));
            assert!(
                outcome.is_ok(),
                "{} fails the {target} oracle; reproduce with: cargo +nightly fuzz run {target} {}",
                path.display(),
                path.display()
            );
            count += 1;
        }
    }
    count
}

#[test]
fn saved_inputs_pass_the_dedupe_request_oracle() {
    let count = replay("dedupe_request", dedupe_request::run);
    assert!(count >= 15, "only {count} dedupe_request inputs");
}

#[test]
fn saved_inputs_pass_the_http_headers_oracle() {
    let count = replay("http_headers", http_headers::run);
    assert!(count >= 10, "only {count} http_headers inputs");
}
