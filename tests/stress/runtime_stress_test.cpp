// Stress: invariant 10 (every accepted task runs exactly once, or is handed
// back as cancelled and counted) while producers race stop() and tasks
// spawn children during draining or cancelling, on 1 to 4 flat workers and
// on the shapes with several LLCs, two NUMA nodes, SMT and 16 workers.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "urt/urt.hpp"

#include "../topologies.hpp"

namespace {

struct ledger {
  explicit ledger(std::size_t capacity) : fate(capacity) {}
  std::atomic<std::size_t> next_id{0};
  std::vector<std::atomic<int>> fate;  // +1 per run, +1000 per drop unrun
  std::atomic<std::uint64_t> accepted_by_spawners{0};
};

// A callable that records whether it ran or was destroyed unrun.
class tracked {
 public:
  tracked(ledger& l, urt::runtime& rt, std::size_t id, int depth)
      : ledger_(&l), rt_(&rt), id_(id), depth_(depth) {}
  tracked(tracked&& o) noexcept
      : ledger_(std::exchange(o.ledger_, nullptr)), rt_(o.rt_), id_(o.id_), depth_(o.depth_) {}
  tracked& operator=(tracked&&) = delete;
  ~tracked() {
    if (ledger_ != nullptr && !ran_) ledger_->fate[id_].fetch_add(1000);
  }
  [[nodiscard]] bool armed() const noexcept { return ledger_ != nullptr; }
  void disarm() noexcept { ledger_ = nullptr; }
  void operator()() {
    ran_ = true;
    ledger_->fate[id_].fetch_add(1);
    if (depth_ > 0) spawn_child(*ledger_, *rt_, depth_ - 1);
  }

  static bool spawn_child(ledger& l, urt::runtime& rt, int depth) {
    const std::size_t id = l.next_id.fetch_add(1);
    if (id >= l.fate.size()) return false;
    const unsigned workers = static_cast<unsigned>(rt.worker_count());
    urt::task_spec spec{.priority = static_cast<int>(id % 100)};
    if (id % 3 == 0) spec.affinity = urt::worker_set{static_cast<unsigned>(id % workers)};
    tracked task(l, rt, id, depth);
    try {
      rt.spawn(spec, std::move(task));
    } catch (const urt::runtime_stopped&) {
      // Refused: spawn must have left the callable untouched (not moved from).
      CHECK(task.armed());
      task.disarm();
      l.fate[id].fetch_add(1000000);
      return false;
    }
    l.accepted_by_spawners.fetch_add(1);
    return true;
  }

 private:
  ledger* ledger_;
  urt::runtime* rt_;
  std::size_t id_;
  int depth_;
  bool ran_ = false;
};

}  // namespace

TEST_CASE("stress: exactly-once under racing producers, children and stop") {
  std::vector<urt_test::shape> shapes{urt_test::flat_n(1), urt_test::flat_n(2), urt_test::flat_n(3),
                                      urt_test::flat_n(4)};
  shapes.insert(shapes.end(), urt_test::live_shapes.begin() + 1, urt_test::live_shapes.end());
  std::mt19937 rng(12345);
  for (int round = 0; round < 100; ++round) {
    CAPTURE(round);
    // Each shape for two rounds in turn, one per stop mode; with the
    // migration mode (round % 3) every combination comes up every 48 rounds.
    const urt_test::shape& shape = shapes[static_cast<std::size_t>(round / 2) % shapes.size()];
    CAPTURE(shape);
    const auto mode = round % 2 == 0 ? urt::stop_mode::drain : urt::stop_mode::cancel;
    ledger l(200000);
    urt::runtime_options o;
    o.topology = urt_test::source_of(shape);
    o.idle_spin = std::chrono::microseconds{rng() % 2 == 0 ? 0 : 20};
    // Every migration mode preserves exactly-once execution.
    constexpr urt::migration_mode modes[] = {urt::migration_mode::push_ipi,
                                             urt::migration_mode::pull, urt::migration_mode::none};
    o.migration = modes[round % 3];
    CAPTURE(static_cast<int>(o.migration));
    std::size_t cancelled = 0;
    {
      urt::runtime rt(o);
      std::atomic<bool> go{false};
      std::vector<std::thread> producers;
      for (int p = 0; p < 3; ++p) {
        producers.emplace_back([&] {
          go.wait(false);
          while (tracked::spawn_child(l, rt, 2)) {
          }
        });
      }
      go = true;
      go.notify_all();
      // Let some work through, then stop while producers are still spawning.
      while (l.next_id.load() < 2000 + 1000 * static_cast<std::size_t>(round % 5)) {
        std::this_thread::yield();
      }
      cancelled = rt.stop(mode);
      for (auto& t : producers) t.join();

      const auto total = rt.stats().total();
      CHECK(total.accepted == l.accepted_by_spawners.load());
      CHECK(total.completed + total.cancelled == total.accepted);
      CHECK(total.cancelled == cancelled);
      if (mode == urt::stop_mode::drain) CHECK(cancelled == 0);
    }
    // Every id handed out is exactly one of: ran once, dropped unrun once,
    // or refused at spawn (never accepted).
    const std::size_t issued = std::min(l.next_id.load(), l.fate.size());
    std::size_t ran = 0, dropped = 0, refused = 0, wrong = 0;
    for (std::size_t id = 0; id < issued; ++id) {
      switch (l.fate[id].load()) {
        case 1: ++ran; break;
        case 1000: ++dropped; break;
        case 1000000: ++refused; break;
        default: ++wrong;
      }
    }
    CHECK(wrong == 0);
    CHECK(dropped == cancelled);
    CHECK(ran + dropped == l.accepted_by_spawners.load());
    CHECK(ran + dropped + refused == issued);
  }
}
