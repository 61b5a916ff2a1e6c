// A runtime of static storage duration (the usual function-local
// singleton) is destroyed at exit, after the task-node pool that comes
// with its first spawn: its drain still runs a task pending then, and its
// workers give their nodes back (once a segfault, and a heap-use-after-free
// under ASan, when the pool's depot was destroyed first).
//   static_runtime pending   a spawn_at 20 ms ahead when main returns:
//                            ~runtime's drain runs it and it prints
//   static_runtime done      every task ran before main returns
#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>

#include "urt/urt.hpp"

namespace {

urt::runtime& the_runtime() {
  static urt::runtime rt{urt::runtime_options{
      .topology = urt::topology_source::synthetic("pack:1 core:2 pu:1")}};
  return rt;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "pending";
  if (mode == "pending") {
    the_runtime().spawn_at(urt::clock::now() + std::chrono::milliseconds(20), {}, [] {
      std::puts("static_runtime: the pending task ran during exit");
      std::fflush(stdout);
    });
  } else {
    the_runtime().spawn({}, [] {});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::puts("static_runtime: every task ran before exit");
  }
  return 0;
}
