// `rlx serve`: flags to ServeOptions; the server itself is src/serve.
#include "commands.h"
#include "serve/server.h"

namespace rlx::cli {

int cmd_serve(const Args& a) {
  serve::ServeOptions o;
  o.models = a.all("model");
  o.device = a.get("device");
  o.host = a.get("host");
  o.port = static_cast<int>(a.integer("port"));
  o.threads = static_cast<int>(a.integer("threads"));
  o.max_body = static_cast<size_t>(a.integer("max-body"));
  o.embed.max_tokens = a.integer("batch-tokens");
  o.embed.max_queue = o.gen.max_queue = a.integer("max-queue");
  o.gen.max_active = a.integer("max-active");
  o.embed.timeout_s = o.gen.timeout_s = a.number("timeout");
  o.quiet = a.has("quiet");
  return serve::Server(o).run();
}

}  // namespace rlx::cli
