// urt/topology.hpp: where the workers live (PU, last-level cache, NUMA node).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace urt {

/// Where a topology comes from.
enum class topology_kind : unsigned char {
  system,     ///< the machine this process runs on (the default); hwloc's own test
              ///< hooks HWLOC_XMLFILE and HWLOC_SYNTHETIC, when set in the
              ///< environment, replace it (is_this_system() is then false and
              ///< workers are not bound)
  synthetic,  ///< an hwloc synthetic description, e.g. "pack:2 l3:8 core:8 pu:2"
  xml,        ///< an hwloc XML file, e.g. written by `lstopo-no-graphics --of xml`
};

/// A topology source: the kind plus its text (synthetic description or XML path).
/// A synthetic description builds at most urt::max_workers PUs (the product
/// of its arities: "pack:2 l3:8 core:8 pu:2" has 256); an XML file is a
/// regular file of at most topology::max_xml_bytes.
struct topology_source {
  topology_kind kind = topology_kind::system;
  std::string text{};

  static topology_source system() { return {}; }
  static topology_source synthetic(std::string description) {
    return {topology_kind::synthetic, std::move(description)};
  }
  static topology_source xml(std::string path) { return {topology_kind::xml, std::move(path)}; }
};

/// One worker's place in the machine. Worker ids are dense 0..N-1 in hwloc
/// logical PU order, so workers sharing a cache are contiguous.
struct worker_place {
  unsigned worker = 0;  ///< worker id
  unsigned pu = 0;      ///< OS index of the PU (what cpulists and taskset name)
  unsigned llc = 0;     ///< dense index of its last-level cache among the chosen workers
  unsigned numa = 0;    ///< dense index of its NUMA node among the chosen workers
};

/// Which CPUs a worker thread may run on (runtime_options::binding).
enum class worker_binding : unsigned char {
  /// Its own PU only: the OS never moves it, its caches stay warm, and a
  /// spawn from an outside thread can tell which worker shares its CPU. For
  /// CPUs the application has to itself (isolcpus, a cpuset, a taskset that
  /// keeps other processes off). The default.
  pu,
  /// The PUs of every worker in its last-level cache: the OS may move it
  /// among them, away from a CPU another process (a client, a build) keeps
  /// busy, and caches stay shared. For CPUs shared with other processes.
  llc,
  /// The PUs of every worker of the runtime.
  workers,
};

/// Options of a topology: the source and which PUs become workers.
struct topology_options {
  topology_source source = topology_source::system();
  /// cpulist of PU OS indexes ("0-3,8"); empty means every allowed PU.
  std::string cpus{};
};

/// A loaded hwloc topology and the worker placement computed from it. Loaded
/// once (with HWLOC_TOPOLOGY_FLAG_DONT_CHANGE_BINDING), then read-only: every
/// const member may be called from any thread concurrently.
class topology {
 public:
  /// Largest XML topology file loaded: 16 MiB (lstopo's XML of a synthetic
  /// 1024-PU machine with caches and NUMA nodes is about 220 KiB).
  static constexpr std::size_t max_xml_bytes = std::size_t{16} << 20;

  /// Loads the topology. Throws std::invalid_argument naming the field and
  /// value for a kind that is not a topology_kind ("topology"), a malformed
  /// synthetic description, or one of more than
  /// urt::max_workers PUs (the product of its arities, checked before hwloc
  /// builds it) ("topology.synthetic"); an XML path that is missing,
  /// unreadable, not a regular file or larger than max_xml_bytes (checked
  /// before it is read), or not a valid topology ("topology.xml"); a cpulist
  /// that does not parse or names PUs outside the allowed set ("cpus"), or
  /// zero workers; std::runtime_error when hwloc itself fails.
  explicit topology(const topology_options& options = {});
  ~topology();
  topology(topology&&) noexcept;
  topology& operator=(topology&&) noexcept;
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

  [[nodiscard]] std::span<const worker_place> workers() const noexcept;
  [[nodiscard]] std::size_t worker_count() const noexcept { return workers().size(); }
  /// Number of distinct last-level caches (resp. NUMA nodes) holding a worker.
  [[nodiscard]] std::size_t llc_count() const noexcept;
  [[nodiscard]] std::size_t numa_count() const noexcept;
  /// True when the topology describes this machine, so binding is real.
  [[nodiscard]] bool is_this_system() const noexcept;
  /// The source it was loaded from.
  [[nodiscard]] const topology_source& source() const noexcept;

  /// Binds the calling thread to the worker's PU, or with
  /// worker_binding::llc to the PUs of every worker in its last-level cache,
  /// or with worker_binding::workers to the PUs of every worker. Does
  /// nothing (and returns false) when the topology is not this system;
  /// throws std::invalid_argument for a binding that is not a
  /// worker_binding, std::system_error when the kernel refuses the binding.
  bool bind_current_thread(unsigned worker, worker_binding binding = worker_binding::pu) const;

  /// Writes the whole topology as hwloc XML to `path`; throws on failure.
  void save_xml(const std::string& path) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace urt
