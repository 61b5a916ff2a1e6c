// A runtime the OS refuses a thread or a memory lock throws, and leaves the
// process as it was: no abort (liburcu aborts when it cannot make its
// call_rcu thread; a lock taken before the threads were made used to make
// the next stack exceed RLIMIT_MEMLOCK), nothing left locked, no worker
// running. Run as an unprivileged user: as root the program first becomes
// nobody, which drops every capability (CAP_IPC_LOCK lifts the lock limit,
// and root's own threads are never held to RLIMIT_NPROC).
//   refused_limits memlock    RLIMIT_MEMLOCK 8 MiB (the usual default),
//                             memory_lock::all
//   refused_limits realtime   runtime_options::realtime(): SCHED_FIFO
//                             refused, memory lock asked for too
//   refused_limits nproc      RLIMIT_NPROC 0: no thread can be made
// Each prints the exception's message, then "refused cleanly" once nothing
// is locked and a plain runtime runs a task in the same process (for nproc
// once the soft limit is back at the hard one). Under ASan and TSan,
// whose mlockall does nothing, memlock exits 77 (ctest: skipped).
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>

#include "urt/urt.hpp"

namespace {

urt::runtime_options two_workers() {
  return urt::runtime_options{.topology = urt::topology_source::synthetic("pack:1 core:2 pu:1")};
}

// VmLck from /proc/self/status: the memory locked now, kB (-1 unread).
long locked_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmLck:")) return std::stol(line.substr(6));
  }
  return -1;
}

// Sets the soft limit, keeping the hard one (so that it can be raised again).
bool set_limit(int resource, rlim_t value) {
  rlimit r{};
  if (::getrlimit(resource, &r) != 0) return false;
  r.rlim_cur = value;
  return ::setrlimit(resource, &r) == 0;
}

bool restore_limit(int resource) {
  rlimit r{};
  if (::getrlimit(resource, &r) != 0) return false;
  r.rlim_cur = r.rlim_max;
  return ::setrlimit(resource, &r) == 0;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool mlockall_works = false;  // the sanitizers' mlockall returns 0 and does nothing
#else
constexpr bool mlockall_works = true;
#endif

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "memlock";
  if (::geteuid() == 0 &&
      (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)) {
    std::perror("refused_limits: cannot become nobody");
    return 1;
  }
  urt::runtime_options o = two_workers();
  if (mode == "memlock") {
    if (!mlockall_works) {
      std::puts("refused_limits: not checked: this build's mlockall does nothing");
      return 77;
    }
    if (!set_limit(RLIMIT_MEMLOCK, 8 << 20)) return 1;
    o.lock_memory = urt::memory_lock::all;
  } else if (mode == "realtime") {
    if (!set_limit(RLIMIT_MEMLOCK, 8 << 20) || !set_limit(RLIMIT_RTPRIO, 0)) return 1;
    const urt::runtime_options rt = urt::runtime_options::realtime();
    o.policy = rt.policy;
    o.fifo_priority = rt.fifo_priority;
    o.lock_memory = rt.lock_memory;
  } else if (mode == "nproc") {
    if (!set_limit(RLIMIT_NPROC, 0)) return 1;
  } else {
    std::fprintf(stderr, "refused_limits: unknown mode %s\n", argv[1]);
    return 1;
  }
  try {
    urt::runtime refused(o);
    std::puts("refused_limits: the runtime started; nothing was refused");
    return 1;
  } catch (const std::system_error& e) {
    std::printf("refused_limits: %s\n", e.what());
  }
  if (locked_kb() != 0) {
    std::printf("refused_limits: %ld kB locked after the refusal\n", locked_kb());
    return 1;
  }
  if (mode == "nproc" && !restore_limit(RLIMIT_NPROC)) return 1;
  std::atomic<bool> ran{false};
  {
    urt::runtime plain(two_workers());
    plain.spawn({}, [&ran] { ran.store(true); });
    plain.stop();
  }
  if (!ran.load()) return 1;
  std::puts("refused_limits: refused cleanly");
  return 0;
}
