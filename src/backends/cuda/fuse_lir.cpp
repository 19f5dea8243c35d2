// The cuda backend's LIR schedule (its pass list and answers, run by the session pipeline) and the
// merge-launches planner (see fuse_lir.h): everything the executable decides about the schedule
// before it renders, compiles and launches anything.
#include "backends/cuda/fuse_lir.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "backends/cuda/gemm.h"
#include "backends/cuda/render_gemm.h"
#include "lir/plan.h"
#include "lir/rewrite/pass.h"

namespace rlx::cuda {

// ---- merge-launches planner ----------------------------------------------------------------------

std::vector<ValueType> MergePlanner::types(const std::vector<int>& ids) const {
  std::vector<ValueType> t;
  for (int b : ids) t.push_back(p.buffers[b].type);
  return t;
}

bool MergePlanner::is_reduction(const LirKernel& k) {
  return k.kind == KernelKind::Library && is_reduce_op(k.op);
}

bool MergePlanner::mergeable_at(size_t i, bool sequential, int64_t limit) const {
  const LirKernel& k = p.kernels[i];
  auto in = types(k.in), out = types(k.out);
  if (!mergeable(k, in, out, sequential)) return false;
  if (!sequential) return !is_reduction(k);
  for (auto& t : in)
    if (numel(t.shape) > limit) return false;
  return numel(out[0].shape) <= limit;
}

size_t MergePlanner::row_run(size_t i) const {
  size_t j = i;
  while (j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, true, kRowElems)) ++j;
  return j - i;
}

// A row launch with a tail starting at kernel i (row kernels L, then the cross-row tail X):
// the number of kernels it covers, or 0.
size_t MergePlanner::row_launch_at(size_t i, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R, bool check_hazards) const {
  if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_ROWS", true) || !env_on("RLX_CUDA_ROW_TAIL", true)) return 0;
  size_t rl = row_run(i), cl = concurrent_run(i);
  if (rl < 2 || (cl >= 2 && cl >= rl)) return 0;
  L->clear(), X->clear();
  if (!split_rows(i, rl, L, X, R, check_hazards, 1)) return 0;
  if (X->empty() ? L->size() < 2 : !tailable(*X, *R)) return 0;
  return rl;
}

bool MergePlanner::overlaps(int a, int b) const {
  uint64_t pa = addr(a), pb = addr(b);
  uint64_t ea = pa + static_cast<uint64_t>(p.buffers[a].bytes()), eb = pb + static_cast<uint64_t>(p.buffers[b].bytes());
  return pa < eb && pb < ea;
}

size_t MergePlanner::sequential_run(size_t i) const {
  size_t j = i;
  while (j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, true)) ++j;
  return j - i;
}

size_t MergePlanner::concurrent_run(size_t i) const {
  size_t j = i;
  for (; j < p.kernels.size() && j - i < kMaxParts && mergeable_at(j, false); ++j) {
    const LirKernel& k = p.kernels[j];
    bool indep = true;
    for (size_t g = i; g < j && indep; ++g) {
      const LirKernel& h = p.kernels[g];
      for (int o : h.out)
        for (int x : k.in) indep &= !overlaps(o, x);
      for (int o : k.out) {
        for (int x : h.in) indep &= !overlaps(o, x);
        for (int x : h.out) indep &= !overlaps(o, x);
      }
    }
    if (!indep) break;
  }
  return j - i;
}

// The parts of a merged launch. Sequential/rows: an arena buffer written and read only inside
// the launch lives in its shared memory (offsets planned by liveness inside the launch, up to
// kSmemBudget bytes; a row launch's blocks hold their own rows only); the rest stays global.
std::vector<MergePart> MergePlanner::parts(const std::vector<size_t>& ks, MergeMode mode, int64_t rows, size_t tail) const {
  std::vector<MergePart> r;
  for (size_t j : ks) r.push_back({&p.kernels[j], types(p.kernels[j].in), types(p.kernels[j].out), {}});
  for (size_t q = ks.size() - tail; q < ks.size(); ++q) r[q].tail = true;
  if (mode == MergeMode::Concurrent) return r;
  std::set<int> global;  // tail outputs, and what the tail's non-reductions read, stay global
  for (size_t q = ks.size() - tail; q < ks.size(); ++q) {
    global.insert(p.kernels[ks[q]].out[0]);
    if (!is_reduction(p.kernels[ks[q]]))
      for (int x : p.kernels[ks[q]].in) global.insert(x);
  }
  int64_t rpb = 0;
  if (mode == MergeMode::Rows) {
    int64_t mx = 1;
    for (auto& mp : r)
      if (!mp.tail) mx = std::max<int64_t>(mx, numel(mp.out[0].shape) / rows);
    rpb = rows_per_block(mx, rows, tail > 0);
  }
  std::set<size_t> in_launch(ks.begin(), ks.end());
  std::map<int, int64_t> off;  // buffer -> shared offset
  std::vector<std::tuple<int64_t, int64_t, size_t>> live;  // (offset, bytes, last position reading it)
  for (size_t pos = 0; pos < ks.size(); ++pos) {
    int b = p.kernels[ks[pos]].out[0];
    const LirBuffer& lb = p.buffers[b];
    bool internal = lb.kind == BufferKind::Arena;
    size_t last = pos;
    for (size_t k = 0; k < p.kernels.size() && internal; ++k)
      for (int x : p.kernels[k].in)
        if (x == b) {
          if (!in_launch.count(k)) internal = false;
          else last = std::max(last, static_cast<size_t>(std::find(ks.begin(), ks.end(), k) - ks.begin()));
        }
    for (auto& v : p.buffers) internal &= !(v.kind == BufferKind::View && v.view_of == b);
    for (int o : p.outputs) internal &= o != b;
    if (!internal || global.count(b)) continue;
    std::erase_if(live, [&](auto& t) { return std::get<2>(t) < pos; });
    std::sort(live.begin(), live.end());
    int64_t bytes = mode == MergeMode::Rows ? numel(lb.type.shape) / rows * rpb * static_cast<int64_t>(dtype_size(lb.type.dtype))
                                            : lb.bytes();
    bytes = (bytes + 15) / 16 * 16;
    int64_t at = 0;
    for (auto& [o, n, l] : live) {  // first fit
      if (at + bytes <= o) break;
      at = std::max(at, o + n);
    }
    if (at + bytes > kSmemBudget) continue;
    live.emplace_back(at, bytes, last);
    off[b] = at;
  }
  for (auto& mp : r) {
    for (int x : mp.k->in) mp.smem.push_back(off.count(x) ? off[x] : -1);
    mp.smem.push_back(off.count(mp.k->out[0]) ? off[mp.k->out[0]] : -1);
  }
  return r;
}

// row-split: a sequential run whose kernels mostly work row by row (leading dim R) runs as a row
// launch over many blocks (L: every kernel that maps row r to row r and needs nothing cross-row)
// followed by a sequential launch of the rest (X: the cross-row reductions and what follows
// them). Refused when moving L ahead of X would overwrite a buffer X still reads (arena reuse).
bool MergePlanner::row_local(const LirKernel& k, int64_t R, const std::set<int>& made_in_l) const {
  auto od = static_dims(p.buffers[k.out[0]].type.shape);
  if (od.empty() || od[0] != R) return false;
  Node nd{k.op, {}, {}, k.attrs, ""};
  if (is_reduction(k)) {
    for (auto a : attr_ints(nd, "axes"))
      if (a == 0 || a == -static_cast<int64_t>(static_dims(p.buffers[k.in[0]].type.shape).size())) return false;
    return static_dims(p.buffers[k.in[0]].type.shape)[0] == R;
  }
  if (k.kind == KernelKind::Library && (k.op == OpKind::ArgMax || k.op == OpKind::ArgMin)) {
    auto id = static_dims(p.buffers[k.in[0]].type.shape);
    return attr_int(nd, "axis") != 0 && attr_int(nd, "axis") != -static_cast<int64_t>(id.size()) && id[0] == R;
  }
  bool elementwise = k.kind == KernelKind::Generated || is_elementwise(k.op);
  for (int x : k.in) {
    if (!made_in_l.count(x)) continue;  // made before the launch: read as is, any row
    auto id = static_dims(p.buffers[x].type.shape);
    if (id.empty() || id[0] != R) return false;
    if (elementwise && id.size() == od.size()) continue;
    if (k.kind == KernelKind::Library && k.op == OpKind::BroadcastInDim && !attr_ints(nd, "dims").empty() &&
        attr_ints(nd, "dims")[0] == 0)
      continue;
    return false;
  }
  return true;
}

bool MergePlanner::split_rows(size_t i, size_t len, std::vector<size_t>* L, std::vector<size_t>* X, int64_t* R,
                              bool check_hazards, size_t min_l) const {
  auto od = static_dims(p.buffers[p.kernels[i].out[0]].type.shape);
  if (od.empty() || od[0] < 2) return false;
  *R = od[0];
  std::set<int> made_l, made_x;
  for (size_t j = i; j < i + len; ++j) {
    const LirKernel& k = p.kernels[j];
    bool dep_x = false;
    for (int x : k.in) dep_x |= made_x.count(x) > 0;
    if (!dep_x && row_local(k, *R, made_l)) L->push_back(j), made_l.insert(k.out[0]);
    else X->push_back(j), made_x.insert(k.out[0]);
  }
  if (L->size() < min_l) return false;
  for (size_t x : *X)
    if (!check_hazards) break;
    else
    for (size_t l : *L) {
      if (l < x) continue;
      for (int o : p.kernels[l].out) {
        bool hit = false;
        for (int b : p.kernels[x].in) hit |= overlaps(o, b);
        for (int b : p.kernels[x].out) hit |= overlaps(o, b);
        if (hit) return false;
      }
    }
  return true;
}

// X can ride on the row launch as its tail: its reductions are over the rows and read nothing X
// makes; its other kernels are small and run in the last block.
bool MergePlanner::tailable(const std::vector<size_t>& X, int64_t R) const {
  std::set<int> made_x;
  for (size_t x : X) {
    const LirKernel& k = p.kernels[x];
    if (is_reduction(k)) {
      if (!tail_reduction(k, p.buffers[k.in[0]].type, R) || made_x.count(k.in[0])) return false;
    } else if (numel(p.buffers[k.out[0]].type.shape) > kSmallElems) {
      return false;  // the tail's other kernels run in one block
    }
    made_x.insert(k.out[0]);
  }
  return true;
}

std::vector<MergePlanner::Launch> MergePlanner::plan(bool merge, bool rows) const {
  std::vector<Launch> r;
  auto range = [](size_t i, size_t n) {
    std::vector<size_t> v;
    for (size_t j = i; j < i + n; ++j) v.push_back(j);
    return v;
  };
  for (size_t i = 0; i < p.kernels.size();) {
    std::vector<size_t> L, X;
    int64_t R = 0;
    if (size_t rl = merge && rows ? row_launch_at(i, &L, &X, &R, true) : 0) {
      std::vector<size_t> all = L;
      all.insert(all.end(), X.begin(), X.end());
      r.push_back({all, MergeMode::Rows, R, true, X.size()});
      i += rl;
      continue;
    }
    L.clear(), X.clear();
    size_t sl = merge ? sequential_run(i) : 0, cl = merge ? concurrent_run(i) : 0;
    if (sl >= 2 && sl >= cl) {
      if (rows && split_rows(i, sl, &L, &X, &R)) {
        if (!X.empty() && tailable(X, R) && env_on("RLX_CUDA_ROW_TAIL", true)) {
          std::vector<size_t> all = L;
          all.insert(all.end(), X.begin(), X.end());
          r.push_back({all, MergeMode::Rows, R, true, X.size()});
        } else {
          r.push_back({L, MergeMode::Rows, R, true});
          if (!X.empty()) r.push_back({X, MergeMode::Sequential, 0, true});
        }
      } else {
        r.push_back({range(i, sl), MergeMode::Sequential, 0, false});
      }
      i += sl;
    } else if (cl >= 2) {
      r.push_back({range(i, cl), MergeMode::Concurrent, 0, false}), i += cl;
    } else {
      r.push_back({range(i, 1), MergeMode::Sequential, 0, false}), ++i;
    }
  }
  return r;
}

std::vector<GridPart> MergePlanner::grid_parts(bool laid_out) const {
  if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_PERSISTENT", true) || p.kernels.size() < 2) return {};
  if (laid_out && !arena_disjoint(p)) return {};  // grid_layout refused (or did not run): the merged plan
  std::vector<GridPart> parts;
  std::vector<int> phase_in, phase_out;  // buffers the current phase reads / writes (open segment included)
  std::set<int> seg_made;                // buffers the open row segment made
  int seg = -1, nseg = 0;
  int64_t seg_rows = 0;
  double flops = 0;
  auto made = [&](int b) {  // b (and the views on it) made by the open row segment
    seg_made.insert(b);
    for (size_t v = 0; v < p.buffers.size(); ++v)
      if (p.buffers[v].kind == BufferKind::View && seg_made.count(p.buffers[v].view_of)) seg_made.insert(static_cast<int>(v));
  };
  auto hits = [&](int b, const std::vector<int>& set) {
    for (int w : set)
      if (overlaps(b, w)) return true;
    return false;
  };
  for (size_t j = 0; j < p.kernels.size(); ++j) {
    const LirKernel& k = p.kernels[j];
    GridPart gp;
    if (!grid_part_ok(k, types(k.in), types(k.out), &gp)) return {};
    for (auto& t : gp.in)
      if (numel(t.shape) > kGridMaxElems) return {};
    if (numel(gp.out[0].shape) > kGridMaxElems) return {};
    if (gp.gemm) flops += 2.0 * static_cast<double>(gp.g.M) * static_cast<double>(gp.g.N) * static_cast<double>(gp.g.K);
    gp.kernel = static_cast<int>(j);
    // Join the open row segment: row-local on its rows, what it reads from outside the segment not
    // written in this phase, what it writes touched by nothing in this phase.
    bool wr_free = !hits(k.out[0], phase_in) && !hits(k.out[0], phase_out);
    if (seg >= 0 && !gp.gemm && wr_free && row_local(k, seg_rows, seg_made)) {
      bool ok = true;
      for (int x : k.in)
        if (!seg_made.count(x)) ok &= !hits(x, phase_out);
      if (ok) {
        gp.seg = seg, gp.rows = seg_rows;
        phase_in.insert(phase_in.end(), k.in.begin(), k.in.end());
        phase_out.push_back(k.out[0]);
        made(k.out[0]);
        parts.push_back(std::move(gp));
        continue;
      }
    }
    seg = -1, seg_made.clear();
    bool hazard = !wr_free;
    for (int x : k.in) hazard |= hits(x, phase_out);
    if (hazard) phase_in.clear(), phase_out.clear();
    gp.barrier = hazard;
    // Open a row segment here when the kernel works row by row (the next kernels may join it).
    auto od = static_dims(gp.out[0].shape);
    if (!gp.gemm && !od.empty() && od[0] >= 2 && row_local(k, od[0], {})) {
      seg = nseg++, seg_rows = od[0];
      gp.seg = seg, gp.rows = seg_rows;
      made(k.out[0]);
    }
    phase_in.insert(phase_in.end(), k.in.begin(), k.in.end());
    phase_out.push_back(k.out[0]);
    parts.push_back(std::move(gp));
  }
  bool any_gemm = false;
  for (auto& gp : parts) any_gemm |= gp.gemm;
  const char* cap = std::getenv("RLX_CUDA_GRID_MAX_MFLOP");
  if (!any_gemm || flops > (cap ? std::atof(cap) * 1e6 : kGridMaxFlops)) return {};
  return parts;
}

namespace {

// reorder-row-regions: in each run of small kernels that splits into row-local kernels (L) and
// cross-row ones (X, see MergePlanner::split_rows), the schedule becomes L then X, and the arena
// (planned after it by the pipeline) is planned for that order, so the row launch and the sequential launch after it reuse no
// memory the other still needs. RLX_CUDA_ROWS=0 (or RLX_CUDA_MERGE=0) keeps the order.
int reorder_row_regions(LirProgram& p) {
  if (!env_on("RLX_CUDA_MERGE", true) || !env_on("RLX_CUDA_ROWS", true)) return 0;
  MergePlanner mp{p, [](int) { return uint64_t{0}; }};
  std::vector<size_t> order;
  int n = 0;
  for (size_t i = 0; i < p.kernels.size();) {
    std::vector<size_t> L, X;
    int64_t R = 0;
    if (size_t rl = mp.row_launch_at(i, &L, &X, &R, false)) {
      order.insert(order.end(), L.begin(), L.end());
      order.insert(order.end(), X.begin(), X.end());
      n += !X.empty();
      i += rl;
      continue;
    }
    L.clear(), X.clear();
    size_t sl = mp.sequential_run(i);
    if (sl >= 2 && mp.split_rows(i, sl, &L, &X, &R, false) && !X.empty()) {
      order.insert(order.end(), L.begin(), L.end());
      order.insert(order.end(), X.begin(), X.end());
      ++n;
      i += sl;
    } else {
      order.push_back(i++);
    }
  }
  if (!n) return 0;
  // The new order must keep every read after the write it depends on (a row region may claim a
  // kernel that feeds it, as in the dequantize decomposition's bit-field chains); if it would not,
  // the schedule stays as it was.
  auto base = [&p](int b) {
    while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
    return b;
  };
  std::vector<int> writer(p.buffers.size(), -1);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int b : p.kernels[k].out) writer[base(b)] = static_cast<int>(k);
  std::vector<char> done(p.kernels.size(), 0);
  for (size_t k : order) {
    for (int b : p.kernels[k].in)
      if (int w = writer[base(b)]; w >= 0 && w != static_cast<int>(k) && !done[w]) return 0;
    done[k] = 1;
  }
  std::vector<LirKernel> ks;
  for (size_t k : order) ks.push_back(std::move(p.kernels[k]));
  p.kernels = std::move(ks);
  return n;
}

}  // namespace

bool arena_disjoint(const LirProgram& p) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena && b.bytes() > 0) r.push_back({b.offset, b.offset + b.bytes()});
  std::sort(r.begin(), r.end());
  for (size_t i = 1; i < r.size(); ++i)
    if (r[i].first < r[i - 1].second) return false;
  return true;
}

// grid-layout (fuse_lir.h): every arena buffer gets its own bytes, so the only
// grid barriers are the true dependencies (the plan's reuse assumes one kernel after the other).
int grid_layout(LirProgram& p, int64_t max_arena) {
  MergePlanner mp{p, [&p](int id) {  // every buffer on its own (views on their base)
    while (p.buffers[id].kind == BufferKind::View) id = p.buffers[id].view_of;
    return (static_cast<uint64_t>(id) + 1) << 40;
  }};
  if (mp.grid_parts(false).empty()) return 0;
  // The size first: a refusal leaves the schedule and the plan's arena as they were (the order the
  // plan's reuse was computed for).
  int64_t off = 0;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena) off += (b.bytes() + 255) / 256 * 256;
  if (off > max_arena) return 0;
  // Sinks last: a kernel whose output no kernel reads (the loss value, the correct count, the
  // parameter updates) moves to the end of the schedule, in order, so it joins a later phase
  // instead of splitting one with a barrier. Buffers are not reused below, so its inputs stay
  // intact; an in-place feedback it would now read after is refused by write_in_place's order check.
  std::vector<bool> read(p.buffers.size(), false);
  for (auto& k : p.kernels)
    for (int x : k.in) {
      int b = x;
      read[b] = true;
      while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of, read[b] = true;
    }
  std::vector<LirKernel> head, tail;
  for (auto& k : p.kernels) (k.out.size() == 1 && !read[k.out[0]] ? tail : head).push_back(std::move(k));
  head.insert(head.end(), std::make_move_iterator(tail.begin()), std::make_move_iterator(tail.end()));
  p.kernels = std::move(head);
  off = 0;
  for (auto& b : p.buffers)
    if (b.kind == BufferKind::Arena) b.offset = off, off += (b.bytes() + 255) / 256 * 256;
  p.arena_bytes = off;
  return 1;
}

// The cuda backend's LIR schedule (fuse_lir.h).
LirSchedule cuda_schedule() {
  LirSchedule s;
  if (env_on("RLX_CUDA_NO_FOLD", false)) return s;
  s.passes = {"fold-attention-transposes", "residual-into-norm"};
  if (env_on("RLX_CUDA_BATCH_LINEARS", true)) s.passes.push_back("batch-sibling-linears");
  s.passes.push_back("bias-into-gemm");
  s.passes.push_back("layernorm-into-gemm");
  if (env_on("RLX_CUDA_EMBED_NORM", true)) s.passes.push_back("embedding-norm");
  s.passes.push_back("reorder-row-regions");
  s.passes.push_back("grid-layout");  // after plan_memory: a persistent launch's layout
  s.absorbs.gemm_bias = [](const LirKernel& g, const std::vector<ValueType>& in, const ValueType& out) {
    GemmShape gs;
    std::string post;
    auto od = static_dims(out.shape);
    return plan_gemm(g, in, out, &gs, &post) && gs.batch == 1 && !od.empty() && gs.N == od.back();
  };
  s.absorbs.gemm_layernorm = [](const LirKernel& g, const std::vector<ValueType>& in, const ValueType& out, double eps) {
    GemmShape gs;
    std::string post;
    if (!plan_gemm(g, in, out, &gs, &post)) return false;
    gs.epilogue = "layernorm";
    gs.eps = eps;
    return !own_gemm_configs(gs).empty();
  };
  s.absorbs.backend_pass = [](const std::string& pass, LirProgram& p) {
    if (pass == "reorder-row-regions") return reorder_row_regions(p);
    if (pass == "grid-layout") return grid_layout(p);
    return 0;
  };
  return s;
}

}  // namespace rlx::cuda
