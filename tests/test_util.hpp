// Helpers shared by the test files.
#pragma once

#include <exception>
#include <string>

namespace urt_test {

/// The what() of the exception `fn` throws, or "<no exception>".
template <class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception>";
}

}  // namespace urt_test
