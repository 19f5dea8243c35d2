// ONNX signal ops: DFT, STFT, Hann/Hamming/BlackmanWindow, MelWeightMatrix.
// A DFT along one axis is a product with constant cos/sin matrices built at import (dot_general);
// windows and mel matrices are constants computed at import from their (import-time) sizes.
#include <cmath>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Contracts axis `axis` of x (size n) with the rows of a constant matrix m [k, n] and puts the
// resulting k-sized dim back at `axis`.
V apply_matrix(Ctx& c, V x, int64_t axis, const Tensor& m) {
  V mv = c.constant(m);
  V y = c.op1(OpKind::DotGeneral, {mv, x}, {{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{axis}}});
  // y: [k, x dims without axis] -> move dim 0 to `axis`.
  int64_t r = c.rank(y);
  std::vector<int64_t> perm;
  for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int64_t i = axis + 1; i < r; ++i) perm.push_back(i);
  return c.transpose(y, perm);
}

}  // namespace

// DFT of x [..., n, ..., 1|2] along `axis` (not the last). inverse/onesided as in ONNX DFT; `len`
// is the transform length (input truncated or zero-padded to it). Result [..., bins, ..., 2]
// (or [..., len, ..., 1] for the one-sided inverse, the IRFFT).
V onnx_dft(Ctx& c, V x, int64_t axis, int64_t len, bool inverse, bool onesided) {
  auto d = c.static_shape(x, "input");
  int64_t r = static_cast<int64_t>(d.size());
  if (axis < 0 || axis >= r - 1) c.error("DFT axis must name a signal dim (not the last)");
  if (d[r - 1] != 1 && d[r - 1] != 2) c.error("DFT input's last dim must be 1 (real) or 2 (complex)");
  if (len <= 0) c.error("dft_length must be positive");
  bool cplx = d[r - 1] == 2;
  DType dt = c.dtype(x);
  int64_t n = d[axis];
  V re = c.slice_axis(x, r - 1, 0, 1);
  std::optional<V> im;
  if (cplx) im = c.slice_axis(x, r - 1, 1, 2);
  auto mat = [&](int64_t k, bool sine, double scale, const std::vector<double>& w) {
    Tensor m(DType::f64, {k, n});
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = 0; b < n; ++b) {
        double v = 0;
        if (b < len) {
          double th = 2 * kPi * static_cast<double>((a * b) % len) / static_cast<double>(len);
          v = (sine ? std::sin(th) : std::cos(th)) * scale * (w.empty() ? 1.0 : w[static_cast<size_t>(b)]);
        }
        m.set(a * n + b, v);
      }
    return as_dtype(m, dt);
  };
  if (inverse && onesided) {
    // IRFFT: y_t = (1/len) sum_k w_k (Re X_k cos(2πkt/len) - Im X_k sin(2πkt/len)), w = 1 for DC and
    // Nyquist, 2 otherwise; bins beyond len/2 are ignored (Hermitian symmetry).
    Tensor cm(DType::f64, {len, n}), sm(DType::f64, {len, n});
    for (int64_t t = 0; t < len; ++t)
      for (int64_t k = 0; k < n; ++k) {
        double w = 0;
        if (k <= len / 2) w = (k == 0 || 2 * k == len) ? 1.0 : 2.0;
        double th = 2 * kPi * static_cast<double>((k * t) % len) / static_cast<double>(len);
        cm.set(t * n + k, w * std::cos(th) / static_cast<double>(len));
        sm.set(t * n + k, -w * std::sin(th) / static_cast<double>(len));
      }
    V y = apply_matrix(c, re, axis, as_dtype(cm, dt));
    if (im) y = c.bin(OpKind::Add, y, apply_matrix(c, *im, axis, as_dtype(sm, dt)));
    return y;
  }
  int64_t bins = onesided ? len / 2 + 1 : len;
  double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  double sgn = inverse ? 1.0 : -1.0;  // e^{sgn i θ}
  Tensor C = mat(bins, false, scale, {}), S = mat(bins, true, scale, {});
  // (R + iI)(cos θ + sgn i sin θ) = (R cos - sgn I sin) + i (I cos + sgn R sin)
  V yr = apply_matrix(c, re, axis, C);
  V yi = apply_matrix(c, re, axis, S);
  if (sgn < 0) yi = c.unary(OpKind::Neg, yi);
  if (im) {
    V is = apply_matrix(c, *im, axis, S);
    yr = sgn < 0 ? c.bin(OpKind::Add, yr, is) : c.bin(OpKind::Sub, yr, is);
    yi = c.bin(OpKind::Add, yi, apply_matrix(c, *im, axis, C));
  }
  return c.op1(OpKind::Concatenate, {yr, yi}, {{"axis", r - 1}});
}

void register_signal_ops(std::map<std::string, Converter>& r) {
  r["DFT"] = [](Ctx& c) {
    V x = c.in(0);
    int64_t rk = c.rank(x);
    bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
    int64_t axis;
    if (c.opset() >= 20) axis = c.has_input(2) ? c.ints_in(2, "axis").at(0) : -2;
    else axis = c.attr_i("axis", 1);
    if (axis < -rk || axis >= rk) c.error("axis out of range");
    if (axis < 0) axis += rk;
    auto d = c.static_shape(x, "input");
    int64_t len = c.has_input(1) ? c.ints_in(1, "dft_length").at(0) : (inverse && onesided ? 2 * (d[axis] - 1) : d[axis]);
    c.set_output(0, onnx_dft(c, x, axis, len, inverse, onesided));
  };
  r["STFT"] = [](Ctx& c) {
    V x = c.in(0);
    auto d = c.static_shape(x, "signal");
    if (d.size() != 3) c.error("signal must be [batch, length, 1|2]");
    int64_t step = c.ints_in(1, "frame_step").at(0);
    std::optional<V> win = c.opt_in(2);
    int64_t flen;
    if (c.has_input(3)) flen = c.ints_in(3, "frame_length").at(0);
    else if (win) flen = c.static_shape(*win, "window").at(0);
    else c.error("STFT needs a window or a frame_length");
    if (step <= 0 || flen <= 0 || flen > d[1]) c.error("bad frame_step/frame_length");
    int64_t frames = (d[1] - flen) / step + 1;
    Tensor idx(DType::i64, {frames, flen});
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < flen; ++k) idx.set_int(f * flen + k, f * step + k);
    V fr = c.op1(OpKind::Gather, {x, c.constant(idx)}, {{"axis", int64_t{1}}});  // [B, frames, flen, 1|2]
    if (win) fr = c.bin(OpKind::Mul, fr, c.reshape(c.convert(*win, c.dtype(x)), {1, 1, flen, 1}));
    bool onesided = c.attr_i("onesided", 1) != 0;
    c.set_output(0, onnx_dft(c, fr, 2, flen, false, onesided));
  };
  auto window = [](std::map<std::string, Converter>& m, const char* name, std::vector<double> a) {
    m[name] = [a](Ctx& c) {
      int64_t n = c.ints_in(0, "size").at(0);
      if (n < 0) c.error("negative window size");
      bool periodic = c.attr_i("periodic", 1) != 0;
      DType dt;
      int odt = static_cast<int>(c.attr_i("output_datatype", 1));
      if (!onnx_dtype(odt, &dt)) c.error("unsupported output_datatype " + onnx_dtype_name(odt));
      double nn = static_cast<double>(periodic ? n : n - 1);
      Tensor w(DType::f64, {n});
      for (int64_t i = 0; i < n; ++i) {
        double v = 0;
        for (size_t k = 0; k < a.size(); ++k)
          v += (k % 2 ? -a[k] : a[k]) * std::cos(2 * kPi * static_cast<double>(k) * static_cast<double>(i) / nn);
        w.set(i, v);
      }
      c.set_output(0, c.constant(as_dtype(w, dt)));
    };
  };
  window(r, "HannWindow", {0.5, 0.5});
  window(r, "HammingWindow", {25.0 / 46.0, 21.0 / 46.0});
  window(r, "BlackmanWindow", {0.42, 0.5, 0.08});
  r["MelWeightMatrix"] = [](Ctx& c) {
    int64_t mel = c.ints_in(0, "num_mel_bins").at(0), dlen = c.ints_in(1, "dft_length").at(0);
    int64_t rate = c.ints_in(2, "sample_rate").at(0);
    double lo = c.const_in(3, "lower_edge_hertz").get(0), hi = c.const_in(4, "upper_edge_hertz").get(0);
    DType dt;
    int odt = static_cast<int>(c.attr_i("output_datatype", 1));
    if (!onnx_dtype(odt, &dt)) c.error("unsupported output_datatype " + onnx_dtype_name(odt));
    if (mel <= 0 || dlen <= 0 || rate <= 0) c.error("bad MelWeightMatrix sizes");
    int64_t bins = dlen / 2 + 1;
    auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    auto to_hz = [](double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1.0); };
    double ml = to_mel(lo), mh = to_mel(hi), step = (mh - ml) / static_cast<double>(mel + 2);
    std::vector<int64_t> edge(static_cast<size_t>(mel + 2));
    for (int64_t i = 0; i < mel + 2; ++i) {
      double hz = to_hz(ml + step * static_cast<double>(i));
      edge[i] = static_cast<int64_t>(std::floor(static_cast<double>(dlen + 1) * hz / static_cast<double>(rate)));
    }
    Tensor w(DType::f64, {bins, mel});
    for (int64_t i = 0; i < bins * mel; ++i) w.set(i, 0.0);
    for (int64_t m = 0; m < mel; ++m) {
      int64_t l = edge[m], ce = edge[m + 1], h = edge[m + 2];
      if (ce == l) {
        if (ce >= 0 && ce < bins) w.set(ce * mel + m, 1.0);
      } else {
        for (int64_t j = l; j <= ce; ++j)
          if (j >= 0 && j < bins) w.set(j * mel + m, static_cast<double>(j - l) / static_cast<double>(ce - l));
      }
      for (int64_t j = ce; j < h; ++j)
        if (j >= 0 && j < bins) w.set(j * mel + m, static_cast<double>(h - j) / static_cast<double>(h - ce));
    }
    c.set_output(0, c.constant(as_dtype(w, dt)));
  };
}

}  // namespace rlx::onnx
