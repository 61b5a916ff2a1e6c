#!/bin/sh
# urt-pool-burst-bench's bad flags (ctest bench/urt-pool-burst-bench/bad-flags):
# each exits 2 before any runtime starts, with a message naming the flag
# and the value. Usage: pool_burst_bad_flags.sh PATH-TO-urt-pool-burst-bench
bench=$1
failed=0
check() {  # check EXPECTED-MESSAGE ARG...
  want=$1
  shift
  out=$("$bench" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL: $*: exit $rc, expected 2"
    failed=1
  fi
  case $out in
    *"$want"*) ;;
    *) echo "FAIL: $*: no \"$want\" in: $out"; failed=1 ;;
  esac
}
check '--tasks: "0" is not an integer in 1..100000000' --tasks=0
check '--tasks: "100000001" is not an integer in 1..100000000' --tasks=100000001
check '--tasks: "" is not an integer in 1..100000000' --tasks=
check '--rounds: "x" is not an integer in 1..100' --rounds=x
check '--rounds: "101" is not an integer in 1..100' --rounds=101
check 'usage: urt-pool-burst-bench' --frobnicate
[ "$failed" -eq 0 ] && echo "bad flags: all rejected as expected"
exit "$failed"
