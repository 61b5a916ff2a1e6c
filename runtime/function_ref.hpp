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
  /// Refers to `f`, which must outlive every call: a temporary does when
  /// the function_ref is a parameter of the call it is passed to.
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> &&
             std::is_invocable_r_v<R, std::remove_reference_t<F>&, Args...>)
  function_ref(F&& f) noexcept  // implicit, as binding a reference is
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;  // an F* (F may be const): cast back only to F*
  R (*call_)(void*, Args...);
};

}  // namespace urt::detail
