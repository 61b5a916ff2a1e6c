// Tests of which signals the runtime's threads take (runtime/signal_mask.*,
// runtime_options::block_signals): the set the workers block, the scoped
// block and its restore, the masks of live workers with the option on and
// off, and a signal sent to the process that no worker takes while the
// application's thread blocks it.
#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <latch>
#include <vector>

#include "../topologies.hpp"
#include "signal_mask.hpp"
#include "urt/urt.hpp"

namespace {

// The calling thread's signal mask.
sigset_t current_mask() {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return now;
}

bool blocked(const sigset_t& mask, int sig) { return sigismember(&mask, sig) == 1; }

// Restores the calling thread's mask on scope exit (a failed CHECK must not
// leave the next test with signals blocked).
struct keep_mask {
  sigset_t saved = current_mask();
  keep_mask() = default;
  keep_mask(const keep_mask&) = delete;
  keep_mask& operator=(const keep_mask&) = delete;
  ~keep_mask() { pthread_sigmask(SIG_SETMASK, &saved, nullptr); }
};

// Each worker's mask, read by a task pinned to it.
std::vector<sigset_t> worker_masks(urt::runtime& rt) {
  const auto n = static_cast<unsigned>(rt.worker_count());
  std::vector<sigset_t> masks(n);
  std::latch done(n);
  for (unsigned w = 0; w < n; ++w) {
    rt.spawn({.priority = 10, .affinity = urt::worker_set{w}}, [&masks, &done, w] {
      masks[w] = current_mask();
      done.count_down();
    });
  }
  done.wait();
  return masks;
}

std::atomic<int> handled{0};
extern "C" void count_signal(int) { handled.fetch_add(1); }

}  // namespace

TEST_CASE("signal_mask: the asynchronous set leaves the faults and the thread's own signals out") {
  const sigset_t s = urt::detail::async_signals();
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD,
                        SIGWINCH, SIGRTMIN, SIGRTMAX}) {
    CAPTURE(sig);
    CHECK(blocked(s, sig));
  }
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGPIPE,
                        SIGXFSZ, SIGPROF}) {
    CAPTURE(sig);
    CHECK_FALSE(blocked(s, sig));
  }
}

TEST_CASE("signal_mask: a scoped block adds its set and restores the mask the thread had") {
  const keep_mask keep;
  sigset_t start;
  sigemptyset(&start);
  sigaddset(&start, SIGUSR2);
  pthread_sigmask(SIG_SETMASK, &start, nullptr);
  {
    const urt::detail::scoped_signal_block block(urt::detail::async_signals());
    const sigset_t inside = current_mask();
    CHECK(blocked(inside, SIGINT));
    CHECK(blocked(inside, SIGUSR2));
    CHECK_FALSE(blocked(inside, SIGSEGV));
  }
  const sigset_t after = current_mask();
  CHECK_FALSE(blocked(after, SIGINT));
  CHECK(blocked(after, SIGUSR2));  // what the thread blocked itself stays blocked
}

TEST_CASE("signal_mask: workers block the asynchronous signals by default, the creator keeps its mask") {
  const keep_mask keep;
  const sigset_t none = urt::detail::no_signals();
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  urt::runtime rt(urt_test::synthetic_workers(2));
  CHECK_FALSE(blocked(current_mask(), SIGINT));  // the block ended with the workers' creation
  for (const sigset_t& m : worker_masks(rt)) {
    CHECK(blocked(m, SIGINT));
    CHECK(blocked(m, SIGTERM));
    CHECK(blocked(m, SIGUSR1));
    CHECK_FALSE(blocked(m, SIGSEGV));
    CHECK_FALSE(blocked(m, SIGPROF));
  }
  rt.stop();
}

TEST_CASE("signal_mask: with block_signals off the workers keep the creator's mask") {
  const keep_mask keep;
  sigset_t creator;
  sigemptyset(&creator);
  sigaddset(&creator, SIGUSR2);
  pthread_sigmask(SIG_SETMASK, &creator, nullptr);
  urt::runtime_options o = urt_test::synthetic_workers(2);
  o.block_signals = false;
  urt::runtime rt(o);
  for (const sigset_t& m : worker_masks(rt)) {
    CHECK_FALSE(blocked(m, SIGINT));
    CHECK_FALSE(blocked(m, SIGTERM));
    CHECK(blocked(m, SIGUSR2));
  }
  rt.stop();
}

TEST_CASE("signal_mask: a signal sent to the process waits for the application's thread, no worker takes it") {
  // The application's thread blocks SIGUSR1 too: no thread of the process
  // may take it, so it stays pending for the process until sigtimedwait
  // takes it here, and the handler never runs. Had a worker left it
  // unblocked, the kernel would have given it to that worker, which runs
  // the handler on its way back to user space, before its next task: the
  // tasks run on each worker after the kill make sure it got there.
  const keep_mask keep;
  struct sigaction sa {};
  struct sigaction old {};
  sa.sa_handler = count_signal;
  sigaction(SIGUSR1, &sa, &old);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr);
  handled.store(0);
  {
    urt::runtime rt(urt_test::synthetic_workers(2));  // made while this thread takes SIGUSR1
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
    worker_masks(rt);  // a task has run on each worker since the kill
    sigset_t pending;
    sigpending(&pending);
    CHECK(blocked(pending, SIGUSR1));
    const timespec zero{0, 0};
    CHECK(sigtimedwait(&usr1, nullptr, &zero) == SIGUSR1);
    rt.stop();
  }
  CHECK(handled.load() == 0);
  sigaction(SIGUSR1, &old, nullptr);
}
