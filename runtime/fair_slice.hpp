// fair_slice: the calling thread's time slice in the kernel's fair class
// (SCHED_OTHER), through sched_setattr/sched_getattr's sched_runtime (EEVDF
// custom slices, Linux 6.12 and later; older kernels take the request and
// ignore it, and report 0). runtime_options::os_slice asks for it on each
// worker (worker::set_up); the unit tests read it back.
//
// Concurrency: each call concerns the calling thread only.
#pragma once

#include <chrono>
#include <cstdint>

namespace urt::detail::fair_slice {

/// Asks for `slice` (validated: runtime_options::min_os_slice to
/// max_os_slice) for the calling thread, keeping its nice value. A kernel
/// without the call or a sandbox's filter refusing it (ENOSYS, EPERM; the
/// slice itself needs no privilege) leaves the default slice, as a kernel
/// that ignores the request does; any other refusal throws
/// std::system_error naming runtime_options.os_slice and `worker`.
void request(std::chrono::nanoseconds slice, unsigned worker);

/// The calling thread's slice as the kernel reports it, ns (0 before
/// Linux 6.12), or -1 if sched_getattr fails.
[[nodiscard]] std::int64_t of_this_thread() noexcept;

}  // namespace urt::detail::fair_slice
