// qsbr: a worker thread's part in liburcu's QSBR flavour, for the blocks
// bandwidth_table publishes. A worker registers when it starts, reports a
// quiescent state at each scheduling point (it holds no block across one),
// goes offline before it may park (a parked online thread would stall every
// grace period) and online after, and unregisters before it exits.
//
// Concurrency: each call concerns the calling thread only. TSAN cannot see
// QSBR's own synchronisation: quiescent() and offline() release
// `tsan_grace`, which the callbacks that free retired blocks acquire.
#pragma once

namespace urt::detail::qsbr {

/// The address the TSAN annotations synchronise on.
inline char tsan_grace = 0;

void register_thread() noexcept;
void unregister_thread() noexcept;
void quiescent() noexcept;
void offline() noexcept;
void online() noexcept;

}  // namespace urt::detail::qsbr
