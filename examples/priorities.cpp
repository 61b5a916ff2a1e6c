// priorities: strict priority order on a busy worker.
//
// Worker 0 is kept busy by one task while tasks at several priorities are
// queued onto it; when it is released they run most urgent first, first in
// first out within a priority, exactly as SCHED_FIFO threads would.
//
//   urt-priorities [cpulist]     (default: every allowed CPU)
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
  std::printf("queued while worker 0 is busy:\n");
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const job j = jobs[i];
    std::printf("  #%-2zu priority %2d  %s\n", i, j.priority, j.name);
    rt.spawn(urt::task_spec{.priority = j.priority, .affinity = worker0}, [&, j, i] {
      std::lock_guard lock(out);
      std::printf("  %2d. priority %2d  %-14s (queued #%zu) on worker %u\n", ++ran, j.priority,
                  j.name, i, urt::this_task::worker_id());
    });
  }
  std::printf("ran in this order:\n");
  release = true;
  release.notify_one();
  rt.stop();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "urt-priorities: %s\n", e.what());
  return 1;
}
