// verify_lir: buffer kinds and ids, definition before use in schedule order, kernel types against
// the op table's rules (except the fused forms a backend's LIR pass made), fused bodies as MIR, and
// that live arena buffers never share bytes except for planned in-place pairs.
#include "rlx/lir.h"
#include "rlx/text.h"

namespace rlx {

namespace {
// A kernel a backend's LIR pass rewrote into one of its fused forms (attrs cpu_* / cuda_*, see
// src/lir/rewrite): its inputs and outputs follow that backend's kernel, not the op table.
bool backend_form(const LirKernel& k) {
  for (auto& [key, v] : k.attrs)
    if (key.rfind("cpu_", 0) == 0 || key.rfind("cuda_", 0) == 0) return true;
  return false;
}
}  // namespace

void verify_lir(const LirProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  auto where = [](const std::string& s) { return "[verify] lir " + s; };
  std::vector<bool> ready(nb, false);
  for (int b = 0; b < nb; ++b) {
    const LirBuffer& lb = p.buffers[b];
    RLX_CHECK(is_static(lb.type.shape), where("buffer %b" + std::to_string(b)), ": shape not concrete");
    if (lb.kind == BufferKind::Input || lb.kind == BufferKind::Const) ready[b] = true;
    if (lb.kind == BufferKind::Const)
      RLX_CHECK(lb.value.dtype() == lb.type.dtype && to_shape(lb.value.shape()) == lb.type.shape,
                where("const %b" + std::to_string(b)), ": value does not match its type");
    if (lb.kind == BufferKind::View) {
      RLX_CHECK(lb.view_of >= 0 && lb.view_of < b, where("view %b" + std::to_string(b)), ": base must precede it");
      RLX_CHECK(p.buffers[lb.view_of].bytes() == lb.bytes() && p.buffers[lb.view_of].type.dtype == lb.type.dtype,
                where("view %b" + std::to_string(b)), ": size or dtype differs from its base");
    }
    if (lb.kind == BufferKind::Arena)
      RLX_CHECK(lb.offset >= 0 && lb.offset + lb.bytes() <= p.arena_bytes, where("arena %b" + std::to_string(b)),
                ": lies outside the arena");
  }
  auto is_ready = [&](int b) {
    while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
    return static_cast<bool>(ready[b]);
  };
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const LirKernel& kr = p.kernels[k];
    std::string w = where("kernel " + std::to_string(k) + " (" + kr.label() + ")");
    std::vector<ValueType> in;
    for (int b : kr.in) {
      RLX_CHECK(b >= 0 && b < nb, w, ": bad buffer id ", b);
      RLX_CHECK(is_ready(b), w, ": reads %b", b, " before it is written");
      in.push_back(p.buffers[b].type);
    }
    for (int b : kr.out) {
      RLX_CHECK(b >= 0 && b < nb, w, ": bad buffer id ", b);
      auto kind = p.buffers[b].kind;
      RLX_CHECK(kind == BufferKind::Arena || kind == BufferKind::Output, w, ": writes a read-only buffer %b", b);
      RLX_CHECK(!ready[b], w, ": %b", b, " written twice");
      ready[b] = true;
    }
    if (backend_form(kr)) continue;  // buffers checked above; the types are the backend's
    if (kr.kind == KernelKind::Library) {
      auto out = infer_types(kr.op, in, kr.attrs, w);
      RLX_CHECK(out.size() == kr.out.size(), w, ": output count differs from the op's");
      for (size_t i = 0; i < out.size(); ++i)
        RLX_CHECK(out[i].dtype == p.buffers[kr.out[i]].type.dtype && out[i].shape == p.buffers[kr.out[i]].type.shape, w,
                  ": output %b", kr.out[i], " has the wrong type");
    } else {
      verify_graph(kr.body, true);
      RLX_CHECK(kr.body.inputs.size() == kr.in.size() && kr.body.outputs.size() == 1 && kr.out.size() == 1, w,
                ": body signature differs from the kernel's");
      for (auto& n : kr.body.nodes) RLX_CHECK(is_elementwise(n.op), w, ": body holds non-elementwise ", op_name(n.op));
    }
  }
  for (int b : p.outputs) RLX_CHECK(ready[b], where("output %b" + std::to_string(b)), " is never written");
  for (int a = 0; a < nb; ++a) {
    for (int b = a + 1; b < nb; ++b) {
      const LirBuffer &x = p.buffers[a], &y = p.buffers[b];
      if (x.kind != BufferKind::Arena || y.kind != BufferKind::Arena) continue;
      if (x.def < 0 || y.def < 0) continue;  // touched by no kernel (a pass folded its kernels away): unplanned
      bool time = x.def <= y.last && y.def <= x.last;
      bool space = x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes();
      if (!time || !space) continue;
      bool in_place = (x.last == y.def && p.kernels[y.def].in_place) || (y.last == x.def && p.kernels[x.def].in_place);
      RLX_CHECK(in_place, where("arena"), ": %b", a, " and %b", b, " overlap in memory while both live");
    }
  }
}

}  // namespace rlx
