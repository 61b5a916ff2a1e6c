#!/usr/bin/env bash
# The main job (README Quick start): installs the Debian packages if needed,
# builds Release and runs bench/compare-cyclictest for about 10 s: the
# kernel's cyclictest and urt-cyclictest with the same flags, interleaved,
# side by side, plus an SVG plot (build/compare-cyclictest.svg). Arguments
# are passed to compare-cyclictest (e.g. -D 60s, --urt-args="--timer-spin=50").
#
# As root both tools run at SCHED_FIFO 80 with memory locked. Without root
# the kernel's cyclictest refuses to start, so urt-cyclictest runs alone at
# SCHED_OTHER (its figures are then not representative of a real-time setup).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash cmake/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target urt-cyclictest

if [[ $(id -u) -eq 0 ]]; then
  exec python3 bench/compare-cyclictest --urt=build/release/bench/urt-cyclictest \
    --svg=build/compare-cyclictest.svg "$@"
fi
echo "run.sh: not root: the kernel's cyclictest needs SCHED_FIFO, so urt-cyclictest runs alone" >&2
exec build/release/bench/urt-cyclictest -t 1 -i 1000 -l 10000 -q --policy=other --urt-summary
