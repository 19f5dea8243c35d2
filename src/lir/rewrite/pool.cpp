// pool-divide: an average pool as ONNX imports it, a sum reduce_window followed by a div by a
// constant (the window size, or the count of real elements per output position: [1,1,OH,OW]),
// becomes one reduce_window that divides each finished plane while it is in cache (attr
// cpu_pool_div, the divisor as its second input). The divisor must broadcast to the pool's output
// over a trailing run of its dims (ones before), so element e of the output divides by
// divisor[e % numel(divisor)]; the div's separate pass over the output goes.
#include "lir/rewrite/pass.h"
#include "lir/rewrite/uses.h"

namespace rlx {

namespace {

// d broadcasts to y as ones followed by y's trailing dims (or is a scalar).
bool trailing_broadcast(const std::vector<int64_t>& d, const std::vector<int64_t>& y) {
  if (d.size() > y.size()) return false;
  const size_t off = y.size() - d.size();
  size_t i = 0;
  while (i < d.size() && d[i] == 1) ++i;
  for (; i < d.size(); ++i)
    if (d[i] != y[off + i]) return false;
  return true;
}

}  // namespace

int pass_pool_divide(LirProgram& p, const LirAbsorbs&) {
  const LirUses u = lir_uses(p);
  std::vector<bool> dead(p.kernels.size(), false);
  int n = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    LirKernel& pool = p.kernels[k];
    if (!lir_is_lib(pool, OpKind::ReduceWindow) || pool.in.size() != 1 || pool.out.size() != 1 ||
        attr_str(lir_node(pool), "kind") != "sum")
      continue;
    const int y = pool.out[0];
    const LirBuffer& yb = p.buffers[y];
    if (yb.type.dtype != DType::f32 || !is_static(yb.type.shape) || yb.kind != BufferKind::Arena || u.views[y] != 0 ||
        u.readers[y].size() != 1)
      continue;
    const int rk = u.readers[y][0];
    if (rk <= static_cast<int>(k) || dead[rk]) continue;
    const LirKernel& div = p.kernels[rk];
    if (!lir_is_lib(div, OpKind::Div) || div.in.size() != 2 || div.in[0] != y || div.out.size() != 1) continue;
    const LirBuffer &db = p.buffers[div.in[1]], &ob = p.buffers[div.out[0]];
    if (db.kind != BufferKind::Const || db.type.dtype != DType::f32 || !is_static(db.type.shape) ||
        ob.kind == BufferKind::View || ob.type.dtype != DType::f32 || ob.type.shape != yb.type.shape ||
        !trailing_broadcast(static_dims(db.type.shape), static_dims(yb.type.shape)))
      continue;
    pool.in.push_back(div.in[1]);
    pool.out = {div.out[0]};
    pool.attrs["cpu_pool_div"] = Attr(int64_t{1});
    pool.origin += " +div";
    dead[rk] = true;
    ++n;
  }
  lir_drop(p, dead);
  return n;
}

}  // namespace rlx
