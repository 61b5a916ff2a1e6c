#include "fair_slice.hpp"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace urt::detail::fair_slice {
namespace {

// glibc 2.36 has no sched_setattr wrapper nor struct sched_attr: the
// kernel's layout (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER1).
struct sched_attr_v1 {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
  std::uint32_t sched_util_min;
  std::uint32_t sched_util_max;
};

}  // namespace

void request(std::chrono::nanoseconds slice, unsigned worker) {
  sched_attr_v1 attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = ::getpriority(PRIO_PROCESS, 0);  // keep the thread's nice value
  attr.sched_runtime = static_cast<std::uint64_t>(slice.count());
  if (::syscall(SYS_sched_setattr, 0, &attr, 0U) == 0) return;
  const int err = errno;
  if (err == ENOSYS || err == EPERM) return;
  throw std::system_error(err, std::generic_category(),
                          "runtime_options.os_slice: a slice of " +
                              std::to_string(slice.count()) + " ns refused for worker " +
                              std::to_string(worker));
}

std::int64_t of_this_thread() noexcept {
  sched_attr_v1 attr{};
  if (::syscall(SYS_sched_getattr, 0, &attr, static_cast<unsigned>(sizeof attr), 0U) != 0) {
    return -1;
  }
  return static_cast<std::int64_t>(attr.sched_runtime);
}

}  // namespace urt::detail::fair_slice
