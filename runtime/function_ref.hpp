// function_ref: a non-owning reference to a callable, for a callback that is
// called while its owner's frame is alive (no allocation, one indirect call).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace urt::detail {

template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
 public:
  /// Refers to `f`, which must outlive every call (lvalues only, so a
  /// temporary cannot dangle).
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, function_ref> &&
             std::is_invocable_r_v<R, F&, Args...>)
  function_ref(F& f) noexcept  // implicit, as binding an F& is
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<F*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;  // an F* (F may be const): cast back only to F*
  R (*call_)(void*, Args...);
};

}  // namespace urt::detail
