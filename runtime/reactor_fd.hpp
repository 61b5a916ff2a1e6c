// reactor_fd: the epoll descriptor of an io_context's reactor, for the
// ready ring (ready_ring.hpp), which polls it.
//
// Asio keeps the descriptor private (asio::detail::epoll_reactor::
// epoll_fd_) and offers no accessor. It is read through an explicit
// instantiation, in whose names the language does not check access
// ([temp.spec.general]): the template below is instantiated with a
// pointer to the member, and the friend function it defines returns that
// pointer. Well-defined, and a compile error, not a silent misread, if a
// later Asio renames or retypes the member. Where the io_context's reactor
// is not the epoll one (an Asio configured for io_uring, or not Linux), or
// has not been made yet, there is no descriptor: -1, and the worker polls
// on its interval as without the ring.
#pragma once

#include <asio/detail/reactor.hpp>
#include <asio/io_context.hpp>

#include <type_traits>

namespace urt::detail {

#if defined(ASIO_HAS_EPOLL)
namespace reactor_access {
struct epoll_fd {
  using type = int asio::detail::epoll_reactor::*;
  friend type member(epoll_fd) noexcept;
};
template <class Tag, typename Tag::type Member>
struct expose {
  friend typename Tag::type member(Tag) noexcept { return Member; }
};
template struct expose<epoll_fd, &asio::detail::epoll_reactor::epoll_fd_>;
}  // namespace reactor_access
#endif

/// The epoll descriptor of `io`'s reactor, or -1 (see the top). Owner of
/// `io` only: reads the reactor, does not make one.
inline int reactor_epoll_fd(asio::io_context& io) noexcept {
#if defined(ASIO_HAS_EPOLL)
  if constexpr (std::is_same_v<asio::detail::reactor, asio::detail::epoll_reactor>) {
    if (!asio::has_service<asio::detail::epoll_reactor>(io)) return -1;
    auto& reactor = asio::use_service<asio::detail::epoll_reactor>(io);
    return reactor.*member(reactor_access::epoll_fd{});
  }
#endif
  return -1;
}

}  // namespace urt::detail
