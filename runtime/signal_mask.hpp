// signal_mask: which signals the runtime's own threads take.
//
// A signal handler runs on whichever thread the kernel picks among those
// that do not block the signal. On a worker that is a task interrupted for
// as long as the handler runs, the latency an RT runtime exists to avoid,
// and a parked worker woken for it. So the workers block the asynchronous
// signals (runtime_options::block_signals): SIGINT, SIGTERM, SIGHUP, SIGUSR1,
// SIGALRM, SIGCHLD, the real-time signals and the rest that the kernel
// sends the process as a whole; the kernel then gives them to the
// application's own threads, as Asio does for the threads of its
// thread_pool. Asio's signal_set keeps working: its handler, on whatever
// thread takes the signal, writes a pipe that the reactor watches.
//
// Left unblocked are the signals a thread raises itself or that are meant
// for the thread that runs: the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGTRAP, SIGSYS; blocked, a fault kills the process without running the
// handler a sanitizer or crash reporter installed), SIGABRT (abort()),
// SIGPIPE and SIGXFSZ (a write to a closed pipe, past the file size limit),
// and SIGPROF (a profiler's timer samples the thread that runs). glibc
// never lets its own internal signals be blocked.
//
// scoped_signal_block blocks a set in the calling thread for a scope: a
// thread created inside it starts with the set blocked (a thread inherits
// its creator's mask), with no moment in which it could take one.
//
// Concurrency: a thread's signal mask is its own; nothing here is shared.
#pragma once

#include <signal.h>

namespace urt::detail {

/// The asynchronous signals, as described above.
[[nodiscard]] sigset_t async_signals() noexcept;
/// Every signal (what the call_rcu threads block: they run no handler).
[[nodiscard]] sigset_t all_signals() noexcept;
/// No signal (runtime_options::block_signals off).
[[nodiscard]] sigset_t no_signals() noexcept;

class scoped_signal_block {
 public:
  explicit scoped_signal_block(const sigset_t& set) noexcept;
  scoped_signal_block(const scoped_signal_block&) = delete;
  scoped_signal_block& operator=(const scoped_signal_block&) = delete;
  ~scoped_signal_block();  // restores the mask the thread had

 private:
  sigset_t old_;
};

}  // namespace urt::detail
