#!/bin/sh
# The functions of the path every task takes are in .text.hot, where GNU
# ld places them together (runtime/hot.hpp says why). Run on an
# optimized GCC build (-O2 and up reorder functions; -O1 does not):
#   hot_path_sections.sh OBJDUMP LIBURT.a
# Fails naming each listed function whose definition is in another section,
# or that the archive does not define.
set -u
objdump=$1
lib=$2
table=$("$objdump" -t -C "$lib") || { echo "hot_path_sections: $objdump -t $lib failed"; exit 1; }
failed=0
while IFS= read -r name; do
  [ -n "$name" ] || continue
  # A definition: "ADDR g F SECTION SIZE NAME", the name starting at the
  # function's qualified name (not its .cold clone, not a lambda in it).
  sections=$(printf '%s\n' "$table" | awk -v n="$name" '
    $3 == "F" && $0 !~ /\[clone|::\{lambda/ {
      i = index($0, n); if (i > 0 && substr($0, i - 1, 1) == " ") print $4 }' |
    sort -u)
  if [ -z "$sections" ]; then
    echo "hot_path_sections: $name: no definition in $lib"
    failed=1
  elif [ "$sections" != ".text.hot" ]; then
    echo "hot_path_sections: $name: in $(echo $sections), not .text.hot"
    failed=1
  fi
done <<'LIST'
urt::runtime::begin_spawn(
urt::runtime::place_spawn(
urt::runtime::commit_spawn(
urt::detail::placement::place(int,
urt::detail::cpupri::find(
urt::detail::node_pool::allocate()
urt::detail::node_pool::release(
urt::detail::worker::submit_remote(
urt::detail::worker::submit_local(
urt::detail::doorbell::wait(
urt::detail::doorbell::wake_futex(
urt::detail::parker::idle(std::chrono
urt::detail::qsbr::online(
urt::detail::worker::loop(
urt::detail::worker::step(
urt::detail::worker::drain_inbox(
urt::detail::worker::consult_budgets(
urt::detail::worker::pick(
urt::detail::rt_queue::pop(
urt::detail::migrator::publish(
urt::detail::worker::run_task(
urt::detail::worker::idle(
urt::detail::balancer::before_idle(
LIST
[ "$failed" -eq 0 ] && echo "hot_path_sections: every listed function is in .text.hot"
exit "$failed"
