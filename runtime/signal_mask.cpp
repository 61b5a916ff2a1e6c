#include "signal_mask.hpp"

#include <pthread.h>

#include <initializer_list>

namespace urt::detail {

sigset_t async_signals() noexcept {
  sigset_t s;
  sigfillset(&s);
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGPIPE, SIGXFSZ,
                        SIGPROF}) {
    sigdelset(&s, sig);
  }
  return s;
}

sigset_t all_signals() noexcept {
  sigset_t s;
  sigfillset(&s);
  return s;
}

sigset_t no_signals() noexcept {
  sigset_t s;
  sigemptyset(&s);
  return s;
}

scoped_signal_block::scoped_signal_block(const sigset_t& set) noexcept {
  // Cannot fail with SIG_BLOCK and a valid set (EINVAL is for `how` only).
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

scoped_signal_block::~scoped_signal_block() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace urt::detail
