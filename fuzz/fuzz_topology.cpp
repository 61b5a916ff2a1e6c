// libFuzzer target: topology descriptions. The input (any bytes, NUL
// included) is a synthetic description, optionally followed by '\n|' and a
// cpulist; both go through
// runtime_options::validate() and then urt::topology, which sizes the
// description before hwloc builds it (at most urt::max_workers PUs), so no
// input makes hwloc build a huge machine. No runtime (no threads) is built.
// Checks: every rejection is std::invalid_argument naming its field; a
// loaded topology has 1..max_workers workers with dense ids, LLC and NUMA
// indexes below their counts, and PUs in the cpulist when one was given.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "urt/options.hpp"
#include "urt/topology.hpp"
#include "urt/worker_set.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& description, const std::string& cpus,
                       const std::string& message = "") {
  std::fprintf(stderr, "fuzz_topology: %s for \"%s\" cpus \"%s\" %s\n", what, description.c_str(),
               cpus.c_str(), message.c_str());
  std::abort();
}

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t split = text.find("\n|");
  const std::string description = text.substr(0, split);
  const std::string cpus = split == std::string::npos ? "" : text.substr(split + 2);

  urt::runtime_options options;
  options.topology = urt::topology_source::synthetic(description);
  options.cpus = cpus;
  try {
    options.validate();
  } catch (const std::invalid_argument& e) {
    if (!starts_with(e.what(), "runtime_options.topology: ")) fail("validate()", description, cpus, e.what());
    return 0;
  }
  try {
    const urt::topology t(urt::topology_options{.source = options.topology, .cpus = options.cpus});
    const std::size_t n = t.worker_count();
    if (n == 0 || n > urt::max_workers) fail("worker count out of range", description, cpus);
    const auto chosen = cpus.empty() ? std::vector<unsigned>{} : urt::parse_cpulist(cpus, "cpus");
    for (std::size_t i = 0; i < n; ++i) {
      const urt::worker_place& w = t.workers()[i];
      if (w.worker != i) fail("worker ids not dense", description, cpus);
      if (w.llc >= t.llc_count() || w.numa >= t.numa_count()) fail("bad LLC/NUMA index", description, cpus);
      if (!cpus.empty() && !std::binary_search(chosen.begin(), chosen.end(), w.pu)) {
        fail("a worker outside the cpulist", description, cpus);
      }
    }
    if (!cpus.empty() && n != chosen.size()) fail("a cpulist PU without a worker", description, cpus);
    if (t.is_this_system()) fail("a synthetic topology claims to be this system", description, cpus);
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    if (!starts_with(message, "topology.synthetic: ") && !starts_with(message, "cpus: ") &&
        message != "topology: no workers") {
      fail("rejection names no field", description, cpus, message);
    }
    // Quoted text is escaped: the message is one line.
    if (message.find('\n') != std::string::npos) fail("a message of several lines", description, cpus, message);
  }
  return 0;
}
