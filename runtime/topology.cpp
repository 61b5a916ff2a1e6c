#include "urt/topology.hpp"

#include <fcntl.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "messages.hpp"
#include "urt/worker_set.hpp"

namespace urt {
namespace {

struct topology_deleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<hwloc_topology, topology_deleter>;

struct bitmap_deleter {
  void operator()(hwloc_bitmap_s* b) const noexcept { hwloc_bitmap_free(b); }
};
using bitmap_ptr = std::unique_ptr<hwloc_bitmap_s, bitmap_deleter>;

std::string errno_text(int err) { return std::generic_category().message(err); }

using detail::quoted;

bitmap_ptr alloc_bitmap() {
  bitmap_ptr b(hwloc_bitmap_alloc());
  if (!b) throw std::bad_alloc();
  return b;
}

// The bitmap as an hwloc cpulist ("0-7"), e.g. for error messages.
std::string list_string(hwloc_const_bitmap_t set) {
  char* raw = nullptr;
  if (hwloc_bitmap_list_asprintf(&raw, set) < 0 || raw == nullptr) return "?";
  std::string out(raw);
  std::free(raw);
  return out;
}

// The number of PUs a synthetic description builds: the product of its
// levels' arities, read as hwloc 2.x's parser reads them (an optional
// "(attributes)" for the root; then, separated by spaces, "[numa...]"
// attached objects, which add no level, and levels "type:N" or "N" with
// N in strtoul's base-0 syntax, each optionally followed by
// "(attributes)"). Saturates at UINT64_MAX. nullopt when it does not parse.
std::optional<std::uint64_t> synthetic_pus(const std::string& text) {
  const char* pos = text.c_str();
  if (*pos == '(') {
    pos = std::strchr(pos, ')');
    if (pos == nullptr) return std::nullopt;
    ++pos;
  }
  std::uint64_t pus = 1;
  bool any_level = false;
  for (;;) {
    while (*pos == ' ' || *pos == '\n') ++pos;
    if (*pos == '\0') break;
    if (*pos == '[') {
      pos = std::strchr(pos, ']');
      if (pos == nullptr) return std::nullopt;
      ++pos;
      continue;
    }
    if (*pos < '0' || *pos > '9') {
      pos = std::strchr(pos, ':');
      if (pos == nullptr) return std::nullopt;
      ++pos;
    }
    char* end = nullptr;
    const unsigned long arity = std::strtoul(pos, &end, 0);
    if (end == pos || arity == 0 || arity > UINT_MAX) return std::nullopt;
    pus = pus > std::numeric_limits<std::uint64_t>::max() / arity
              ? std::numeric_limits<std::uint64_t>::max()
              : pus * arity;
    any_level = true;
    pos = end;
    if (*pos == '(') {
      pos = std::strchr(pos, ')');
      if (pos == nullptr) return std::nullopt;
      ++pos;
    }
  }
  if (!any_level) return std::nullopt;
  return pus;
}

// Checks the size of a synthetic description before hwloc builds it (a
// large one takes hwloc minutes, and more PUs than urt::max_workers cannot
// become a runtime anyway).
void check_synthetic(const std::string& text) {
  // hwloc reads the description as a C string: it would stop at a NUL and
  // load a different description than the one given.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    throw std::invalid_argument("topology.synthetic: " + quoted(text) + " has a NUL byte at offset " +
                                std::to_string(nul));
  }
  const std::optional<std::uint64_t> pus = synthetic_pus(text);
  if (!pus) throw std::invalid_argument("topology.synthetic: cannot parse " + quoted(text));
  if (*pus > max_workers) {
    const bool saturated = *pus == std::numeric_limits<std::uint64_t>::max();
    throw std::invalid_argument("topology.synthetic: " + quoted(text) + " has " +
                                (saturated ? "at least " : "") + std::to_string(*pus) +
                                " PUs, more than urt::max_workers (" +
                                std::to_string(max_workers) + ")");
  }
}

// The text of an XML topology file, read here rather than by hwloc so that
// it is checked first: a regular file of at most topology::max_xml_bytes
// (a path to /dev/zero, a FIFO or a huge file would otherwise be read,
// gigabytes of it, before hwloc fails).
std::string read_xml(const std::string& path) {
  // open() reads the path as a C string: it would stop at a NUL and open
  // a different file than the one named.
  if (const std::size_t nul = path.find('\0'); nul != std::string::npos) {
    throw std::invalid_argument("topology.xml: " + quoted(path) + " has a NUL byte at offset " +
                                std::to_string(nul));
  }
  const auto cannot_read = [&path](int err) {
    return std::invalid_argument("topology.xml: cannot read " + quoted(path) + ": " +
                                 errno_text(err));
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw cannot_read(errno);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } const guard{fd};
  const auto too_big = [&path](std::uint64_t bytes) {
    return std::invalid_argument("topology.xml: " + quoted(path) + " has " + std::to_string(bytes) +
                                 " bytes, more than " + std::to_string(topology::max_xml_bytes) +
                                 " (" + std::to_string(topology::max_xml_bytes >> 20) + " MiB)");
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw cannot_read(errno);
  if (!S_ISREG(st.st_mode)) {
    throw std::invalid_argument("topology.xml: " + quoted(path) + " is not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > topology::max_xml_bytes) {
    throw too_big(static_cast<std::uint64_t>(st.st_size));
  }
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  std::vector<char> buffer(64 * 1024);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw cannot_read(errno);
    }
    if (n == 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
    if (text.size() > topology::max_xml_bytes) throw too_big(text.size());  // it grew
  }
  return text;
}

// Creates the hwloc topology for `source` and loads it; every failure destroys it.
topology_ptr load(const topology_source& source) {
  // A kind cast from an integer would otherwise load this machine.
  if (source.kind != topology_kind::system && source.kind != topology_kind::synthetic &&
      source.kind != topology_kind::xml) {
    throw std::invalid_argument("topology: value " + std::to_string(static_cast<int>(source.kind)) +
                                " is not a topology_kind");
  }
  // A synthetic description is sized and an XML file read before any hwloc call.
  std::string xml_text;  // hwloc reads it until hwloc_topology_load() returns
  if (source.kind == topology_kind::synthetic) check_synthetic(source.text);
  if (source.kind == topology_kind::xml) xml_text = read_xml(source.text);

  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    throw std::runtime_error("topology: hwloc_topology_init failed: " + errno_text(errno));
  }
  topology_ptr t(raw);

  const unsigned long flags = HWLOC_TOPOLOGY_FLAG_DONT_CHANGE_BINDING |
                              HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS;
  if (hwloc_topology_set_flags(t.get(), flags) != 0) {
    throw std::runtime_error("topology: hwloc_topology_set_flags failed: " + errno_text(errno));
  }
  // Blacklisting a component that is not installed is not an error worth reporting.
  (void)hwloc_topology_set_components(t.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  (void)hwloc_topology_set_components(t.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
  if (hwloc_topology_set_io_types_filter(t.get(), HWLOC_TYPE_FILTER_KEEP_NONE) != 0) {
    throw std::runtime_error("topology: hwloc_topology_set_io_types_filter failed: " +
                             errno_text(errno));
  }

  switch (source.kind) {
    case topology_kind::system:
      break;
    case topology_kind::synthetic:
      if (hwloc_topology_set_synthetic(t.get(), source.text.c_str()) != 0) {
        throw std::invalid_argument("topology.synthetic: cannot parse " + quoted(source.text));
      }
      break;
    case topology_kind::xml:
      // The size includes the terminating '\0', as hwloc's own export gives it.
      if (hwloc_topology_set_xmlbuffer(t.get(), xml_text.c_str(),
                                       static_cast<int>(xml_text.size() + 1)) != 0) {
        throw std::invalid_argument("topology.xml: cannot load " + quoted(source.text) +
                                    ": not a valid hwloc XML topology");
      }
      break;
  }

  if (hwloc_topology_load(t.get()) != 0) {
    const int err = errno;
    if (source.kind == topology_kind::xml) {
      throw std::invalid_argument("topology.xml: cannot load " + quoted(source.text) +
                                  ": not a valid hwloc XML topology");
    }
    throw std::runtime_error("topology: hwloc_topology_load failed: " + errno_text(err));
  }
  // Fill hwloc's lazily built caches now so later concurrent reads never write.
  if (hwloc_topology_refresh(t.get()) != 0) {
    throw std::runtime_error("topology: hwloc_topology_refresh failed: " + errno_text(errno));
  }
  return t;
}

// The PUs workers may use: for this machine, hwloc's allowed set narrowed to
// the process's current affinity; otherwise every PU of the topology.
bitmap_ptr allowed_pus(hwloc_topology_t t, bool this_system) {
  bitmap_ptr allowed = alloc_bitmap();
  if (hwloc_bitmap_and(allowed.get(), hwloc_topology_get_topology_cpuset(t),
                       hwloc_topology_get_allowed_cpuset(t)) != 0) {
    throw std::bad_alloc();
  }
  if (this_system) {
    bitmap_ptr bound = alloc_bitmap();
    if (hwloc_get_cpubind(t, bound.get(), HWLOC_CPUBIND_PROCESS) == 0) {
      if (hwloc_bitmap_and(allowed.get(), allowed.get(), bound.get()) != 0) throw std::bad_alloc();
    }
  }
  return allowed;
}

// The PUs named by `cpus` (all of `allowed` when empty); each must be allowed.
bitmap_ptr chosen_pus(const std::string& cpus, hwloc_const_bitmap_t allowed) {
  bitmap_ptr chosen = alloc_bitmap();
  if (cpus.empty()) {
    if (hwloc_bitmap_copy(chosen.get(), allowed) != 0) throw std::bad_alloc();
    return chosen;
  }
  for (unsigned pu : parse_cpulist(cpus, "cpus")) {
    if (hwloc_bitmap_isset(allowed, pu) == 0) {
      throw std::invalid_argument("cpus: PU " + std::to_string(pu) + " is not in the allowed set " +
                                  quoted(list_string(allowed)));
    }
    if (hwloc_bitmap_set(chosen.get(), pu) != 0) throw std::bad_alloc();
  }
  return chosen;
}

// Whether any data or unified cache lies inside `o`.
bool holds_dcache(hwloc_topology_t t, hwloc_obj_t o) {
  for (const hwloc_obj_type_t type : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                      HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE}) {
    if (hwloc_get_next_obj_inside_cpuset_by_type(t, o->cpuset, type, nullptr) != nullptr) {
      return true;
    }
  }
  return false;
}

// The outermost data or unified cache above `pu`. When it has none: its
// Package (or the root), a cacheless machine's LLC domain, unless caches
// exist elsewhere in that package, where the package would put this PU in
// one domain with PUs on the far side of a cache (not a contiguous id
// range: a valid XML with cores 1-2 under an L3 and cores 0 and 3 without
// one); then its own core (or itself), which shares no cache with anyone.
hwloc_obj_t llc_of(hwloc_topology_t t, hwloc_obj_t pu) {
  hwloc_obj_t llc = nullptr;
  for (hwloc_obj_t o = pu->parent; o != nullptr; o = o->parent) {
    if (hwloc_obj_type_is_dcache(o->type) != 0) llc = o;
  }
  if (llc != nullptr) return llc;
  hwloc_obj_t domain = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
  if (domain == nullptr) domain = hwloc_get_root_obj(t);
  if (!holds_dcache(t, domain)) return domain;
  hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
  return core != nullptr ? core : pu;
}

// The first NUMA node (in logical order) whose cpuset holds `pu`, or null.
hwloc_obj_t numa_of(hwloc_topology_t t, hwloc_obj_t pu) {
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node)) {
    if (node->cpuset != nullptr && hwloc_bitmap_isset(node->cpuset, pu->os_index) != 0) return node;
  }
  return nullptr;
}

// Dense indexes 0..size()-1 handed out in order of first appearance.
class dense_index {
 public:
  unsigned operator()(const void* key) {
    auto [it, inserted] = map_.try_emplace(key, static_cast<unsigned>(map_.size()));
    return it->second;
  }
  [[nodiscard]] std::size_t size() const noexcept { return map_.size(); }

 private:
  std::unordered_map<const void*, unsigned> map_;
};

const topology_source empty_source{};

}  // namespace

struct topology::impl {
  topology_ptr topo_;
  topology_source source_;
  std::vector<worker_place> workers_;
  std::size_t llc_count_ = 0;
  std::size_t numa_count_ = 0;
  bool this_system_ = false;
  // hwloc's XML export is not documented as safe to run concurrently with itself.
  mutable std::mutex export_mutex_;
};

topology::topology(const topology_options& options) : impl_(std::make_unique<impl>()) {
  impl_->source_ = options.source;
  impl_->topo_ = load(options.source);
  hwloc_topology_t t = impl_->topo_.get();
  impl_->this_system_ = hwloc_topology_is_thissystem(t) != 0;

  const bitmap_ptr allowed =
      allowed_pus(t, options.source.kind == topology_kind::system && impl_->this_system_);
  const bitmap_ptr chosen = chosen_pus(options.cpus, allowed.get());

  dense_index llcs;
  dense_index numas;
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu)) {
    if (hwloc_bitmap_isset(chosen.get(), pu->os_index) == 0) continue;
    worker_place place;
    place.worker = static_cast<unsigned>(impl_->workers_.size());
    place.pu = pu->os_index;
    place.llc = llcs(llc_of(t, pu));
    // Ids are handed out in order of first appearance: an LLC's workers are
    // a contiguous range unless an id comes back after another (cpupri's
    // shards and the placement's preference orders rely on it).
    if (!impl_->workers_.empty() && place.llc < impl_->workers_.back().llc) {
      throw std::invalid_argument(
          "topology: the PUs of LLC " + std::to_string(place.llc) +
          " are not contiguous in hwloc's logical order (PU " + std::to_string(place.pu) +
          " comes after another LLC's PUs); urt needs each LLC's workers to be one id range");
    }
    place.numa = numas(numa_of(t, pu));
    impl_->workers_.push_back(place);
  }
  if (impl_->workers_.empty()) throw std::invalid_argument("topology: no workers");
  impl_->llc_count_ = llcs.size();
  impl_->numa_count_ = numas.size();
}

topology::~topology() = default;
topology::topology(topology&&) noexcept = default;
topology& topology::operator=(topology&&) noexcept = default;

std::span<const worker_place> topology::workers() const noexcept {
  if (!impl_) return {};
  return impl_->workers_;
}

std::size_t topology::llc_count() const noexcept { return impl_ ? impl_->llc_count_ : 0; }

std::size_t topology::numa_count() const noexcept { return impl_ ? impl_->numa_count_ : 0; }

bool topology::is_this_system() const noexcept { return impl_ && impl_->this_system_; }

const topology_source& topology::source() const noexcept {
  return impl_ ? impl_->source_ : empty_source;
}

bool topology::bind_current_thread(unsigned worker, worker_binding binding) const {
  if (!impl_ || worker >= impl_->workers_.size()) {
    throw std::out_of_range("topology: no worker " + std::to_string(worker) + " (have " +
                            std::to_string(worker_count()) + ")");
  }
  if (binding != worker_binding::pu && binding != worker_binding::llc &&
      binding != worker_binding::workers) {
    throw std::invalid_argument("topology::bind_current_thread: binding: value " +
                                std::to_string(static_cast<int>(binding)) +
                                " is not a worker_binding");
  }
  if (!impl_->this_system_) return false;
  const worker_place& self = impl_->workers_[worker];
  bitmap_ptr set = alloc_bitmap();
  // The PUs of the chosen workers only: never one the runtime was not
  // given (a cpulist, the process's allowed set).
  for (const worker_place& p : impl_->workers_) {
    const bool in = binding == worker_binding::workers ||
                    (binding == worker_binding::llc ? p.llc == self.llc : p.worker == worker);
    if (in && hwloc_bitmap_set(set.get(), p.pu) != 0) throw std::bad_alloc();
  }
  if (hwloc_set_cpubind(impl_->topo_.get(), set.get(), HWLOC_CPUBIND_THREAD) != 0) {
    const int err = errno;
    const char* what = binding == worker_binding::pu    ? " to PU "
                       : binding == worker_binding::llc ? " to the PUs of its LLC, "
                                                        : " to the workers' PUs, ";
    char text[512];
    if (hwloc_bitmap_list_snprintf(text, sizeof text, set.get()) < 0) text[0] = '\0';
    throw std::system_error(err, std::generic_category(),
                            "runtime_options.binding: binding worker " + std::to_string(worker) +
                                what + text + " refused");
  }
  return true;
}

void topology::save_xml(const std::string& path) const {
  if (!impl_) throw std::runtime_error("topology: save_xml on a moved-from topology");
  int rc = 0;
  int err = 0;
  {
    const std::lock_guard lock(impl_->export_mutex_);
    errno = 0;
    rc = hwloc_topology_export_xml(impl_->topo_.get(), path.c_str(), 0);
    err = errno;
  }
  if (rc != 0) {
    throw std::runtime_error("topology: cannot write XML to " + quoted(path) + ": " +
                             errno_text(err != 0 ? err : EIO));
  }
}

}  // namespace urt
