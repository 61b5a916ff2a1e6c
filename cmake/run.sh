#!/usr/bin/env bash
# The main job (README Quick start): installs the Debian packages if needed,
# builds Release and runs the priorities example. Arguments are passed to it
# (a cpulist of the CPUs to use, default: every allowed CPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash cmake/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target urt-priorities
exec ./build/release/examples/urt-priorities "$@"
