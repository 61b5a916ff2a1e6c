#include "urt/topology.hpp"

#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <typeinfo>
#include <vector>

#include "../topologies.hpp"
#include "urt/runtime.hpp"

namespace {

// hwloc 2.9 facts these tests rely on (checked with lstopo-no-graphics -i):
// - a synthetic description without a NUMA level gets one NUMA node at the
//   machine level, so "pack:2 l3:8 core:8 pu:2" has 256 PUs, 16 L3, 1 NUMA node;
// - "pack:2 [numa] l3:8 core:8 pu:2" attaches one NUMA node to each package
//   (2 NUMA nodes, 16 L3, 256 PUs);
// - synthetic PU OS indexes equal their logical indexes (P#n is L#n).
constexpr const char* flat_256 = "pack:2 l3:8 core:8 pu:2";
constexpr const char* numa_256 = "pack:2 [numa] l3:8 core:8 pu:2";

urt::topology synthetic(const std::string& description, const std::string& cpus = {}) {
  return urt::topology(urt::topology_options{urt::topology_source::synthetic(description), cpus});
}

// The message of the exception `f` throws, which must be exactly of type E.
template <class E>
std::string thrown_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    CHECK_MESSAGE(typeid(e) == typeid(E), "threw " << typeid(e).name() << ": " << e.what());
    return e.what();
  }
  FAIL_CHECK("nothing was thrown");
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A path under the temp directory that no other test process uses.
std::filesystem::path temp_path(const std::string& stem) {
  static std::atomic<unsigned> counter{0};
  return std::filesystem::temp_directory_path() /
         ("urt_topology_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
          "_" + stem);
}

// Removes the file when the scope ends, whatever happens.
struct temp_file {
  std::filesystem::path path;
  explicit temp_file(const std::string& stem) : path(temp_path(stem)) {}
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
};

void check_same_mapping(const urt::topology& a, const urt::topology& b) {
  REQUIRE(a.worker_count() == b.worker_count());
  CHECK(a.llc_count() == b.llc_count());
  CHECK(a.numa_count() == b.numa_count());
  for (std::size_t i = 0; i < a.worker_count(); ++i) {
    const auto& x = a.workers()[i];
    const auto& y = b.workers()[i];
    CHECK(x.worker == y.worker);
    CHECK(x.pu == y.pu);
    CHECK(x.llc == y.llc);
    CHECK(x.numa == y.numa);
  }
}

}  // namespace

TEST_CASE("topology: synthetic 2 packages x 8 L3 x 8 cores x 2 PUs") {
  SUBCASE("without a NUMA level: 256 workers, 16 LLCs, hwloc adds one NUMA node") {
    const auto topo = synthetic(flat_256);
    CHECK_FALSE(topo.is_this_system());
    CHECK(topo.source().kind == urt::topology_kind::synthetic);
    CHECK(topo.source().text == flat_256);
    REQUIRE(topo.worker_count() == 256);
    CHECK(topo.llc_count() == 16);
    CHECK(topo.numa_count() == 1);
    for (unsigned w = 0; w < 256; ++w) {
      const auto& p = topo.workers()[w];
      CHECK(p.worker == w);
      CHECK(p.pu == w);
      CHECK(p.llc == w / 16);
      CHECK(p.numa == 0);
    }
  }
  SUBCASE("with a NUMA node per package: 256 workers, 16 LLCs, 2 NUMA nodes") {
    const auto topo = synthetic(numa_256);
    REQUIRE(topo.worker_count() == 256);
    CHECK(topo.llc_count() == 16);
    CHECK(topo.numa_count() == 2);
    for (unsigned w = 0; w < 256; ++w) {
      const auto& p = topo.workers()[w];
      CHECK(p.worker == w);
      CHECK(p.pu == w);
      CHECK(p.llc == w / 16);
      CHECK(p.numa == w / 128);
    }
  }
}

TEST_CASE("topology: every shape the tests use has the workers, LLCs and NUMA nodes it names") {
  std::vector<urt_test::shape> shapes(urt_test::all_named_shapes.begin(),
                                      urt_test::all_named_shapes.end());
  shapes.insert(shapes.end(), urt_test::flat_shapes.begin(), urt_test::flat_shapes.end());
  for (const auto& shape : shapes) {
    CAPTURE(shape);
    const auto topo = synthetic(std::string(shape.synthetic));
    REQUIRE(topo.worker_count() == shape.workers);
    CHECK(topo.llc_count() == shape.llcs);
    CHECK(topo.numa_count() == shape.numa_nodes);
    CHECK(topo.worker_count() <= urt::max_workers);
    // Worker ids are dense; LLCs and NUMA nodes are contiguous id ranges in order.
    const auto places = urt_test::places(shape);
    REQUIRE(places.size() == shape.workers);
    for (unsigned w = 0; w < shape.workers; ++w) {
      CAPTURE(w);
      CHECK(places[w].worker == w);
      CHECK(places[w].llc < shape.llcs);
      CHECK(places[w].numa < shape.numa_nodes);
      if (w > 0) {
        CHECK(places[w].llc - places[w - 1].llc <= 1);
        CHECK(places[w].numa - places[w - 1].numa <= 1);
        CHECK(places[w].llc >= places[w - 1].llc);
        CHECK(places[w].numa >= places[w - 1].numa);
      }
    }
    CHECK(places.back().llc == shape.llcs - 1);
    CHECK(places.back().numa == shape.numa_nodes - 1);
  }
  // The largest shape fills urt::max_workers exactly.
  CHECK(urt_test::workers_1024.workers == urt::max_workers);
}

TEST_CASE("topology: the LLC is the outermost cache, here an L2") {
  const auto topo = synthetic("pack:2 l2:4 core:2 pu:2");
  REQUIRE(topo.worker_count() == 32);
  CHECK(topo.llc_count() == 8);
  CHECK(topo.numa_count() == 1);
  for (unsigned w = 0; w < 32; ++w) {
    const auto& p = topo.workers()[w];
    CHECK(p.worker == w);
    CHECK(p.pu == w);
    CHECK(p.llc == w / 4);
    CHECK(p.numa == 0);
  }
}

TEST_CASE("topology: without any cache the package is the LLC domain") {
  const auto topo = synthetic("pack:2 core:2 pu:2");
  REQUIRE(topo.worker_count() == 8);
  CHECK(topo.llc_count() == 2);
  CHECK(topo.numa_count() == 1);
  for (unsigned w = 0; w < 8; ++w) {
    const auto& p = topo.workers()[w];
    CHECK(p.worker == w);
    CHECK(p.pu == w);
    CHECK(p.llc == w / 4);
  }
}

TEST_CASE("topology: PUs without a cache in a package that has one are each their own LLC") {
  // One package: cores 1-2 share an L3, cores 0 and 3 have no cache (valid
  // hwloc XML; lstopo shows this tree). The package as their LLC would
  // make LLC 0 = workers 0 and 3, not an id range; cpupri refused it.
  const temp_file file("asym_llc.xml");
  std::ofstream(file.path) << R"xml(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
<object type="Machine" os_index="0" cpuset="0xf" complete_cpuset="0xf" nodeset="0x1" complete_nodeset="0x1" gp_index="1" allowed_cpuset="0xf" allowed_nodeset="0x1"><object type="Package" os_index="0" cpuset="0xf" complete_cpuset="0xf" nodeset="0x1" complete_nodeset="0x1" gp_index="3"><object type="NUMANode" os_index="0" cpuset="0xf" complete_cpuset="0xf" nodeset="0x1" complete_nodeset="0x1" gp_index="40" local_memory="1073741824"></object>
<object type="Core" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" gp_index="10"><object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" gp_index="20"></object>
</object>
<object type="L3Cache" os_index="0" cpuset="0x6" complete_cpuset="0x6" nodeset="0x1" complete_nodeset="0x1" gp_index="30" cache_size="1048576" depth="3" cache_linesize="64" cache_associativity="0" cache_type="0"><object type="Core" os_index="1" cpuset="0x2" complete_cpuset="0x2" nodeset="0x1" complete_nodeset="0x1" gp_index="11"><object type="PU" os_index="1" cpuset="0x2" complete_cpuset="0x2" nodeset="0x1" complete_nodeset="0x1" gp_index="21"></object>
</object>
<object type="Core" os_index="2" cpuset="0x4" complete_cpuset="0x4" nodeset="0x1" complete_nodeset="0x1" gp_index="12"><object type="PU" os_index="2" cpuset="0x4" complete_cpuset="0x4" nodeset="0x1" complete_nodeset="0x1" gp_index="22"></object>
</object>
</object>
<object type="Core" os_index="3" cpuset="0x8" complete_cpuset="0x8" nodeset="0x1" complete_nodeset="0x1" gp_index="13"><object type="PU" os_index="3" cpuset="0x8" complete_cpuset="0x8" nodeset="0x1" complete_nodeset="0x1" gp_index="23"></object>
</object>
</object>
</object>
</topology>
)xml";
  const urt::topology topo(
      urt::topology_options{urt::topology_source::xml(file.path.string()), {}});
  REQUIRE(topo.worker_count() == 4);
  CHECK(topo.llc_count() == 3);
  const unsigned expected_llc[] = {0, 1, 1, 2};
  for (unsigned w = 0; w < 4; ++w) {
    CAPTURE(w);
    CHECK(topo.workers()[w].pu == w);
    CHECK(topo.workers()[w].llc == expected_llc[w]);
  }
  // And a runtime runs on it.
  urt::runtime rt(urt::runtime_options{.topology = urt::topology_source::xml(file.path.string())});
  std::atomic<int> ran{0};
  for (int i = 0; i < 16; ++i) rt.spawn({.priority = 10}, [&ran] { ran.fetch_add(1); });
  rt.stop();
  CHECK(ran.load() == 16);
}

TEST_CASE("topology: XML round trip keeps the mapping") {
  for (const char* description : {numa_256, flat_256, "pack:2 l2:4 core:2 pu:2"}) {
    CAPTURE(description);
    const auto original = synthetic(description);
    const temp_file file("roundtrip.xml");
    original.save_xml(file.path.string());
    REQUIRE(std::filesystem::exists(file.path));
    const urt::topology loaded(
        urt::topology_options{urt::topology_source::xml(file.path.string()), {}});
    CHECK(loaded.source().kind == urt::topology_kind::xml);
    CHECK_FALSE(original.is_this_system());
    CHECK_FALSE(loaded.is_this_system());
    check_same_mapping(original, loaded);
  }
}

TEST_CASE("topology: a cpulist selects PUs by OS index in logical order") {
  SUBCASE("two NUMA nodes") {
    const auto topo = synthetic(numa_256, "0-3,8,200-201");
    REQUIRE(topo.worker_count() == 7);
    const std::vector<unsigned> pus{0, 1, 2, 3, 8, 200, 201};
    const std::vector<unsigned> llcs{0, 0, 0, 0, 0, 1, 1};
    const std::vector<unsigned> numas{0, 0, 0, 0, 0, 1, 1};
    for (unsigned w = 0; w < 7; ++w) {
      const auto& p = topo.workers()[w];
      CHECK(p.worker == w);
      CHECK(p.pu == pus[w]);
      CHECK(p.llc == llcs[w]);
      CHECK(p.numa == numas[w]);
    }
    CHECK(topo.llc_count() == 2);
    CHECK(topo.numa_count() == 2);
  }
  SUBCASE("one NUMA node") {
    const auto topo = synthetic(flat_256, "201,200,8,0-3");
    REQUIRE(topo.worker_count() == 7);
    const std::vector<unsigned> pus{0, 1, 2, 3, 8, 200, 201};
    for (unsigned w = 0; w < 7; ++w) {
      const auto& p = topo.workers()[w];
      CHECK(p.worker == w);
      CHECK(p.pu == pus[w]);
      CHECK(p.llc == (w < 5 ? 0u : 1u));
      CHECK(p.numa == 0);
    }
    CHECK(topo.llc_count() == 2);
    CHECK(topo.numa_count() == 1);
  }
}

TEST_CASE("topology: bad inputs are rejected naming the field and value") {
  SUBCASE("malformed synthetic description") {
    const auto msg = thrown_message<std::invalid_argument>([] { (void)synthetic("pack:2 bogus:3"); });
    CHECK(contains(msg, "topology.synthetic"));
    CHECK(contains(msg, "\"pack:2 bogus:3\""));
  }
  SUBCASE("missing XML file") {
    const auto msg = thrown_message<std::invalid_argument>([] {
      (void)urt::topology(urt::topology_options{urt::topology_source::xml("/nonexistent/urt.xml"), {}});
    });
    CHECK(contains(msg, "topology.xml"));
    CHECK(contains(msg, "\"/nonexistent/urt.xml\""));
    CHECK(contains(msg, "No such file or directory"));
  }
  SUBCASE("a file that is not XML") {
    const temp_file file("garbage.xml");
    {
      std::ofstream out(file.path);
      out << "this is not an hwloc topology\n\x01\x02 <<<\n";
    }
    const std::string path = file.path.string();
    const auto msg = thrown_message<std::invalid_argument>([&] {
      (void)urt::topology(urt::topology_options{urt::topology_source::xml(path), {}});
    });
    CHECK(contains(msg, "topology.xml"));
    CHECK(contains(msg, "\"" + path + "\""));
  }
  SUBCASE("cpulist syntax error") {
    const auto msg = thrown_message<std::invalid_argument>([] { (void)synthetic(flat_256, "0-3,x"); });
    CHECK(contains(msg, "cpus"));
    CHECK(contains(msg, "0-3,x"));
  }
  SUBCASE("reversed cpulist range") {
    const auto msg = thrown_message<std::invalid_argument>([] { (void)synthetic(flat_256, "5-2"); });
    CHECK(contains(msg, "cpus"));
    CHECK(contains(msg, "5-2"));
  }
  SUBCASE("PU outside the allowed set") {
    const auto msg = thrown_message<std::invalid_argument>([] { (void)synthetic(flat_256, "300"); });
    CHECK(contains(msg, "cpus"));
    CHECK(contains(msg, "PU 300"));
    CHECK(contains(msg, "\"0-255\""));
  }
  SUBCASE("binding a worker that does not exist") {
    const auto topo = synthetic("pack:2 core:2 pu:2");
    const auto msg = thrown_message<std::out_of_range>([&] { (void)topo.bind_current_thread(9999); });
    CHECK(contains(msg, "9999"));
  }
}

TEST_CASE("topology: binding is a no-op on a synthetic topology") {
  const auto topo = synthetic("pack:2 core:2 pu:2");
  bool bound = true;
  std::thread([&] { bound = topo.bind_current_thread(3); }).join();
  CHECK_FALSE(bound);
}

TEST_CASE("topology: const members are safe from many threads") {
  const auto topo = synthetic(numa_256);
  std::atomic<unsigned> bad{0};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (unsigned round = 0; round < 50; ++round) {
        if (topo.worker_count() != 256 || topo.llc_count() != 16 || topo.numa_count() != 2) ++bad;
        const unsigned w = (i * 37 + round) % 256;
        if (topo.workers()[w].pu != w || topo.bind_current_thread(w)) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad.load() == 0);
}

TEST_CASE("topology: a moved topology keeps its workers") {
  auto a = synthetic("pack:2 l2:4 core:2 pu:2");
  urt::topology b(std::move(a));
  CHECK(b.worker_count() == 32);
  CHECK(b.llc_count() == 8);
  urt::topology c = synthetic("pack:2 core:2 pu:2");
  c = std::move(b);
  CHECK(c.worker_count() == 32);
  CHECK(c.source().text == "pack:2 l2:4 core:2 pu:2");
}

TEST_CASE("topology: the wider bindings stay inside the chosen workers' PUs") {
  // One worker on the first allowed PU: whatever the machine, binding to its
  // LLC or to every worker gives that PU only, never another allowed one.
  const urt::topology all;
  const unsigned first = all.workers()[0].pu;
  const urt::topology one(urt::topology_options{.cpus = std::to_string(first)});
  REQUIRE(one.worker_count() == 1);
  for (const urt::worker_binding b :
       {urt::worker_binding::pu, urt::worker_binding::llc, urt::worker_binding::workers}) {
    CAPTURE(static_cast<int>(b));
    bool bound = false;
    int count = -1;
    bool has_first = false;
    std::thread([&] {
      bound = one.bind_current_thread(0, b);
      cpu_set_t mine;
      CPU_ZERO(&mine);
      if (::sched_getaffinity(0, sizeof mine, &mine) == 0) {
        count = CPU_COUNT(&mine);
        has_first = CPU_ISSET(first, &mine);
      }
    }).join();
    CHECK(bound);
    CHECK(count == 1);
    CHECK(has_first);
  }
  // Bound to every worker of the whole machine: its allowed set.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(::sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int count = -1;
  std::thread([&] {
    (void)all.bind_current_thread(all.worker_count() - 1, urt::worker_binding::workers);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (::sched_getaffinity(0, sizeof mine, &mine) == 0) count = CPU_COUNT(&mine);
  }).join();
  CHECK(count == static_cast<int>(all.worker_count()));
  CHECK(count == CPU_COUNT(&allowed));
}

TEST_CASE("topology: the system topology binds worker threads") {
  const urt::topology topo;
  CHECK(topo.source().kind == urt::topology_kind::system);
  CHECK(topo.is_this_system());
  REQUIRE(topo.worker_count() >= 1);
  CHECK(topo.llc_count() >= 1);
  CHECK(topo.numa_count() >= 1);

  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  REQUIRE(::sched_getaffinity(0, sizeof affinity, &affinity) == 0);
  std::set<unsigned> pus;
  for (const auto& p : topo.workers()) {
    CHECK(pus.insert(p.pu).second);
    CHECK(p.llc < topo.llc_count());
    CHECK(p.numa < topo.numa_count());
    if (p.pu < CPU_SETSIZE) CHECK(CPU_ISSET(p.pu, &affinity));
  }

  bool bound = false;
  std::string error;
  bool only_that_pu = false;
  const unsigned pu = topo.workers()[0].pu;
  std::thread([&] {
    try {
      bound = topo.bind_current_thread(0);
      cpu_set_t mine;
      CPU_ZERO(&mine);
      if (::sched_getaffinity(0, sizeof mine, &mine) == 0) {
        only_that_pu = CPU_COUNT(&mine) == 1 && pu < CPU_SETSIZE && CPU_ISSET(pu, &mine);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }).join();
  CHECK(error.empty());
  CHECK(bound);
  CHECK(only_that_pu);
}
