//! Writes the conformance vectors of SPEC.md §14 (`valid_*.bin`, `invalid_*.bin` and
//! `manifest.json`) into a directory. The generator is deterministic: fixed request keys and
//! attempt ids, so the output is byte-for-byte the committed `tests/vectors/`.
//!
//! Run: `cargo run --example gen_vectors -- tests/vectors`

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "tests/vectors".to_owned()),
    );
    std::fs::create_dir_all(&dir)?;
    let vectors = common::vectors::all_mappings();
    for vector in &vectors {
        std::fs::write(dir.join(&vector.file), &vector.bytes)?;
    }
    std::fs::write(
        dir.join("manifest.json"),
        common::vectors::manifest(&vectors),
    )?;
    println!(
        "wrote {} vectors and manifest.json to {}",
        vectors.len(),
        dir.display()
    );
    Ok(())
}
