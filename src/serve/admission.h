// Admission before waiting. cpp-httplib 0.11's ThreadPool queues accepted connections without
// bound, so under a burst a request could wait for a worker with no answer and no timeout. The
// AdmissionQueue gives each connection one of `workers` threads only while fewer than `workers`
// connections are in service (running or just queued); any other connection is served by a small
// spare pool on which every request is answered at once with 429 and the connection is closed
// (Server's pre-routing handler checks overloaded()). So a client is either served or told to back
// off; nothing waits unbounded. Also: finding the socket of the connection a request came on, to
// see whether its client has gone (httplib 0.11's Request has no is_connection_closed).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include <httplib.h>

namespace rlx::serve {

class AdmissionQueue : public httplib::TaskQueue {
 public:
  AdmissionQueue(size_t workers, size_t spare) : main_(workers), spare_(spare), workers_(workers) {}
  void enqueue(std::function<void()> fn) override;
  void shutdown() override {
    main_.shutdown();
    spare_.shutdown();
  }
  // True on a spare-pool thread: this connection was not admitted.
  static bool& overloaded();

 private:
  httplib::ThreadPool main_, spare_;
  size_t workers_;
  std::atomic<size_t> busy_{0};
};

// The socket of the connection `req` arrived on (matched by its two addresses), or -1.
int connection_socket(const httplib::Request& req);
// True when the peer of socket `fd` has closed or reset the connection (never blocks).
bool peer_closed(int fd);

// Watches one request's client: gone() looks the socket up on first use, then peeks at it.
class ClientWatch {
 public:
  explicit ClientWatch(const httplib::Request& req) : req_(req) {}
  bool gone();

 private:
  const httplib::Request& req_;
  int fd_ = -2;  // -2: not looked up yet; -1: not found (never reported gone)
};

}  // namespace rlx::serve
