// spinlock: the lock of a worker's run queue (kernel: raw_spinlock_t of an rq).
//
// Held for a handful of list operations at a time: by the owner around each
// scheduling step, and by another worker for the moment it pushes a task in
// or pulls one out. Test-and-test-and-set: waiters spin on a plain load so
// that the line stays shared until the holder's release store.
//
// Concurrency: lock/try_lock/unlock from any thread. Not fair, not
// recursive. Progress: blocking (a waiter spins while the holder runs).
// Every worker is the only urt thread on its CPU, so a holder is only ever
// descheduled by the OS itself; after a bound of spins a waiter yields its
// CPU so that such a holder can finish (it matters on SCHED_OTHER workers
// that share CPUs with other processes, as on small CI machines).
#pragma once

#include <sched.h>

#include <atomic>

namespace urt::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class spinlock {
 public:
  void lock() noexcept {
    // Acquire: pairs with the release store in unlock() of the previous holder.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        cpu_relax();
        if (spins % 1024 == 1023) ::sched_yield();
      }
    }
  }
  [[nodiscard]] bool try_lock() noexcept {
    // Acquire: as in lock().
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  /// Release: pairs with the acquire exchange of the next holder.
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace urt::detail
