#include "qsbr.hpp"

#include <urcu/urcu-qsbr.h>

#include "hot.hpp"

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

URT_HOT void quiescent() noexcept {
  URT_TSAN_RELEASE(&tsan_grace);
  urcu_qsbr_quiescent_state();
}

URT_HOT void offline() noexcept {
  URT_TSAN_RELEASE(&tsan_grace);
  urcu_qsbr_thread_offline();
}

URT_HOT void online() noexcept { urcu_qsbr_thread_online(); }

}  // namespace urt::detail::qsbr
