// Tests of urt/worker_set.hpp: worker sets and the cpulist syntax.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "urt/worker_set.hpp"

#include "../topologies.hpp"

using urt_test::message_of;

TEST_CASE("worker_set: parse_cpulist accepts ranges, singletons, duplicates, any order") {
  CHECK(urt::parse_cpulist("0-3,8", "f") == std::vector<unsigned>{0, 1, 2, 3, 8});
  CHECK(urt::parse_cpulist("7", "f") == std::vector<unsigned>{7});
  CHECK(urt::parse_cpulist("9,1-2,2,0", "f") == std::vector<unsigned>{0, 1, 2, 9});
  CHECK(urt::parse_cpulist("5-5", "f") == std::vector<unsigned>{5});
}

TEST_CASE("worker_set: parse_cpulist errors name the field and quote the text") {
  CHECK(message_of([] { urt::parse_cpulist("0-3,x", "cpus"); }) ==
        "cpus: \"0-3,x\" is not a cpulist (unexpected 'x'); expected e.g. \"0-3,8\"");
  CHECK(message_of([] { urt::parse_cpulist("5-2", "cpus"); }) ==
        "cpus: \"5-2\" is not a cpulist (range 5-2 is reversed); expected e.g. \"0-3,8\"");
  CHECK(message_of([] { urt::parse_cpulist("", "cpus"); }) ==
        "cpus: \"\" is not a cpulist (empty); expected e.g. \"0-3,8\"");
  CHECK(message_of([] { urt::parse_cpulist("1,", "cpus"); }) ==
        "cpus: \"1,\" is not a cpulist (missing index at the end); expected e.g. \"0-3,8\"");
  CHECK(message_of([] { urt::parse_cpulist("3-", "a"); }).find("missing index") !=
        std::string::npos);
  CHECK(message_of([] { urt::parse_cpulist(" 1", "a"); }).find("unexpected ' '") !=
        std::string::npos);
  CHECK(message_of([] { urt::parse_cpulist("1-2-3", "a"); }).find("unexpected '-'") !=
        std::string::npos);
  CHECK(message_of([] { urt::parse_cpulist("99999999999", "a"); }).find("too large") !=
        std::string::npos);
  CHECK(message_of([] { urt::parse_cpulist("0-40", "a", 31); }) ==
        "a: \"0-40\" is not a cpulist (index 40 exceeds 31); expected e.g. \"0-3,8\"");
  CHECK_THROWS_AS(urt::parse_cpulist("x", "a"), std::invalid_argument);
}

TEST_CASE("worker_set: format_cpulist is the inverse of parse_cpulist") {
  for (const char* text : {"0-3,8", "1", "0,2,4", "5-9,11-12,1000"}) {
    CHECK(urt::format_cpulist(urt::parse_cpulist(text, "f")) == text);
  }
  CHECK(urt::format_cpulist({}).empty());
}

TEST_CASE("worker_set: worker_set membership, counting and iteration across words") {
  urt::worker_set s{0, 63, 64, 127, 1023};
  CHECK(s.count() == 5);
  CHECK(s.contains(63));
  CHECK(s.contains(64));
  CHECK_FALSE(s.contains(65));
  CHECK_FALSE(s.contains(5000));
  CHECK(s.first() == 0);
  CHECK(s.next(1) == 63);
  CHECK(s.next(65) == 127);
  CHECK(s.next(128) == 1023);
  CHECK(s.last() == 1023);
  CHECK(s.ids() == std::vector<unsigned>{0, 63, 64, 127, 1023});
  CHECK(s.to_string() == "0,63-64,127,1023");
  s.remove(1023);
  CHECK(s.last() == 127);
  CHECK(s.next(128) == urt::max_workers);

  const urt::worker_set none;
  CHECK(none.empty());
  CHECK(none.first() == urt::max_workers);
  CHECK(none.last() == urt::max_workers);
  CHECK(none.to_string().empty());
}

TEST_CASE("worker_set: worker_set set algebra and first_n") {
  CHECK(urt::worker_set::first_n(0).empty());
  CHECK(urt::worker_set::first_n(64).to_string() == "0-63");
  CHECK(urt::worker_set::first_n(70).to_string() == "0-69");
  CHECK(urt::worker_set::first_n(urt::max_workers).count() == urt::max_workers);
  const auto a = urt::worker_set::parse("0-9");
  const auto b = urt::worker_set::parse("5-14");
  CHECK((a & b).to_string() == "5-9");
  CHECK((a | b).to_string() == "0-14");
  CHECK(urt::worker_set::parse("3,1") == urt::worker_set{1, 3});
}

TEST_CASE("worker_set: worker_set rejects ids beyond max_workers") {
  CHECK_THROWS_AS(urt::worker_set{1024}, std::out_of_range);
  CHECK_THROWS_AS(urt::worker_set::first_n(1025), std::out_of_range);
  CHECK(message_of([] { urt::worker_set::parse("0,2000", "task_spec.affinity"); }) ==
        "task_spec.affinity: \"0,2000\" is not a cpulist (index 2000 exceeds 1023); expected e.g. "
        "\"0-3,8\"");
}
