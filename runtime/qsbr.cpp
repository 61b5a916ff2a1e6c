#include "qsbr.hpp"

#include <urcu/urcu-qsbr.h>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define URT_TSAN_RELEASE(p) __tsan_release(p)
#else
#define URT_TSAN_RELEASE(p) static_cast<void>(p)
#endif

namespace urt::detail::qsbr {

void register_thread() noexcept { urcu_qsbr_register_thread(); }

void unregister_thread() noexcept {
  URT_TSAN_RELEASE(&tsan_grace);
  urcu_qsbr_unregister_thread();
}

void quiescent() noexcept {
  URT_TSAN_RELEASE(&tsan_grace);
  urcu_qsbr_quiescent_state();
}

void offline() noexcept {
  URT_TSAN_RELEASE(&tsan_grace);
  urcu_qsbr_thread_offline();
}

void online() noexcept { urcu_qsbr_thread_online(); }

}  // namespace urt::detail::qsbr
