// Progress of long work on stderr: on a terminal one line redrawn in place (at most 5 times a
// second); into a log (stderr not a terminal) a plain line every 15 seconds and none of the `\r`
// frames. `done()` ends the line.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace rlx::cli {

class Progress {
 public:
  explicit Progress(std::string what, bool quiet = false)
      : what_(std::move(what)), tty_(isatty(STDERR_FILENO)), on_(!quiet) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update(size_t n, size_t total, const std::string& note = "") {
    if (!on_ || total == 0) return;
    total_ = total;
    auto now = std::chrono::steady_clock::now();
    auto since = now - last_;
    bool due = tty_ ? since > std::chrono::milliseconds(200) : since > std::chrono::seconds(15);
    if (!due && n < total_) return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "%s%s: %zu/%zu (%d%%) %.0f s%s%s%s", tty_ ? "\r" : "", what_.c_str(), n, total_,
                 static_cast<int>(100 * n / total_), secs, note.empty() ? "" : ", ", note.c_str(), tty_ ? "  " : "\n");
    drawn_ = tty_;
  }
  void done() {
    if (drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
    on_ = false;
  }

 private:
  std::string what_;
  size_t total_ = 0;
  bool tty_, on_, drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

}  // namespace rlx::cli
