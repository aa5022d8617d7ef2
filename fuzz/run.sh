#!/usr/bin/env bash
# Builds every fuzz target, runs each for a bounded time, then replays the committed corpus and
# every saved crash input. Used by .ci/run, .github/workflows/fuzz.yml and by hand (fuzz/README.md).
#
# Environment (all optional):
#   FUZZ_SECONDS          seconds of fuzzing per target (default 60; 0 = only build and replay)
#   FUZZ_TARGETS          space-separated targets (default: all, from `cargo fuzz list`)
#   FUZZ_RSS_LIMIT_MB     libFuzzer -rss_limit_mb (default 2048)
#   FUZZ_MALLOC_LIMIT_MB  libFuzzer -malloc_limit_mb: the largest single allocation (default 256)
#   FUZZ_MAX_LEN          libFuzzer -max_len in bytes (default 8192)
#   FUZZ_TIMEOUT          libFuzzer -timeout per input in seconds (default 20)
#   CARGO_FUZZ_VERSION    cargo-fuzz version installed when missing (default 0.13.2)
#   FUZZ_JOBS             targets fuzzed at once (default: the number of cores; libFuzzer runs one
#                         process a target, each for FUZZ_SECONDS)
#
# `bash fuzz/run.sh --install` only installs cargo-fuzz when missing (.ci/run starts it first, in
# the background, so that it overlaps the main crate's build); `bash fuzz/run.sh --build` installs
# and builds the targets, and fuzzes nothing (.ci/run builds them while the tests run).
#
# Exit status: 0 when no target crashed; 1 otherwise, after printing each reproducer's path and
# the command that replays it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
rss_limit=${FUZZ_RSS_LIMIT_MB:-2048}
malloc_limit=${FUZZ_MALLOC_LIMIT_MB:-256}
max_len=${FUZZ_MAX_LEN:-8192}
timeout=${FUZZ_TIMEOUT:-20}
cargo_fuzz_version=${CARGO_FUZZ_VERSION:-0.13.2}
say() { printf 'fuzz/run.sh: %s\n' "$*"; }

# cargo-fuzz needs a nightly compiler (-Zsanitizer, sancov passes). Prefer an installed nightly
# toolchain; without one, unlock the nightly features of stable with RUSTC_BOOTSTRAP=1 rather
# than skipping the fuzz stage.
nightly=""
if command -v rustup >/dev/null 2>&1; then
  nightly=$(rustup toolchain list | awk '/^nightly/ {print $1; exit}')
fi
if [ -n "$nightly" ]; then
  cargo=(cargo "+$nightly")
  say "toolchain: $nightly ($(rustc "+$nightly" --version))"
else
  export RUSTC_BOOTSTRAP=1
  cargo=(cargo)
  say "toolchain: no nightly toolchain installed; using $(rustc --version) with RUSTC_BOOTSTRAP=1"
fi

installed=$(cargo fuzz --version 2>/dev/null | awk 'NR == 1 {print $2}' || true)
if [ "$installed" != "$cargo_fuzz_version" ]; then
  say "installing cargo-fuzz $cargo_fuzz_version (found: ${installed:-none})"
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked --force
fi
say "$(cargo fuzz --version | head -n 1)"
[ "${1:-}" != "--install" ] || exit 0
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}

say "building all targets (address sanitizer, debug assertions)"
"${cargo[@]}" fuzz build
[ "${1:-}" != "--build" ] || exit 0
if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  mapfile -t targets < <("${cargo[@]}" fuzz list)
fi

logs=fuzz/target/run-logs
rm -rf "$logs"
mkdir -p "$logs"
failed=()

# Prints the newest reproducer of target $1 and how to replay it.
report_crash() {
  local target=$1 artifact
  artifact=$(ls -t "fuzz/artifacts/$target"/* 2>/dev/null | head -n 1 || true)
  say "CRASH in $target (log: $logs/$target.log)"
  if [ -n "$artifact" ]; then
    say "  reproducer: $artifact"
    say "  replay:     ${cargo[*]} fuzz run $target $artifact"
    say "  minimize:   ${cargo[*]} fuzz tmin $target $artifact"
  fi
}

# Runs libFuzzer on target $1 with extra arguments; the log goes to $logs/$1.$2.log.
fuzz() {
  local target=$1 phase=$2
  shift 2
  mkdir -p "fuzz/target/corpus/$target" "fuzz/regressions/$target"
  # The first corpus directory receives new inputs: a scratch one, so the committed corpus stays
  # as generated. The others are read.
  "${cargo[@]}" fuzz run "$target" "fuzz/target/corpus/$target" "fuzz/corpus/$target" \
    "fuzz/regressions/$target" -- -dict=fuzz/dict -rss_limit_mb="$rss_limit" \
    -malloc_limit_mb="$malloc_limit" -max_len="$max_len" -timeout="$timeout" \
    -print_final_stats=1 "$@" >"$logs/$target.$phase.log" 2>&1
}

# Fuzzes target $1 for $seconds, then replays its committed corpus and regressions; on a crash,
# prints the reproducer and leaves $logs/$1.failed.
fuzz_target() {
  local target=$1
  if [ "$seconds" -gt 0 ]; then
    say "fuzzing $target for ${seconds}s"
    if ! fuzz "$target" run -max_total_time="$seconds"; then
      cp "$logs/$target.run.log" "$logs/$target.log"
      report_crash "$target"
      tail -n 40 "$logs/$target.run.log"
      touch "$logs/$target.failed"
      return
    fi
  fi
  say "replaying the committed corpus and regressions of $target"
  # -runs=0: execute every saved input once; a larger -max_len so no seed is truncated.
  if ! fuzz "$target" replay -runs=0 -max_len=1048576; then
    cp "$logs/$target.replay.log" "$logs/$target.log"
    report_crash "$target"
    tail -n 40 "$logs/$target.replay.log"
    touch "$logs/$target.failed"
  fi
  touch "$logs/$target.done"
}

# The targets, $jobs at a time (each libFuzzer process is single-threaded). A target's lines are
# printed as they come; its log stays in $logs.
say "fuzzing ${#targets[@]} targets, $jobs at a time"
running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_target "$target" &
  running=$((running + 1))
done
wait
# A target whose job ended without finishing (an unexpected error) failed too.
for target in "${targets[@]}"; do
  if [ -e "$logs/$target.failed" ] || [ ! -e "$logs/$target.done" ]; then
    failed+=("$target")
  fi
done

# Per-target numbers for the record: executions per second, total executions, and libFuzzer's
# last status line (cov: edges covered, ft: features, corp: corpus size).
printf '\n%-18s %10s %12s  %s\n' target exec/s execs "final status line"
for target in "${targets[@]}"; do
  log="$logs/$target.run.log"
  [ -f "$log" ] || continue
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -n 1)
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log" | tail -n 1)
  status=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -n 1 || true)
  printf '%-18s %10s %12s  %s\n' "$target" "${rate:-?}" "${execs:-?}" "${status:-?}"
done

if [ "${#failed[@]}" -gt 0 ]; then
  say "FAILED: ${failed[*]} (reproducers above; add each to fuzz/regressions/<target>/)"
  exit 1
fi
say "all targets passed"
