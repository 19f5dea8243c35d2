// Clone / split / prune (see densify.h). Rows are gathered into new tensors; `source` maps each
// new Gaussian to the old one so the training loop can carry its Adam moments along.
#include "splat/densify.h"

#include <cmath>
#include <random>

#include "splat/splat_math.h"

namespace rlx::splat {

void GradStats::add(const Tensor& g, int64_t width, int64_t height) {
  const int64_t n = g.shape()[0];
  if (static_cast<int64_t>(sum.size()) != n) reset(n);
  for (int64_t i = 0; i < n; ++i) {
    double gx = g.get(2 * i) * 0.5 * static_cast<double>(width), gy = g.get(2 * i + 1) * 0.5 * static_cast<double>(height);
    if (gx == 0 && gy == 0) continue;
    sum[static_cast<size_t>(i)] += std::sqrt(gx * gx + gy * gy);
    ++count[static_cast<size_t>(i)];
  }
}

namespace {
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> shape = t.shape();
  const int64_t row = t.numel() / std::max<int64_t>(shape[0], 1);
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor o(t.dtype(), shape);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t j = 0; j < row; ++j) o.set(static_cast<int64_t>(r) * row + j, t.get(rows[r] * row + j));
  return o;
}
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
}  // namespace

DensifyResult densify(Scene& s, const GradStats& st, const DensifyOptions& o, double extent, bool prune_huge,
                      uint64_t seed) {
  const int64_t n = s.size();
  DensifyResult r;
  std::vector<int64_t> rows;
  std::vector<int> kind;  // 0 keep, 1 clone copy, 2 split half
  for (int64_t i = 0; i < n; ++i) {
    double smax = 0;
    for (int j = 0; j < 3; ++j) smax = std::max(smax, std::exp(s.log_scales.get(i * 3 + j)));
    const bool prune = sigmoid(s.opacity_logits.get(i)) < o.prune_opacity || (prune_huge && smax > o.huge_scale * extent);
    const size_t si = static_cast<size_t>(i);
    const bool grow = si < st.count.size() && st.count[si] > 0 &&
                      st.sum[si] / static_cast<double>(st.count[si]) > o.grad_threshold &&
                      static_cast<int64_t>(rows.size()) + 2 < o.max_gaussians;
    if (prune) {
      ++r.pruned;
      continue;
    }
    if (grow && smax <= o.small_scale * extent) {
      rows.insert(rows.end(), {i, i});
      kind.insert(kind.end(), {0, 1});
      ++r.cloned;
    } else if (grow) {
      rows.insert(rows.end(), {i, i});
      kind.insert(kind.end(), {2, 2});
      ++r.split;
    } else {
      rows.push_back(i);
      kind.push_back(0);
    }
  }
  Scene ns{gather_rows(s.means, rows), gather_rows(s.log_scales, rows), gather_rows(s.quats, rows),
           gather_rows(s.opacity_logits, rows), gather_rows(s.sh, rows)};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  for (size_t k = 0; k < rows.size(); ++k) {
    if (kind[k] != 2) continue;
    const int64_t i = static_cast<int64_t>(k);
    double q[4], sc[3];
    for (int j = 0; j < 4; ++j) q[j] = ns.quats.get(i * 4 + j);
    double qn = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (qn <= 0) qn = 1;
    Mat3<double> R = quat_to_rot(q[0] / qn, q[1] / qn, q[2] / qn, q[3] / qn);
    double z[3];
    for (int j = 0; j < 3; ++j) {
      sc[j] = std::exp(ns.log_scales.get(i * 3 + j));
      z[j] = nd(rng) * sc[j];
    }
    for (int a = 0; a < 3; ++a)
      ns.means.set(i * 3 + a, ns.means.get(i * 3 + a) + R.m[a][0] * z[0] + R.m[a][1] * z[1] + R.m[a][2] * z[2]);
    for (int j = 0; j < 3; ++j) ns.log_scales.set(i * 3 + j, std::log(sc[j] / 1.6));
  }
  r.source = rows;
  r.fresh.resize(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) r.fresh[k] = kind[k] != 0;
  s = ns;
  return r;
}

void reset_opacity(Scene& s, double max_opacity) {
  const double cap = std::log(max_opacity / (1 - max_opacity));
  for (int64_t i = 0; i < s.size(); ++i) s.opacity_logits.set(i, std::min(s.opacity_logits.get(i), cap));
}

}  // namespace rlx::splat
