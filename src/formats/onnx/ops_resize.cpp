// ONNX Resize / Upsample: each resized axis becomes a contraction with a constant [out, in]
// interpolation matrix built with the spec's 1-D rule (nearest, linear, cubic; antialias;
// exclude_outside; edge clamping; tf_crop_and_resize extrapolation), in f64 like the reference.
#include <algorithm>
#include <cmath>

#include "formats/onnx/importer.h"

namespace rlx::onnx {

namespace {

struct Rule {
  std::string mode = "nearest", ctm = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

std::vector<double> coeffs(const Rule& r, double ratio, double scale) {
  if (r.mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    if (r.nearest == "round_prefer_floor") return {double(ratio <= 0.5), double(ratio > 0.5)};
    if (r.nearest == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (r.nearest == "floor") return {1, 0};
    return {0, 1};
  }
  if (r.mode == "linear") {
    if (!r.antialias) return {1 - ratio, ratio};
    double s = std::min(scale, 1.0);
    int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1), fp = 2 - 2 * start;
    std::vector<double> c;
    double sum = 0;
    for (int64_t i = start; i < start + fp; ++i) {
      c.push_back(std::clamp(1 - std::abs((i - ratio) * s), 0.0, 1.0));
      sum += c.back();
    }
    for (auto& v : c) v /= sum;
    return c;
  }
  double A = r.cubic_a;
  if (!r.antialias) {
    double t = ratio, u = 1 - ratio;
    return {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A, ((A + 2) * t - (A + 3)) * t * t + 1,
            ((A + 2) * u - (A + 3)) * u * u + 1, ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A};
  }
  double s = std::min(scale, 1.0);
  auto f = [A](double x) {
    x = std::abs(x);
    if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
    if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
    return 0.0;
  };
  int64_t is = static_cast<int64_t>(std::floor(-2 / s) + 1), ie = 2 - is;
  std::vector<double> c;
  double sum = 0;
  for (int64_t i = is; i < ie; ++i) {
    c.push_back(f(s * (i - ratio)));
    sum += c.back();
  }
  for (auto& v : c) v /= sum;
  return c;
}

// Interpolation matrix [out, in] plus a per-row extrapolation flag.
void axis_matrix(Ctx& c, const Rule& r, int64_t in, int64_t out, double scale, double roi0, double roi1,
                 std::vector<double>* W, std::vector<double>* extra) {
  W->assign(static_cast<size_t>(out * in), 0.0);
  extra->assign(static_cast<size_t>(out), 0.0);
  double ow = scale * in;
  for (int64_t x = 0; x < out; ++x) {
    double xo;
    const std::string& m = r.ctm;
    if (m == "align_corners") xo = ow == 1 ? 0 : x * (in - 1) / (ow - 1);
    else if (m == "asymmetric") xo = x / scale;
    else if (m == "tf_crop_and_resize") {
      xo = ow == 1 ? (roi1 - roi0) * (in - 1) / 2 : x * (roi1 - roi0) * (in - 1) / (ow - 1);
      xo += roi0 * (in - 1);
      if (xo < 0 || xo > in - 1) {
        (*extra)[x] = 1;
        continue;
      }
    } else if (m == "pytorch_half_pixel") xo = ow == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    else if (m == "half_pixel") xo = (x + 0.5) / scale - 0.5;
    else if (m == "half_pixel_symmetric") {
      double adj = out / ow, center = in / 2.0;
      xo = center * (1 - adj) + (x + 0.5) / scale - 0.5;
    } else c.error("unsupported coordinate_transformation_mode '" + m + "'");
    double ratio = xo == std::floor(xo) ? 1.0 : xo - std::floor(xo);
    std::vector<double> cf = coeffs(r, ratio, scale);
    int64_t n = static_cast<int64_t>(cf.size());
    int64_t pad = (n + 1) / 2, limit = in + 2 * pad;
    double xp = xo + pad;
    std::vector<int64_t> cand;
    for (int64_t i = static_cast<int64_t>(std::floor(xp)) - n - 1; i <= static_cast<int64_t>(std::floor(xp)) + n + 1; ++i)
      if (i >= 0 && i < limit) cand.push_back(i);
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
      double da = std::abs(xp - a), db = std::abs(xp - b);
      return da != db ? da < db : a < b;
    });
    if (static_cast<int64_t>(cand.size()) < n) c.error("resize window larger than the input");
    cand.resize(static_cast<size_t>(n));
    std::sort(cand.begin(), cand.end());
    if (r.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        int64_t idx = cand[k] - pad;
        if (idx < 0 || idx >= in) cf[k] = 0;
        sum += cf[k];
      }
      for (auto& v : cf) v /= sum;
    }
    for (int64_t k = 0; k < n; ++k) {
      int64_t src = std::clamp<int64_t>(cand[k] - pad, 0, in - 1);
      (*W)[x * in + src] += cf[k];
    }
  }
}

void resize(Ctx& c, bool upsample) {
  V x = c.in(0);
  auto d = c.static_shape(x, "X");
  int64_t rk = static_cast<int64_t>(d.size());
  Rule r;
  r.mode = c.attr_s("mode", "nearest");
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic") c.error("unsupported mode '" + r.mode + "'");
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (upsample) {
    r.ctm = "asymmetric";
    r.nearest = "floor";
    if (c.has_input(1)) {
      const Tensor& t = c.const_in(1, "scales");
      for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(t.get(i));
    } else {
      for (double s : c.attr_floats("scales")) scales.push_back(s);
    }
  } else {
    r.ctm = c.attr_s("coordinate_transformation_mode", c.opset() < 11 ? "asymmetric" : "half_pixel");
    r.nearest = c.attr_s("nearest_mode", "round_prefer_floor");
    r.cubic_a = c.attr_f("cubic_coeff_a", -0.75);
    r.exclude_outside = c.attr_i("exclude_outside", 0) != 0;
    r.extrapolation = c.attr_f("extrapolation_value", 0);
    r.antialias = c.attr_i("antialias", 0) != 0;
    if (c.opset() < 11) {
      const Tensor& t = c.const_in(1, "scales");
      for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(t.get(i));
    } else {
      if (c.has_input(1)) {
        const Tensor& t = c.const_in(1, "roi");
        for (int64_t i = 0; i < t.numel(); ++i) roi.push_back(t.get(i));
      }
      if (c.has_input(2)) {
        const Tensor& t = c.const_in(2, "scales");
        for (int64_t i = 0; i < t.numel(); ++i) scales.push_back(t.get(i));
      }
      if (c.has_input(3)) sizes = c.ints_in(3, "sizes");
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < rk; ++i) axes.push_back(i);
  for (auto& a : axes) {
    a = a < 0 ? a + rk : a;
    if (a < 0 || a >= rk) c.error("axis out of range for a rank-" + std::to_string(rk) + " input");
  }
  std::vector<double> sf(static_cast<size_t>(rk), 1.0);
  std::vector<int64_t> os(d);
  // An output size from a scale: checked as a double first (a NaN, infinite or huge scale must not
  // reach the integer conversion).
  auto out_size = [&](double v) {
    if (!(v >= 0 && v <= double(int64_t{1} << 24))) c.error("output size " + std::to_string(v) + " is out of range");
    return static_cast<int64_t>(v);
  };
  if (!sizes.empty()) {
    if (sizes.size() != axes.size()) c.error("sizes must have one entry per axis");
    for (size_t i = 0; i < axes.size(); ++i) sf[axes[i]] = static_cast<double>(sizes[i]) / d[axes[i]], os[axes[i]] = sizes[i];
    std::string pol = c.attr_s("keep_aspect_ratio_policy", "stretch");
    if (pol != "stretch") {
      double s = pol == "not_larger" ? 1e300 : -1e300;
      for (auto a : axes) s = pol == "not_larger" ? std::min(s, sf[a]) : std::max(s, sf[a]);
      for (auto a : axes) sf[a] = s, os[a] = out_size(s * d[a] + 0.5);
    }
  } else {
    if (scales.size() != axes.size()) c.error("scales must have one entry per axis");
    for (size_t i = 0; i < axes.size(); ++i)
      sf[axes[i]] = scales[i], os[axes[i]] = out_size(std::floor(scales[i] * d[axes[i]]));
  }
  // roi is [starts..., ends...] over the axes (or all dims).
  std::vector<double> r0(static_cast<size_t>(rk), 0.0), r1(static_cast<size_t>(rk), 1.0);
  if (!roi.empty()) {
    size_t n = roi.size() / 2;
    if (n != static_cast<size_t>(rk) && n != axes.size()) c.error("roi must have 2 entries per axis");
    for (size_t i = 0; i < n; ++i) {
      int64_t a = n == static_cast<size_t>(rk) ? static_cast<int64_t>(i) : axes[i];
      r0[a] = roi[i];
      r1[a] = roi[n + i];
    }
  }
  for (int64_t a = 0; a < rk; ++a)
    if (os[a] < 0 || os[a] > (int64_t{1} << 24)) c.error("output size " + std::to_string(os[a]) + " is out of range");
  DType dt = c.dtype(x);
  V y = c.convert(x, DType::f64);
  for (int64_t a = 0; a < rk; ++a) {
    if (std::abs(sf[a] - 1.0) < 1e-9 && os[a] == d[a] && r0[a] == 0 && r1[a] == 1) continue;
    std::vector<double> W, ex;
    axis_matrix(c, r, d[a], os[a], sf[a], r0[a], r1[a], &W, &ex);
    Tensor wt(DType::f64, {os[a], d[a]});
    for (size_t i = 0; i < W.size(); ++i) wt.set(static_cast<int64_t>(i), W[i]);
    V z = c.op1(OpKind::DotGeneral, {y, c.constant(wt)},
                {{"lhs_batch", std::vector<int64_t>{}}, {"rhs_batch", std::vector<int64_t>{}},
                 {"lhs_contract", std::vector<int64_t>{a}}, {"rhs_contract", std::vector<int64_t>{1}}});
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < rk - 1; ++i) perm.push_back(i);
    perm.insert(perm.begin() + a, rk - 1);
    y = c.transpose(z, perm);
    if (std::any_of(ex.begin(), ex.end(), [](double v) { return v != 0; })) {
      Tensor et(DType::f64, {os[a]});
      for (int64_t i = 0; i < os[a]; ++i) et.set(i, ex[i] * r.extrapolation);
      std::vector<int64_t> es(static_cast<size_t>(rk), 1);
      es[a] = os[a];
      y = c.bin(OpKind::Add, y, c.reshape(c.constant(et), es));
    }
  }
  if (!is_float(dt)) y = c.unary(OpKind::Round, y);
  c.set_output(0, c.convert(y, dt));
}

}  // namespace

void register_resize_ops(std::map<std::string, Converter>& r) {
  r["Resize"] = [](Ctx& c) { resize(c, false); };
  r["Upsample"] = [](Ctx& c) { resize(c, true); };
}

}  // namespace rlx::onnx
