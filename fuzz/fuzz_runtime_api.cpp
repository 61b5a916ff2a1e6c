// libFuzzer target: a runtime driven through its public API with whatever
// values the input holds. The input picks runtime_options (every duration
// from a table of edge values or raw 64 bits, every enum from a byte,
// invalid ones included; always SCHED_OTHER and no memory locking, which
// would outlive the input in this process) on a synthetic topology of 1-4
// workers, then up to 48 calls: spawn, spawn_at, every, a series' cancel,
// make_group, set_bandwidth (runtime-wide and per group), stats, executor
// and stop, with priorities, affinities, deadlines, periods, starts,
// overrun policies, budgets and stop modes from the input. Some tasks
// spawn again from inside, with values fixed when they were spawned.
// Checks:
//   - every rejection is std::invalid_argument, std::length_error or
//     urt::runtime_stopped with a non-empty message on one line (a quoted
//     group name with a newline aside); nothing else is thrown;
//   - validate() rejections name a runtime_options field, and options that
//     pass validate() build a runtime;
//   - after the last stop (cancel, or drain when nothing accepted is due
//     later than 100 ms from now): every one-shot task ran at most once, and
//     the runtime's counts balance: accepted == completed + cancelled.
// A hang (a drain waiting for a deadline, a stop that never returns) is a
// libFuzzer timeout; a leak of a node or a series is LeakSanitizer's.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "urt/executor.hpp"
#include "urt/urt.hpp"

namespace {

using std::chrono::nanoseconds;
using clock_type = urt::clock;

[[noreturn]] void fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_runtime_api: %s %s\n", what, detail.c_str());
  std::abort();
}

// Edge values of a duration, or 64 raw bits.
nanoseconds duration(FuzzedDataProvider& in) {
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t table[] = {min,
                                           -1'000'000'000,
                                           -1,
                                           0,
                                           1,
                                           1'000,
                                           2'000,
                                           50'000,
                                           100'000,
                                           1'000'000,
                                           10'000'000,
                                           1'000'000'000,
                                           1'000'000'001,
                                           3'600'000'000'000,
                                           3'600'000'000'001,
                                           max};
  const auto pick = in.ConsumeIntegralInRange<unsigned>(0, std::size(table));
  if (pick == std::size(table)) return nanoseconds(in.ConsumeIntegral<std::int64_t>());
  return nanoseconds(table[pick]);
}

// A point in time: the clock's ends, or `now` moved by an edge offset
// (every offset here keeps the sum inside the clock's range).
clock_type::time_point instant(FuzzedDataProvider& in, clock_type::time_point now) {
  using tp = clock_type::time_point;
  switch (in.ConsumeIntegralInRange<unsigned>(0, 10)) {
    case 0:
      return tp::min();
    case 1:
      return tp::min() + nanoseconds(1);
    case 2:
      return now - std::chrono::hours(1);
    case 3:
      return now - nanoseconds(1);
    case 4:
      return now;
    case 5:
      return now + std::chrono::microseconds(1);
    case 6:
      return now + std::chrono::milliseconds(1);
    case 7:
      return now + std::chrono::hours(1);
    case 8:
      return now + std::chrono::hours(24 * 365 * 100);
    case 9:
      return tp::max() - nanoseconds(1);
    default:
      return tp::max();
  }
}

template <class E>
E enum_value(FuzzedDataProvider& in, unsigned valid) {
  // Mostly valid values, sometimes any byte.
  const auto v = in.ConsumeIntegralInRange<unsigned>(0, valid + 1);
  return static_cast<E>(v <= valid ? v : in.ConsumeIntegral<std::uint8_t>());
}

void check_message(const std::exception& e, bool may_have_newline = false) {
  const std::string_view m = e.what();
  if (m.empty()) fail("an empty message");
  if (!may_have_newline && m.find('\n') != std::string_view::npos) {
    fail("a message over several lines", e.what());
  }
}

// Runs `call`; a rejection must be one of the documented kinds with a
// proper message. True when the call returned.
template <class F>
bool attempt(F&& call, bool may_have_newline = false) {
  try {
    call();
    return true;
  } catch (const urt::runtime_stopped& e) {
    check_message(e, may_have_newline);
  } catch (const std::invalid_argument& e) {
    check_message(e, may_have_newline);
  } catch (const std::length_error& e) {
    check_message(e, may_have_newline);
  }
  return false;
}

// What the tasks of one input share (it outlives the runtime).
struct shared_state {
  static constexpr unsigned max_one_shots = 64;
  std::atomic<unsigned> runs[max_one_shots]{};
};

// A child a task spawns when it runs, fixed when the task was spawned.
struct child_plan {
  int priority = 0;
  bool timed = false;
  nanoseconds delay{0};  // spawn_at(now + delay): at most 1 ms
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);

  urt::runtime_options o;
  static constexpr const char* machines[] = {"pack:1 core:1 pu:1", "pack:1 core:2 pu:1",
                                             "pack:1 l3:2 core:2 pu:1"};
  o.topology = urt::topology_source::synthetic(
      machines[in.ConsumeIntegralInRange<unsigned>(0, std::size(machines) - 1)]);
  // Each field keeps its default unless the input says otherwise, so that
  // inputs reach a running runtime as often as a rejection.
  const auto maybe = [&in](auto& field, auto value_of) {
    if (in.ConsumeBool()) field = value_of();
  };
  const auto any_duration = [&in] { return duration(in); };
  maybe(o.binding, [&] { return enum_value<urt::worker_binding>(in, 2); });
  maybe(o.idle_spin, any_duration);
  maybe(o.idle_spin_policy, [&] { return enum_value<urt::spin_policy>(in, 1); });
  maybe(o.timer_wake, [&] { return enum_value<urt::timer_wake_mode>(in, 1); });
  maybe(o.timer_spin, any_duration);
  maybe(o.cpupri, [&] { return enum_value<urt::cpupri_layout>(in, 3); });
  maybe(o.migration, [&] { return enum_value<urt::migration_mode>(in, 2); });
  maybe(o.ipi_timeout, any_duration);
  maybe(o.os_slice, any_duration);
  maybe(o.block_signals, [&] { return in.ConsumeBool(); });
  maybe(o.bandwidth.mode, [&] { return enum_value<urt::throttle_mode>(in, 2); });
  maybe(o.bandwidth.runtime, any_duration);
  maybe(o.bandwidth.period, any_duration);
  maybe(o.cid_mode, [&] { return enum_value<urt::concurrency_id_mode>(in, 1); });
  maybe(o.cid_idle_threshold, any_duration);
  maybe(o.cid_scan_batch, [&] { return in.ConsumeIntegral<unsigned>(); });
  maybe(o.cid_scan_interval, any_duration);
  maybe(o.io_poll_interval, any_duration);
  // A child spawn with a bad priority throws inside its parent task: the
  // runtime counts it (worker_stats::exceptions) and calls this, instead of
  // printing the first one of every runtime.
  o.on_task_exception = [](const std::exception_ptr&) {};
  try {
    o.validate();
  } catch (const std::invalid_argument& e) {
    check_message(e);
    if (std::string_view(e.what()).rfind("runtime_options.", 0) != 0) {
      fail("validate() names no field", e.what());
    }
    return 0;
  }

  auto state = std::make_shared<shared_state>();
  std::unique_ptr<urt::runtime> rt;
  try {
    rt = std::make_unique<urt::runtime>(o);
  } catch (const std::exception& e) {
    fail("options that passed validate() built no runtime", e.what());
  }
  const auto n = static_cast<unsigned>(rt->worker_count());
  std::vector<urt::group> groups{urt::group{}};
  std::vector<urt::periodic_task> series;
  unsigned one_shots = 0;
  bool far_deadline = false;  // an accepted deadline more than 100 ms ahead

  const auto spec = [&](FuzzedDataProvider& f) {
    urt::task_spec s;
    s.priority = f.ConsumeIntegralInRange<int>(-2, urt::priority_max + 2);
    if (f.ConsumeBool()) {
      urt::worker_set a;
      const auto bits = f.ConsumeIntegral<std::uint8_t>();
      for (unsigned w = 0; w < 8; ++w) {
        if ((bits >> w) & 1U) a.add(w);  // workers past n-1 included
      }
      s.affinity = a;
    }
    s.group = groups[f.ConsumeIntegralInRange<std::size_t>(0, groups.size() - 1)];
    return s;
  };
  // A one-shot task: counts its runs, then maybe spawns its child.
  const auto task = [&](child_plan child) {
    // Ids 1..max_one_shots-1, in spawn order; 0 counts the rest together.
    const unsigned id = one_shots + 1 < shared_state::max_one_shots ? one_shots + 1 : 0;
    urt::runtime* r = rt.get();
    return [state, id, child, r] {
      state->runs[id].fetch_add(1, std::memory_order_relaxed);
      if (child.priority < 0) return;
      const urt::task_spec s{.priority = child.priority};
      // From inside a task: a bad priority throws into the runtime's
      // exception handling (counted), as any task's exception.
      if (child.timed) {
        r->spawn_at(clock_type::now() + child.delay, s, [] {});
      } else {
        r->spawn(s, [] {});
      }
    };
  };
  const auto plan = [](FuzzedDataProvider& f) {
    child_plan c;
    if (!f.ConsumeBool()) {
      c.priority = -1;  // no child
      return c;
    }
    // priority_max + 1: a child that is rejected.
    c.priority = f.ConsumeIntegralInRange<int>(0, urt::priority_max + 1);
    c.timed = f.ConsumeBool();
    c.delay = nanoseconds(f.ConsumeIntegralInRange<std::int64_t>(-1'000'000, 1'000'000));
    return c;
  };

  for (unsigned step = 0; step < 48 && in.remaining_bytes() > 0; ++step) {
    const clock_type::time_point now = clock_type::now();
    switch (in.ConsumeIntegralInRange<unsigned>(0, 10)) {
      case 0:
      case 1: {
        const urt::task_spec s = spec(in);
        const child_plan c = plan(in);
        if (attempt([&] { rt->spawn(s, task(c)); })) ++one_shots;
        break;
      }
      case 2: {
        const clock_type::time_point at = instant(in, now);
        const urt::task_spec s = spec(in);
        const child_plan c = plan(in);
        if (attempt([&] { rt->spawn_at(at, s, task(c)); })) {
          ++one_shots;
          far_deadline = far_deadline || at > now + std::chrono::milliseconds(100);
        }
        break;
      }
      case 3: {
        const nanoseconds period = duration(in);
        const urt::task_spec s = spec(in);
        const clock_type::time_point start = instant(in, now);
        const auto overrun = enum_value<urt::overrun_policy>(in, 1);
        attempt([&] {
          series.push_back(rt->every(
              period, s, [] {}, start, overrun));
        });
        break;
      }
      case 4:
        if (!series.empty()) {
          series[in.ConsumeIntegralInRange<std::size_t>(0, series.size() - 1)].cancel();
        }
        break;
      case 5: {
        urt::group_options g;
        g.name = in.ConsumeRandomLengthString(80);
        if (in.ConsumeBool()) g.budget = urt::group_budget{duration(in), duration(in)};
        const bool newline = g.name.find('\n') != std::string::npos;
        attempt([&] { groups.push_back(rt->make_group(g)); }, newline);
        break;
      }
      case 6: {
        urt::bandwidth_options b;
        b.mode = enum_value<urt::throttle_mode>(in, 2);
        b.runtime = duration(in);
        b.period = duration(in);
        attempt([&] { rt->set_bandwidth(b); });
        break;
      }
      case 7: {
        const urt::group g = groups[in.ConsumeIntegralInRange<std::size_t>(0, groups.size() - 1)];
        std::optional<urt::group_budget> budget;
        if (in.ConsumeBool()) budget = urt::group_budget{duration(in), duration(in)};
        attempt([&] { rt->set_bandwidth(g, budget); });
        break;
      }
      case 8: {
        const urt::runtime_stats s = rt->stats();
        if (s.workers.size() != n) fail("stats() has the wrong number of workers");
        const urt::group g = groups[in.ConsumeIntegralInRange<std::size_t>(0, groups.size() - 1)];
        attempt([&] { (void)rt->stats(g); });
        break;
      }
      case 9: {
        const urt::task_spec s = spec(in);
        const bool with_home = in.ConsumeBool();
        const unsigned home = in.ConsumeIntegralInRange<unsigned>(0, n + 1);
        attempt([&] {
          const urt::executor ex = with_home ? rt->executor(s, home) : rt->executor(s);
          asio::post(ex, [] {});
        });
        break;
      }
      default: {
        // Drain only when nothing accepted waits long: a drain waits for
        // every deadline, however far (documented), which would hang here.
        auto mode = enum_value<urt::stop_mode>(in, 1);
        if (mode == urt::stop_mode::drain && far_deadline) mode = urt::stop_mode::cancel;
        attempt([&] { (void)rt->stop(mode); });
        break;
      }
    }
  }
  rt->stop(far_deadline ? urt::stop_mode::cancel : urt::stop_mode::drain);
  const urt::worker_stats total = rt->stats().total();
  if (total.accepted != total.completed + total.cancelled) {
    fail("accepted != completed + cancelled", std::to_string(total.accepted) + " " +
                                                  std::to_string(total.completed) + " " +
                                                  std::to_string(total.cancelled));
  }
  for (unsigned i = 1; i <= one_shots && i < shared_state::max_one_shots; ++i) {
    if (state->runs[i].load() > 1) fail("a one-shot task ran twice", std::to_string(i));
  }
  return 0;
}
