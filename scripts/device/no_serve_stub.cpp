// The device build has no cpp-httplib library, so `rlx serve` is replaced by a command that says so.
#include "commands.h"

namespace rlx::cli {

int cmd_serve(const Args&) {
  fail("[cli] this build has no HTTP server (device build without cpp-httplib): rlx serve is unavailable");
}

}  // namespace rlx::cli
