// resched: the reschedule a running task cannot take. When the kernel
// queues a task on a CPU whose current task is less urgent, it preempts
// that task (resched_curr and an IPI). A urt worker runs its task until the
// task returns or reaches a preemption point, so a remote spawn more urgent
// than the task its target is running waits in the target's inbox for as
// long as that task runs on, even while another worker steps from task to
// task at a lower level and could run it at once: with every worker busy,
// the urgent task waited for the one task it landed behind (up to a whole
// bulk task) instead of for the first worker to reach a scheduling point.
//
// resched_requests (one per runtime) is that IPI made visible to the other
// workers: a byte per worker, the most urgent priority a spawner queued in
// its inbox above the level the worker showed, on per-LLC cache lines
// (llc_bytes.hpp), and a summary word on a line of its own: a count of the
// workers with a request and `top`, the most urgent priority asked for
// since the count was last 0 (the fast path: every scheduling point loads
// it, and it is written only when a request is raised or served, never per
// ordinary spawn or per spawn into an inbox already asked for).
//   - request(w, p): a spawner, after its push into w's inbox and its ring,
//     when w will be late to the node (wanted()): busy at a level below p,
//     or parked or being woken, or awake on the CPU the spawner runs on
//     (so not running until the spawner blocks). The OS takes tens of
//     microseconds to run a woken thread (on the 2-core VM, a worker rung
//     at the start of a burst ran its first task 10-100 us later), while a
//     worker running short tasks steps within one; the woken owner still
//     takes the node if it comes first. Raises w's byte to p. A push (balancer.cpp) asks
//     the same after it moved a task into w's run queue: the claimer's
//     pull finds it there.
//   - claim_above(level, self): any worker at a scheduling point whose next
//     task is at `level`, when the summary's top is above it (a scan of
//     every byte costs about 0.6 us at 256 workers, too much for every
//     scheduling point while a request below the worker's level waits):
//     takes over one request above `level` (a CAS to 0,
//     so one claimer serves each), then takes in for w the nodes of w's
//     inbox above `level` (nothing below could be pulled, and each node
//     moved is a miss) and pulls w's most urgent task
//     (worker::serve_resched); w was late, so until its next scheduling
//     point the claimer pulls the rest of a burst there at each lowering
//     (balancer::note_stuck). A claim that pulls
//     nothing (the owner came first, or the task may run only on w) costs
//     a look; w still runs the task at its next scheduling point.
//   - clear(w): w's owner at each scheduling point, before it drains its
//     inbox: it takes in what the request was about itself.
//
// A request is a hint that speeds a task up; nothing depends on it for
// correctness: every node in an inbox still reaches its owner's run queue
// at the owner's next scheduling point, or the stranded watch's take-over
// (stranded.hpp) when there is none. What holds:
//   - A request is never lost while its node is in the inbox: the spawner's
//     push happens before its release CAS on the byte; the owner clears with
//     an acquire exchange before its drain, and the claimer with an acquire
//     CAS before its take-in. Whichever RMW reads the spawner's value
//     synchronizes with it and so sees the node; one ordered before the
//     spawner's CAS leaves the new value set.
//   - A request may outlive its node (the owner drained it between the push
//     and the request): it costs one claimer a look, or the owner's next
//     clear.
//   - The count is never below the number of bytes set: request() counts
//     itself and raises top before its byte CAS (and takes its count back
//     when the byte was set already), clear() and claims take one off after
//     their p -> 0 RMW. So when an update leaves the count at 0, no byte is
//     set, and top is reset to 0 with it; while the count is above 0, top
//     is at least every set byte. It may be above them, after the most
//     urgent request was served: the next claimer below it then scans for
//     nothing, and lowers top to the highest byte it saw when the summary
//     did not change meanwhile and it saw as many bytes set as are counted
//     (then no request was in flight).
// Concurrency: every member may run on any thread concurrently with any
// other; wait-free except the CAS loops of request() (on the byte, while
// other spawners raise it) and of the summary (while others update it).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "llc_bytes.hpp"
#include "urt/topology.hpp"

namespace urt::detail {

class resched_requests {
 public:
  static constexpr unsigned none = ~0U;

  /// For `workers` (dense ids, each LLC a contiguous id range, as
  /// urt::topology produces).
  explicit resched_requests(std::span<const worker_place> workers);
  /// `workers` workers in one LLC (unit tests).
  explicit resched_requests(unsigned workers);

  /// Whether a spawn of `priority` into the inbox of a worker showing
  /// cpupri `level` (negative: idle) asks for a request; `late`: the
  /// worker is parked, or rung and not running yet, or awake but off its
  /// CPU (the spawner runs there: placement::on_callers_cpu). Yes when the
  /// worker runs a less urgent task, or is idle and late. An awake idle
  /// worker on a CPU of its own takes the node at once; a normal task (0)
  /// waits for its worker (a byte of 0 means none).
  [[nodiscard]] static constexpr bool wanted(int priority, int level, bool late) noexcept {
    if (priority <= 0) return false;
    return level >= 0 ? priority > level : late;
  }

  /// Spawner, after its push into w's inbox (priority `p`, 1..99) and its
  /// ring, when wanted(): asks that some worker run it before w gets to it.
  void request(unsigned w, int p) noexcept;

  /// Any thread, at each scheduling point: whether a request above `level`
  /// may be raised (relaxed: a hint; claim_above() decides under its CAS).
  [[nodiscard]] bool pending_above(int level) const noexcept {
    const summary s = summary::of(summary_.word.load(std::memory_order_relaxed));
    return s.count > 0 && static_cast<int>(s.top) > level;
  }
  /// Whether any request is raised (the same hint).
  [[nodiscard]] bool pending() const noexcept { return pending_above(-1); }

  /// Any worker whose next task is at `level`: takes over one request of a
  /// worker other than `self` above `level`, scanning from `self`'s LLC,
  /// and returns that worker, or none.
  [[nodiscard]] unsigned claim_above(int level, unsigned self) noexcept;

  /// Owner of w, at a scheduling point before it drains its inbox.
  void clear(unsigned w) noexcept {
    std::atomic<std::uint8_t>& b = bytes_[w];
    // Relaxed load: a request raised after it is left for a claimer or the
    // next clear. Acquire: pairs with request()'s release CAS (see the top).
    if (b.load(std::memory_order_relaxed) != 0 && b.exchange(0, std::memory_order_acquire) != 0) {
      uncount();
    }
  }

  /// Any thread: w's requested priority (0: none).
  [[nodiscard]] int requested(unsigned w) const noexcept {
    return bytes_[w].load(std::memory_order_relaxed);
  }
  [[nodiscard]] unsigned worker_count() const noexcept { return n_; }

 private:
  unsigned n_ = 0;
  llc_bytes bytes_;
  std::vector<unsigned> worker_at_;  // line * llc_bytes::line_bytes + byte -> worker, or none
  // The summary word: the count (low 32 bits, signed: never below the bytes
  // set, see the top) and top (the next 8 bits).
  struct summary {
    std::int32_t count = 0;
    std::uint8_t top = 0;
    static summary of(std::uint64_t w) noexcept {
      return {static_cast<std::int32_t>(static_cast<std::uint32_t>(w)),
              static_cast<std::uint8_t>(w >> 32)};
    }
    [[nodiscard]] std::uint64_t word() const noexcept {
      return (std::uint64_t{top} << 32) | static_cast<std::uint32_t>(count);
    }
  };
  // Adds `delta` to the count and raises top to `p`; an update that leaves
  // the count at 0 or below resets top (no byte is set then).
  void update(std::int32_t delta, std::uint8_t p) noexcept;
  void uncount() noexcept { update(-1, 0); }
  struct alignas(64) summary_line {
    std::atomic<std::uint64_t> word{0};
  };
  summary_line summary_;
};

}  // namespace urt::detail
