// plan-memory: a slot per arena buffer (or per in-place chain), placed first-fit by decreasing size
// among slots whose lifetimes overlap. Views keep their base alive.
#include <algorithm>
#include <numeric>

#include "lir/plan.h"

namespace rlx {

namespace {
constexpr int64_t kAlign = 64;
int64_t align(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
int root(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}
}  // namespace

void plan_memory(LirProgram& p) {
  const int nb = static_cast<int>(p.buffers.size());
  auto base = [&](int b) {
    while (p.buffers[b].kind == BufferKind::View) b = p.buffers[b].view_of;
    return b;
  };
  for (auto& b : p.buffers) b.def = b.last = -1;
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    for (int b : p.kernels[k].in) {
      for (int x = b;; x = p.buffers[x].view_of) {
        p.buffers[x].last = std::max(p.buffers[x].last, k);
        if (p.buffers[x].def < 0) p.buffers[x].def = k;
        if (p.buffers[x].kind != BufferKind::View) break;
      }
    }
    for (int b : p.kernels[k].out) {
      auto& lb = p.buffers[b];
      if (lb.def < 0) lb.def = k;
      lb.last = std::max(lb.last, k);
    }
  }
  // In-place: a generated kernel may write its output over an input that dies there.
  std::vector<int> parent(nb);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> consumed(nb, false);
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    auto& kr = p.kernels[k];
    kr.in_place = false;
    if (kr.kind != KernelKind::Generated) continue;
    int o = kr.out[0];
    if (p.buffers[o].kind != BufferKind::Arena) continue;
    for (int i : kr.in) {
      auto& ib = p.buffers[i];
      if (ib.kind != BufferKind::Arena || ib.last != k || consumed[i] || ib.bytes() != p.buffers[o].bytes() ||
          ib.type.shape != p.buffers[o].type.shape || dtype_size(ib.type.dtype) != dtype_size(p.buffers[o].type.dtype))
        continue;
      bool also_viewed = false;  // a view of the input read later would see overwritten bytes
      for (int v = 0; v < nb; ++v)
        if (p.buffers[v].kind == BufferKind::View && base(v) == i && p.buffers[v].last > k) also_viewed = true;
      for (int j : kr.in)  // another input reading the same bytes through a view of another shape
        if (j != i && base(j) == i) also_viewed = true;
      if (also_viewed) continue;
      consumed[i] = true;
      parent[root(parent, o)] = root(parent, i);
      kr.in_place = true;
      break;
    }
  }
  // A concatenate marked lir_concat_in_place (the concat-in-place pass): each operand joins the
  // output's slot at its byte offset in the output, when the operand is an arena temporary of its
  // own (no in-place chain, no view of it) that dies at the concat. The kernel is then in_place.
  std::vector<int64_t> delta(nb, 0);
  for (int k = 0; k < static_cast<int>(p.kernels.size()); ++k) {
    auto& kr = p.kernels[k];
    if (kr.kind != KernelKind::Library || kr.op != OpKind::Concatenate || !kr.attrs.count("lir_concat_in_place") ||
        kr.out.size() != 1)
      continue;
    const int o = kr.out[0];
    if (p.buffers[o].kind != BufferKind::Arena) continue;
    std::vector<int> chained(nb, 0);  // members of each in-place chain
    for (int b = 0; b < nb; ++b)
      if (p.buffers[b].kind == BufferKind::Arena) ++chained[root(parent, b)];
    bool ok = true;
    int64_t off = 0;
    std::vector<int64_t> at;
    for (size_t i = 0; ok && i < kr.in.size(); ++i) {
      const int b = kr.in[i];
      const auto& ib = p.buffers[b];
      ok = ib.kind == BufferKind::Arena && ib.last == k && ib.def < k && root(parent, b) == b && chained[b] == 1 &&
           delta[b] == 0 && b != o;
      for (int v = 0; ok && v < nb; ++v) ok = !(p.buffers[v].kind == BufferKind::View && base(v) == b);
      for (size_t j = 0; ok && j < i; ++j) ok = kr.in[j] != b;
      at.push_back(off);
      off += ib.bytes();
    }
    if (!ok || off != p.buffers[o].bytes() || delta[o] != 0) continue;
    for (size_t i = 0; i < kr.in.size(); ++i) {
      parent[kr.in[i]] = root(parent, o);
      delta[kr.in[i]] = at[i];
    }
    kr.in_place = true;
  }
  struct Slot {
    int64_t size = 0;
    int def = 1 << 30, last = -1;
    int64_t offset = 0;
    std::vector<int> members;
  };
  std::vector<Slot> slots(nb);
  p.naive_bytes = 0;
  for (int b = 0; b < nb; ++b) {
    auto& lb = p.buffers[b];
    if (lb.kind != BufferKind::Arena) continue;
    p.naive_bytes += align(lb.bytes());
    Slot& s = slots[root(parent, b)];
    s.size = std::max(s.size, align(delta[b] + lb.bytes()));
    s.def = std::min(s.def, lb.def < 0 ? 0 : lb.def);
    s.last = std::max(s.last, lb.last);
    s.members.push_back(b);
  }
  std::vector<int> order;
  for (int b = 0; b < nb; ++b)
    if (!slots[b].members.empty()) order.push_back(b);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return slots[a].size > slots[b].size; });
  std::vector<int> placed;
  p.arena_bytes = 0;
  for (int s : order) {
    // Candidate offsets: 0 and the end of every placed slot that overlaps in time.
    std::vector<int64_t> cands{0};
    for (int q : placed)
      if (slots[q].def <= slots[s].last && slots[s].def <= slots[q].last) cands.push_back(slots[q].offset + slots[q].size);
    std::sort(cands.begin(), cands.end());
    for (int64_t c : cands) {
      bool ok = true;
      for (int q : placed) {
        bool time = slots[q].def <= slots[s].last && slots[s].def <= slots[q].last;
        bool space = c < slots[q].offset + slots[q].size && slots[q].offset < c + slots[s].size;
        if (time && space) {
          ok = false;
          break;
        }
      }
      if (ok) {
        slots[s].offset = c;
        break;
      }
    }
    placed.push_back(s);
    p.arena_bytes = std::max(p.arena_bytes, slots[s].offset + slots[s].size);
    for (int m : slots[s].members) p.buffers[m].offset = slots[s].offset + delta[m];
  }
}

void erase_kernels(LirProgram& p, const std::vector<bool>& dead) {
  size_t w = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (!dead[k]) {
      if (w != k) p.kernels[w] = std::move(p.kernels[k]);
      ++w;
    }
  p.kernels.resize(w);
}

}  // namespace rlx
