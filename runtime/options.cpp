#include "urt/options.hpp"

#include <sched.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "bandwidth_table.hpp"
#include "messages.hpp"
#include "urt/worker_set.hpp"

namespace urt {
namespace {

using detail::bad_option;
using detail::ns_text;

// An enum field must hold one of its enumerators: a value cast from an
// integer is named with the field and the enum's type.
template <class E>
void check_enum(std::string_view field, E value, std::string_view type, std::initializer_list<E> valid) {
  for (const E v : valid) {
    if (v == value) return;
  }
  bad_option(field, "value " + std::to_string(static_cast<int>(value)) + " is not a " +
                        std::string(type));
}

// A wait length (idle_spin, timer_spin, ipi_timeout) is at most max_wait.
void check_wait(std::string_view field, std::chrono::nanoseconds value) {
  if (value > runtime_options::max_wait) {
    bad_option(field, ns_text(value) + " is above " + ns_text(runtime_options::max_wait) + " (" +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                             runtime_options::max_wait)
                                             .count()) +
                          " s)");
  }
}

}  // namespace

void runtime_options::validate() const {
  check_enum("topology", topology.kind, "topology_kind",
             {topology_kind::system, topology_kind::synthetic, topology_kind::xml});
  if (topology.kind != topology_kind::system && topology.text.empty()) {
    bad_option("topology", topology.kind == topology_kind::xml
                               ? "the XML file path is empty"
                               : "the synthetic description is empty");
  }
  check_enum("binding", binding, "worker_binding",
             {worker_binding::pu, worker_binding::llc, worker_binding::workers});
  if (idle_spin.count() < 0) bad_option("idle_spin", ns_text(idle_spin) + " is negative");
  check_wait("idle_spin", idle_spin);
  if (timer_spin.count() < 0) bad_option("timer_spin", ns_text(timer_spin) + " is negative");
  check_wait("timer_spin", timer_spin);
  check_enum("idle_spin_policy", idle_spin_policy, "spin_policy",
             {spin_policy::fixed, spin_policy::adaptive});
  check_enum("timer_wake", timer_wake, "timer_wake_mode",
             {timer_wake_mode::at_release, timer_wake_mode::adaptive});
  check_enum("policy", policy, "worker_policy", {worker_policy::other, worker_policy::fifo});
  if (policy == worker_policy::fifo) {
    const int lo = sched_get_priority_min(SCHED_FIFO);
    const int hi = sched_get_priority_max(SCHED_FIFO);
    if (fifo_priority < lo || fifo_priority > hi) {
      bad_option("fifo_priority", std::to_string(fifo_priority) + " is outside " +
                                      std::to_string(lo) + ".." + std::to_string(hi));
    }
  }
  if (os_slice.count() != 0) {
    if (os_slice < min_os_slice || os_slice > max_os_slice) {
      bad_option("os_slice", ns_text(os_slice) + " is neither 0 nor within " +
                                 ns_text(min_os_slice) + ".." + ns_text(max_os_slice));
    }
  }
  check_enum("cpupri", cpupri, "cpupri_layout",
             {cpupri_layout::global, cpupri_layout::per_numa, cpupri_layout::per_llc,
              cpupri_layout::per_llc_bytes});
  check_enum("migration", migration, "migration_mode",
             {migration_mode::push_ipi, migration_mode::pull, migration_mode::none});
  if (ipi_timeout.count() <= 0) bad_option("ipi_timeout", ns_text(ipi_timeout) + " is not positive");
  check_wait("ipi_timeout", ipi_timeout);
  check_enum("lock_memory", lock_memory, "memory_lock", {memory_lock::none, memory_lock::all});
  detail::validate_bandwidth(bandwidth, "runtime_options.bandwidth");
  check_enum("cid_mode", cid_mode, "concurrency_id_mode",
             {concurrency_id_mode::batched_scan, concurrency_id_mode::ownership});
  for (const auto& [field, value] : {std::pair<std::string_view, std::chrono::nanoseconds>{
                                         "cid_idle_threshold", cid_idle_threshold},
                                     {"cid_scan_interval", cid_scan_interval}}) {
    if (value.count() < 0) bad_option(field, ns_text(value) + " is negative");
    if (value > max_cid_time) {
      bad_option(field, ns_text(value) + " is above " + ns_text(max_cid_time) + " (1 h)");
    }
  }
  if (io_poll_interval.count() < 0) {
    bad_option("io_poll_interval", ns_text(io_poll_interval) + " is negative");
  }
  check_wait("io_poll_interval", io_poll_interval);
  if (cid_scan_batch == 0 || cid_scan_batch > max_workers) {
    bad_option("cid_scan_batch", std::to_string(cid_scan_batch) + " is outside 1.." +
                                     std::to_string(max_workers));
  }
}

}  // namespace urt
