#!/usr/bin/env bash
# Builds the fuzz targets with coverage instrumentation and runs each for a bounded time.
#
#   fuzz/run.sh [SECONDS] [TARGET...]           (default: 60 seconds, every target)
#   fuzz/run.sh --smoke [TARGET...]             (what CI runs)
#
# libFuzzer (libfuzzer-sys) is guided by LLVM's SanitizerCoverage, enabled with the
# same code generation flags cargo-fuzz passes; they are stable rustc flags, so no
# nightly toolchain is needed. No AddressSanitizer: Rust code is memory-safe, and the
# targets look for panics, failed assertions, hangs and runaway memory.
#
# Each target starts from fuzz/corpus/TARGET (kept in the repository) and writes the
# inputs it finds to a scratch directory; at the end the corpus is replaced by the
# smallest set of old and new inputs that covers every edge either reached (edges only:
# hit counts and comparisons would keep thousands of near-duplicates). A crash, a hang (over 10 s for one
# input) or an input using more than 2 GB stops the target and is saved under
# fuzz/artifacts/TARGET/; the script then exits non-zero.
#
# What each target checks is a plain function of the crate in fuzz/checks, which belongs
# to the main workspace; its tests replay every corpus input through them
# (engine/tests/it/fuzz_corpus.rs), and that replay is what CI runs. --smoke does the
# same through the libFuzzer binaries, built without instrumentation in the main
# workspace's debug profile and target directory, with libFuzzer's limits: it checks that
# the harness builds. It recompiles the engine (this workspace resolves its dependencies'
# features apart from the main one), which is why CI does not run it. It finds nothing
# new (no coverage guides it) and leaves the corpus as it is. FUZZ_CLEAN=1 removes the
# built targets afterwards.
set -euo pipefail

cd "$(dirname "$0")"
smoke=false
if [ "${1:-}" = "--smoke" ]; then
  smoke=true
  shift
fi
seconds=""
if ! $smoke; then
  seconds="${1:-60}"
  shift || true
fi
all=(manifests hook_config hook_files binding_context jq reviews module)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

host="$(rustc -vV | sed -n 's/^host: //p')"
if $smoke; then
  target_dir="$(cd .. && pwd)/target"
  CARGO_TARGET_DIR="$target_dir" cargo build --locked --bins
  bin_dir="$target_dir/debug"
else
  export RUSTFLAGS="-Cpasses=sancov-module \
   -Cllvm-args=-sanitizer-coverage-level=4 \
   -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
   -Cllvm-args=-sanitizer-coverage-pc-table \
   -Cllvm-args=-sanitizer-coverage-trace-compares \
   --cfg fuzzing"
  # --target keeps the flags off build scripts and proc macros, which run on the host
  # without libFuzzer's runtime.
  cargo build --release --locked --target "$host" --bins
  bin_dir="target/$host/release"
fi

failed=()
if $smoke; then
  for target in "${targets[@]}"; do
    artifacts="artifacts/$target"
    mkdir -p "$artifacts"
    started=$(date +%s)
    echo "== $target: replaying $(ls "corpus/$target" | wc -l) corpus inputs"
    if ! find "corpus/$target" -type f -print0 | xargs -0 -r "$bin_dir/$target" -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$artifacts/" >"$artifacts/log.txt" 2>&1; then
      failed+=("$target")
      tail -30 "$artifacts/log.txt"
    fi
    echo "   $(grep -c '^Executed' "$artifacts/log.txt" || true) inputs in $(( $(date +%s) - started ))s"
  done
  targets=()
fi
for target in "${targets[@]}"; do
  corpus="corpus/$target"
  scratch="corpus/$target.new"
  artifacts="artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  rm -rf "$scratch" && mkdir -p "$scratch"
  binary="$bin_dir/$target"
  echo "== $target: ${seconds}s from $(ls "$corpus" | wc -l) corpus inputs"
  started=$(date +%s)
  if ! "$binary" "$scratch" "$corpus" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$artifacts/" \
      -print_final_stats=1 2>"$artifacts/log.txt"; then
    failed+=("$target")
    tail -30 "$artifacts/log.txt"
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)|DONE|cov:" "$artifacts/log.txt" | tail -3 || true
  echo "   ran $(( $(date +%s) - started ))s"
  merged="corpus/$target.merged"
  rm -rf "$merged" && mkdir -p "$merged"
  if "$binary" -set_cover_merge=1 -use_counters=0 -use_cmp=0 "$merged" "$corpus" "$scratch" \
      2>>"$artifacts/log.txt" >/dev/null; then
    rm -rf "$corpus" && mv "$merged" "$corpus"
  fi
  rm -rf "$scratch" "$merged"
  echo "   corpus now $(ls "$corpus" | wc -l) inputs"
done

if $smoke && [ "${FUZZ_CLEAN:-0}" = 1 ]; then
  for target in "${all[@]}"; do
    rm -f "$bin_dir/$target" "$bin_dir/$target.d"
  done
  rm -rf "$bin_dir/deps/"{manifests,hook_config,hook_files,binding_context,jq,reviews,module}-*
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
