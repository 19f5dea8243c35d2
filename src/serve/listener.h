// httplib::Server with a drain step: close_listener() shuts the listening socket so new connections
// are refused and the accept loop ends, while connections in flight (streams included) run on.
// httplib's stop() would also cut chunked responses short (they check for it between chunks).
#pragma once
#include <httplib.h>
#include <sys/socket.h>

namespace rlx::serve {

class Listener : public httplib::Server {
 public:
  // httplib 0.11 listens with a backlog of 5: a burst of new clients overflows it and connections
  // are reset. Linux lets listen() be called again on the bound socket to raise it.
  void raise_backlog(int n) {
    socket_t s = svr_sock_;
    if (s != INVALID_SOCKET) ::listen(s, n);
  }
  void close_listener() {
    socket_t s = svr_sock_;
    if (s != INVALID_SOCKET) ::shutdown(s, SHUT_RDWR);  // accept() returns EINVAL: listen_after_bind ends
  }
};

}  // namespace rlx::serve
