// A self-contained HTML page that runs one compiled program with the browser's WebGPU: the WGSL
// kernels, the launch schedule, the constants (weights) and the inputs of one run, embedded as
// JSON/base64. Opening it runs the program and prints every output (to the page and, one line
// per output, as `rlx-output <i> <base64 of the raw bytes>` on the console, then `rlx-done`, or
// `rlx-error <message>`). Written by the portable executor when RLX_WEBGPU_PAGE names a file.
#pragma once
#include <string>
#include <vector>

#include "rlx/dtype.h"

namespace rlx::gpu {

struct PageBuffer {
  size_t bytes = 0;
  std::string init;  // raw bytes uploaded before the run (constants, inputs); empty: zeroed
};
struct PageKernel {
  std::string wgsl;
  std::vector<bool> written;  // per binding: read_write (else read-only) storage
};
struct PageLaunch {
  int kernel;
  int64_t groups;
  std::vector<int> bufs;  // indices into the page's buffers, in binding order
};
struct PageOutput {
  int buf;
  size_t bytes;
  std::string what;  // "f32[2,4]"
};

std::string webgpu_page(const std::string& title, const std::vector<PageBuffer>& buffers,
                        const std::vector<PageKernel>& kernels, const std::vector<PageLaunch>& launches,
                        const std::vector<PageOutput>& outputs);

}  // namespace rlx::gpu
