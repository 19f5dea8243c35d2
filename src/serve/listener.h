// httplib::Server with a drain step: close_listener() shuts the listening socket so new connections
// are refused and the accept loop ends, while connections in flight (streams included) run on.
// httplib's stop() would also cut chunked responses short (they check for it between chunks).
#pragma once
#include <httplib.h>
#include <sys/socket.h>

namespace rlx::serve {

class Listener : public httplib::Server {
 public:
  void close_listener() {
    socket_t s = svr_sock_;
    if (s != INVALID_SOCKET) ::shutdown(s, SHUT_RDWR);  // accept() returns EINVAL: listen_after_bind ends
  }
};

}  // namespace rlx::serve
