#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (the fuzz workflow preset: clang++,
# AddressSanitizer, UBSan) and runs each one for a while on its seed corpus
# (fuzz/corpus/<target>/, read only: new inputs go to a scratch directory
# under build/fuzz/). A crash, a leak, a timeout (10 s on one input) or an
# out-of-memory (2 GB) fails the run and leaves the input in
# build/fuzz/artifacts/. .ci/run calls it with the default, a smoke of 20 s
# per target; fuzz/README.md has the longer runs.
#
# Usage: bash cmake/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]
#   targets: cpulist topology cyclictest_cli resp kv_cli loadgen_cli runtime_api (default: all)
#   SECONDS_PER_TARGET 0: no time limit; URT_FUZZ_RUNS=N ends each target
#   after N inputs (URT_FUZZ_RUNS=1000000 bash cmake/fuzz.sh 0: the longer run)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-20}"
[[ $# -gt 0 ]] && shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(cpulist topology cyclictest_cli resp kv_cli loadgen_cli runtime_api)

printf '\n==================== urt: fuzz build ====================\n'
start=$SECONDS
cmake --workflow --preset fuzz
printf '==================== fuzz build: %ds ====================\n' $((SECONDS - start))

out=build/fuzz
export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mkdir -p "$out/artifacts"
failed=()
for target in "${targets[@]}"; do
  binary="$out/fuzz/fuzz_$target"
  [[ -x "$binary" ]] || { echo "fuzz: no target $target ($binary)" >&2; exit 1; }
  scratch="$out/corpus-$target"
  rm -rf "$scratch" && mkdir -p "$scratch"
  log="$out/fuzz_$target.log"
  printf '\n==================== fuzz_%s: %s s, %s runs ====================\n' "$target" \
    "$seconds" "${URT_FUZZ_RUNS:-unlimited}"
  runs=()
  [[ -n "${URT_FUZZ_RUNS:-}" ]] && runs=(-runs="$URT_FUZZ_RUNS")
  # A binary input (runtime_api's) has no dictionary.
  dict=()
  [[ -f "fuzz/dict/$target.dict" ]] && dict=(-dict="fuzz/dict/$target.dict")
  if "$binary" -max_total_time="$seconds" "${runs[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
       -print_final_stats=1 "${dict[@]}" \
       -artifact_prefix="$out/artifacts/$target-" "$scratch" "fuzz/corpus/$target" >"$log" 2>&1; then
    grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
    printf '==================== fuzz_%s: passed ====================\n' "$target"
  else
    tail -n 60 "$log"
    printf '==================== fuzz_%s: FAILED (log: %s) ====================\n' "$target" "$log"
    failed+=("$target")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "urt: FAILED fuzz targets: ${failed[*]}" >&2
  exit 1
fi
echo "urt: fuzz smoke passed: ${targets[*]} (${seconds} s each)"
