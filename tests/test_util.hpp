// Helpers shared by the test files.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <string>

#include "urt/runtime.hpp"

namespace urt_test {

/// The what() of the exception `fn` throws, or "<no exception>".
template <class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception>";
}

/// A runtime of `n` workers on a synthetic topology (no real binding), so
/// the tests behave the same on any machine; a short idle spin.
inline urt::runtime_options synthetic_workers(unsigned n) {
  urt::runtime_options o;
  o.topology = urt::topology_source::synthetic("core:" + std::to_string(n) + " pu:1");
  o.idle_spin = std::chrono::microseconds{5};
  return o;
}

/// A one-shot gate a task can block on until the test opens it.
class gate {
 public:
  void open() {
    open_.store(true);
    open_.notify_all();
  }
  void wait() const { open_.wait(false); }

 private:
  std::atomic<bool> open_{false};
};

/// Blocks the calling test until a task signals.
class signal {
 public:
  void raise() {
    up_.store(true);
    up_.notify_all();
  }
  void wait() const { up_.wait(false); }

 private:
  std::atomic<bool> up_{false};
};

/// Counts up; a test thread waits until it reaches a value.
class counter {
 public:
  void add() {
    n_.fetch_add(1);
    n_.notify_all();
  }
  void wait_for(int want) const {
    for (int seen = n_.load(); seen < want; seen = n_.load()) n_.wait(seen);
  }
  [[nodiscard]] int value() const { return n_.load(); }

 private:
  std::atomic<int> n_{0};
};

}  // namespace urt_test
