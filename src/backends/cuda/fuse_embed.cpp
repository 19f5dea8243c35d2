// fold-embedding-norm (see fuse_embed.h).
#include "backends/cuda/fuse_embed.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "backends/cuda/render_internal.h"
#include "backends/cuda/fuse_lir.h"
#include "lir/plan.h"

namespace rlx::cuda {

using namespace detail;

int fold_embedding_norm(LirProgram& p) {
  Uses u = count_uses(p);  // named members, not a structured binding: lambdas capture them (clang 14)
  auto& uses = u.uses;
  auto& producer = u.producer;
  auto only_use = [&](int b) { return b >= 0 && uses[b] == 1 && p.buffers[b].kind == BufferKind::Arena; };
  std::vector<bool> dead(p.kernels.size(), false);
  int folded = 0;
  for (int n = 0; n < static_cast<int>(p.kernels.size()); ++n) {
    LirKernel& nk = p.kernels[n];
    if (nk.kind != KernelKind::Library || nk.op != OpKind::LayerNorm || nk.attrs.count("cuda_residual") ||
        nk.attrs.count("cuda_embed") || nk.in.size() < 2 || nk.in.size() > 3 || nk.out.size() != 1)
      continue;
    int x = nk.in[0], a = producer[x];
    if (a < 0 || dead[a] || !only_use(x)) continue;
    const LirKernel& ak = p.kernels[a];
    if (ak.kind != KernelKind::Generated || ak.out.size() != 1 || ak.body.nodes.empty()) continue;
    bool adds = true;
    for (const Node& nd : ak.body.nodes) adds &= nd.op == OpKind::Add && nd.inputs.size() == 2;
    if (!adds || ak.body.outputs.size() != 1 || ak.body.outputs[0] != ak.body.nodes.back().outputs[0]) continue;
    const ValueType& xt = p.buffers[x].type;
    auto xd = static_dims(xt.shape);
    DType t = xt.dtype;
    if ((t != DType::f16 && t != DType::bf16 && t != DType::f32) || xd.size() < 2 || xd.back() > 1024) continue;
    Node lnd{nk.op, {}, {}, nk.attrs, ""};
    int64_t axis = attr_int(lnd, "axis");
    if (axis != -1 && axis != static_cast<int64_t>(xd.size()) - 1) continue;
    int slot = -1;
    for (size_t i = 0; i < ak.in.size(); ++i) {
      int e = producer[ak.in[i]];
      if (e >= 0 && !dead[e] && only_use(ak.in[i]) && p.kernels[e].kind == KernelKind::Library &&
          p.kernels[e].op == OpKind::Embedding && p.kernels[e].in.size() == 2 &&
          static_dims(p.buffers[ak.in[i]].type.shape) == xd)
        slot = static_cast<int>(i);
    }
    if (slot < 0) continue;
    int e = producer[ak.in[slot]];
    const LirKernel& ek = p.kernels[e];
    bool ok = p.buffers[ek.in[0]].type.dtype == t && static_dims(p.buffers[ek.in[0]].type.shape).size() == 2 &&
              is_int(p.buffers[ek.in[1]].type.dtype) && p.buffers[nk.out[0]].type.dtype == t;
    for (size_t i = 0; i < ak.in.size(); ++i) ok &= p.buffers[ak.in[i]].type.dtype == t;
    for (size_t i = 1; i < nk.in.size(); ++i) ok &= p.buffers[nk.in[i]].type.dtype == t;
    if (!ok) continue;
    // Every input must be ready where the embedding ran (the fused kernel takes its place).
    for (size_t i = 0; i < ak.in.size() && ok; ++i) ok = static_cast<int>(i) == slot || producer[ak.in[i]] < e;
    for (size_t i = 1; i < nk.in.size() && ok; ++i) ok = producer[nk.in[i]] < e;
    if (!ok) continue;
    LirKernel f;
    f.kind = KernelKind::Library;
    f.op = OpKind::LayerNorm;
    f.attrs = nk.attrs;
    f.attrs["cuda_embed"] = static_cast<int64_t>(slot);
    f.body = ak.body;
    f.in = {ek.in[0], ek.in[1]};
    for (size_t i = 0; i < ak.in.size(); ++i)
      if (static_cast<int>(i) != slot) f.in.push_back(ak.in[i]);
    f.in.insert(f.in.end(), nk.in.begin() + 1, nk.in.end());
    f.out = nk.out;
    f.origin = ek.origin + "+" + ak.origin + "+" + nk.origin;
    p.kernels[e] = std::move(f);
    dead[a] = dead[n] = true;
    ++folded;
  }
  return drop_folded(p, dead, folded);
}

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
