// The web page `rlx serve` answers at /: a similarity matrix of typed sentences and a streaming
// chat box, talking to the server's own OpenAI endpoints with fetch().
#pragma once
#include <string>

namespace rlx::serve {

const std::string& page_html();

}  // namespace rlx::serve
