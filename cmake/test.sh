#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages if needed,
# then runs the release, asan-ubsan and tsan workflow presets (configure,
# build, ctest) from CMakePresets.json. Exits non-zero if any step of any
# preset fails. Presets to run can be given as arguments (default: release
# asan-ubsan tsan).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash cmake/install-deps.sh

presets=("$@")
[[ ${#presets[@]} -gt 0 ]] || presets=(release asan-ubsan tsan)

failed=()
timings=()
for preset in "${presets[@]}"; do
  printf '\n==================== urt: workflow preset %s ====================\n' "$preset"
  start=$SECONDS
  if cmake --workflow --preset "$preset"; then
    printf '==================== %s: passed (%ds) ====================\n' "$preset" $((SECONDS - start))
    timings+=("$preset passed in $((SECONDS - start)) s")
  else
    printf '==================== %s: FAILED (%ds) ====================\n' "$preset" $((SECONDS - start))
    failed+=("$preset")
    timings+=("$preset FAILED after $((SECONDS - start)) s")
  fi
done

# A CI log is often read from its end: name each failed test there again,
# with the last lines it printed (ctest's LastTest.log keeps every test's output).
for preset in "${failed[@]}"; do
  dir="build/$preset/Testing/Temporary"
  [[ -f "$dir/LastTestsFailed.log" ]] || continue
  printf '\n==================== %s: failed tests ====================\n' "$preset"
  while IFS=: read -r number name; do
    printf -- '--- %s (test %s), the end of its output:\n' "$name" "$number"
    awk -v t="$name" '$0 ~ /^[0-9]+\/[0-9]+ Testing: / && substr($0, index($0, "Testing: ") + 9) == t { on = 1 }
                      on { print } on && index($0, "\"" t "\" end time:") == 1 { exit }' \
      "$dir/LastTest.log" | tail -n 40
  done <"$dir/LastTestsFailed.log"
done

printf 'urt: %s\n' "${timings[@]}"

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "urt: FAILED presets: ${failed[*]}" >&2
  exit 1
fi
echo "urt: all presets passed: ${presets[*]}"
