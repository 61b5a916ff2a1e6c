#!/usr/bin/env bash
# The test command (README, .ci/run): installs the Debian packages if needed,
# then runs the release and asan-ubsan workflow presets (configure, build,
# ctest) from CMakePresets.json. Exits non-zero if any step of any preset
# fails. Presets to run can be given as arguments (default: release asan-ubsan).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash cmake/install-deps.sh

presets=("$@")
[[ ${#presets[@]} -gt 0 ]] || presets=(release asan-ubsan)

failed=()
for preset in "${presets[@]}"; do
  printf '\n==================== urt: workflow preset %s ====================\n' "$preset"
  start=$SECONDS
  if cmake --workflow --preset "$preset"; then
    printf '==================== %s: passed (%ds) ====================\n' "$preset" $((SECONDS - start))
  else
    printf '==================== %s: FAILED (%ds) ====================\n' "$preset" $((SECONDS - start))
    failed+=("$preset")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "urt: FAILED presets: ${failed[*]}" >&2
  exit 1
fi
echo "urt: all presets passed: ${presets[*]}"
