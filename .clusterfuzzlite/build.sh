#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build script: builds every cargo-fuzz target of fuzz/ with the
# sanitizer the infrastructure asks for ($SANITIZER, set by the base image) and copies each
# binary to $OUT with its seed corpus (zipped, as the infrastructure expects) and the dictionary.
cd "$SRC/mcp-framing"
cargo fuzz build -O --debug-assertions
release_dir=fuzz/target/x86_64-unknown-linux-gnu/release
for target in $(cargo fuzz list); do
  cp "$release_dir/$target" "$OUT/$target"
  cp fuzz/dict "$OUT/$target.dict"
  seeds=$(mktemp -d)
  cp fuzz/corpus/"$target"/* "$seeds"/ 2>/dev/null || true
  cp fuzz/regressions/"$target"/* "$seeds"/ 2>/dev/null || true
  (cd "$seeds" && zip -q -r "$OUT/${target}_seed_corpus.zip" .)
  rm -rf "$seeds"
done
