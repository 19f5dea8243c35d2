#include "serve/admission.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace rlx::serve {

bool& AdmissionQueue::overloaded() {
  static thread_local bool flag = false;
  return flag;
}

void AdmissionQueue::enqueue(std::function<void()> fn) {
  if (busy_.fetch_add(1) < workers_) {
    main_.enqueue([this, fn = std::move(fn)] {
      fn();
      busy_.fetch_sub(1);
    });
    return;
  }
  busy_.fetch_sub(1);
  spare_.enqueue([fn = std::move(fn)] {
    overloaded() = true;
    fn();
    overloaded() = false;
  });
}

namespace {

// "ip", port of a socket address (v4 or v6).
bool addr_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf);
    port = ntohs(s->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf);
    port = ntohs(s->sin6_port);
  } else {
    return false;
  }
  ip = buf;
  return true;
}

}  // namespace

int connection_socket(const httplib::Request& req) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof peer, sl = sizeof self;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0) continue;
    std::string pip, sip;
    int pport = 0, sport = 0;
    if (!addr_of(peer, pip, pport) || !addr_of(self, sip, sport)) continue;
    if (pport == req.remote_port && sport == req.local_port && pip == req.remote_addr) {
      found = fd;
      break;
    }
  }
  closedir(d);
  return found;
}

bool peer_closed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char c;
  // Readable: either more bytes (a pipelined request: still there) or end of stream (gone).
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool ClientWatch::gone() {
  if (fd_ == -2) fd_ = connection_socket(req_);
  return fd_ >= 0 && peer_closed(fd_);
}

}  // namespace rlx::serve
