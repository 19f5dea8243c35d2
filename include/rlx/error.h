// One exception type with context. Messages read "[component] what happened".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace rlx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void cat(std::ostringstream&) {}
template <class T, class... R>
void cat(std::ostringstream& os, const T& t, const R&... r) {
  os << t;
  cat(os, r...);
}
}  // namespace detail

// fail("[ir] node '", name, "': bad axis ", axis)
template <class... A>
[[noreturn]] void fail(const A&... a) {
  std::ostringstream os;
  detail::cat(os, a...);
  throw Error(os.str());
}

#define RLX_CHECK(cond, ...) \
  do {                       \
    if (!(cond)) ::rlx::fail(__VA_ARGS__); \
  } while (0)

}  // namespace rlx
