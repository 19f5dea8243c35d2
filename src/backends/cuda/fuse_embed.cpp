// The embedding-norm kernel (see fuse_embed.h).
#include "backends/cuda/fuse_embed.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "backends/cuda/render_internal.h"
#include "backends/cuda/fuse_lir.h"
#include "lir/plan.h"

namespace rlx::cuda {

using namespace detail;


KernelSource render_embed_norm(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  const int slot = static_cast<int>(std::get<int64_t>(k.attrs.at("cuda_embed").v));
  const Graph& body = k.body;
  const int nadd = static_cast<int>(body.inputs.size()) - 1;
  auto od = static_dims(out.shape);
  const int64_t H = od.back(), rows = prod(od) / H, len = static_dims(in[0].shape)[0];
  const int r = static_cast<int>(od.size());
  const DType t = out.dtype;
  const size_t gi = 2 + static_cast<size_t>(nadd);
  const bool beta = in.size() > gi + 1;
  const int64_t npl = (H + 31) / 32;
  std::vector<int64_t> lead(od.begin(), od.end() - 1);
  std::ostringstream b;
  b << header(in, {out})
    << "  long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; int lane = threadIdx.x & 31;\n"
    << "  if (row >= " << rows << ") return;\n"
    << unravel(lead, "row", "long long")
    << "  long long p = (long long)in1[row]; if (p < 0) p += " << len << "; p = p < 0 ? 0 : (p >= " << len << " ? "
    << len - 1 << " : p);\n"
    << "  float xv[" << npl << "]; float s = 0.0f;\n"
    << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) {\n"
    << "    long long c" << r - 1 << " = lane + 32 * q;\n"
    << "    if (c" << r - 1 << " >= " << H << ") { xv[q] = 0.0f; continue; }\n";
  // The add chain, node by node, each sum rounded to the dtype as the fused kernel stores it.
  std::map<int32_t, std::string> name;
  int extra = 0;
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    std::string v = "v" + std::to_string(i);
    if (static_cast<int>(i) == slot) {
      b << "    float " << v << " = " << load(t, "in0[p * " + std::to_string(H) + " + c" + std::to_string(r - 1) + "]") << ";\n";
    } else {
      const int arg = 2 + extra++;
      b << "    float " << v << " = "
        << load(t, "in" + std::to_string(arg) + "[" + bcast_offset(static_dims(in[arg].shape), od) + "]") << ";\n";
    }
    name[body.inputs[i]] = v;
  }
  for (size_t j = 0; j < body.nodes.size(); ++j) {
    const Node& n = body.nodes[j];
    std::string v = "t" + std::to_string(j);
    b << "    float " << v << " = " << wrap(t, name.at(n.inputs[0]) + " + " + name.at(n.inputs[1])) << ";\n";
    name[n.outputs[0]] = v;
  }
  b << "    xv[q] = " << name.at(body.outputs[0]) << "; s += xv[q];\n  }\n"
    << "  float mean = warp_sum(s) / " << H << ";\n  s = 0.0f;\n"
    << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) if (lane + 32 * q < " << H
    << ") { float d = xv[q] - mean; s += d * d; }\n"
    << "  float inv = 1.0f / sqrtf(warp_sum(s) / " << H << " + (float)" << num(attr_float(nd, "eps")) << ");\n"
    << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) { int j = lane + 32 * q; if (j < " << H
    << ") out0[row * " << H << " + j] = "
    << store(t, "(xv[q] - mean) * inv * " + load(t, "in" + std::to_string(gi) + "[j]") +
                    (beta ? " + " + load(t, "in" + std::to_string(gi + 1) + "[j]") : ""))
    << "; }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = 256;
  ks.grid = static_cast<unsigned>((rows + 7) / 8);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

}  // namespace rlx::cuda
