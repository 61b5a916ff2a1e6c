// priorities: strict priority order on a busy worker.
//
// Worker 0 is kept busy by one task while tasks at several priorities are
// queued onto it; when it is released they run most urgent first, first in
// first out within a priority, exactly as SCHED_FIFO threads would. It
// checks the order it printed and exits 1 if it is not that one.
//
//   urt-priorities [cpulist]     (default: every allowed CPU)
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "urt/urt.hpp"

int main(int argc, char** argv) try {
  urt::runtime_options options;
  if (argc > 1) options.cpus = argv[1];
  // No FIFO budget: with it (the default), had the blocker below held the
  // worker for most of a 10 ms period, the priority 0 tasks would run first
  // so as not to starve, which is the budget's point but not this example's.
  options.bandwidth.mode = urt::throttle_mode::off;
  urt::runtime rt(options);
  std::printf("urt: %zu workers in %zu LLCs; worker 0 is PU %u\n", rt.worker_count(),
              rt.topology().llc_count(), rt.topology().workers()[0].pu);

  const urt::worker_set worker0{0};
  std::atomic<bool> busy{false};
  std::atomic<bool> release{false};
  rt.spawn(urt::task_spec{.priority = 99, .affinity = worker0}, [&] {
    busy = true;
    busy.notify_one();
    release.wait(false);  // hold the worker until everything is queued
  });
  busy.wait(false);

  struct job {
    int priority;
    const char* name;
  };
  const std::vector<job> jobs{
      {0, "log rotation"},     {10, "stats flush"},   {99, "kill switch"},
      {50, "order A"},         {10, "stats report"},  {1, "heartbeat"},
      {99, "risk limit"},      {50, "order B"},       {0, "cache warm-up"},
      {50, "order C"},
  };
  std::mutex out;
  int ran = 0;
  std::vector<std::size_t> order;  // queue positions, in the order they ran
  std::printf("queued while worker 0 is busy:\n");
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const job j = jobs[i];
    std::printf("  #%-2zu priority %2d  %s\n", i, j.priority, j.name);
    rt.spawn(urt::task_spec{.priority = j.priority, .affinity = worker0}, [&, j, i] {
      std::lock_guard lock(out);
      std::printf("  %2d. priority %2d  %-14s (queued #%zu) on worker %u\n", ++ran, j.priority,
                  j.name, i, urt::this_task::worker_id());
      order.push_back(i);
    });
  }
  std::printf("ran in this order:\n");
  release = true;
  release.notify_one();
  rt.stop();  // drain: every queued task has run when it returns

  // SCHED_FIFO order: higher priority first, queue order within a priority.
  std::vector<std::size_t> expected(jobs.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = i;
  std::stable_sort(expected.begin(), expected.end(), [&](std::size_t a, std::size_t b) {
    return jobs[a].priority > jobs[b].priority;
  });
  if (order != expected) {
    std::fprintf(stderr, "urt-priorities: the tasks did not run in priority order\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "urt-priorities: %s\n", e.what());
  return 1;
}
