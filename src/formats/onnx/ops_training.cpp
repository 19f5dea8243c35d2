// ONNX training ops: the ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum)
// composed from elementwise ops, and the training modes of BatchNormalization (batch statistics,
// running-stat update) and Dropout (seeded masks drawn at import, see below).
// The learning rate R and step count T are ordinary run-time inputs.
#include <cmath>
#include <random>

#include "formats/onnx/importer.h"

namespace rlx::onnx {

namespace {

V sc(Ctx& c, double v, V like) { return c.scalar(v, c.dtype(like)); }

// The run-time scalar `x` (R or T) as a rank-0 value of dtype `dt`.
V scalar_as(Ctx& c, V x, DType dt) {
  if (c.rank(x) > 0) x = c.reshape(x, {});
  return c.convert(x, dt);
}
V scalar_as(Ctx& c, V x, V like) { return scalar_as(c, x, c.dtype(like)); }

// Optimizer inputs: R, T, then `groups` lists of n tensors each (X, G, V, H...).
int64_t tensors_per_group(Ctx& c, int groups) {
  int64_t k = c.num_inputs() - 2;
  if (k <= 0 || k % groups) c.error("expected R, T and " + std::to_string(groups) + " equally long lists of tensors");
  return k / groups;
}

}  // namespace

void register_training_ops(std::map<std::string, Converter>& r) {
  r["Adagrad"] = [](Ctx& c) {
    int64_t n = tensors_per_group(c, 3);
    double decay = c.attr_f("decay_factor", 0.0), eps = c.attr_f("epsilon", 1e-6), norm = c.attr_f("norm_coefficient", 0.0);
    for (int64_t i = 0; i < n; ++i) {
      V x = c.in(static_cast<int>(2 + i)), g = c.in(static_cast<int>(2 + n + i)), h = c.in(static_cast<int>(2 + 2 * n + i));
      // r' = R / (1 + T * decay), computed in f64 and then brought to X's dtype.
      V t = scalar_as(c, c.in(1), DType::f64);
      V rr = c.bin(OpKind::Div, scalar_as(c, c.in(0), t), c.bin(OpKind::Add, c.scalar(1, DType::f64), c.bin(OpKind::Mul, t, c.scalar(decay, DType::f64))));
      rr = c.convert(rr, c.dtype(x));
      V gr = c.bin(OpKind::Add, c.bin(OpKind::Mul, sc(c, norm, x), x), g);
      V hn = c.bin(OpKind::Add, h, c.bin(OpKind::Mul, gr, gr));
      V hs = c.bin(OpKind::Add, c.unary(OpKind::Sqrt, hn), sc(c, eps, hn));
      V xn = c.bin(OpKind::Sub, x, c.bin(OpKind::Div, c.bin(OpKind::Mul, rr, gr), hs));
      c.set_output(static_cast<int>(i), xn);
      c.set_output(static_cast<int>(n + i), hn);
    }
  };
  r["Momentum"] = [](Ctx& c) {
    int64_t n = tensors_per_group(c, 3);
    if (!c.has_attr("alpha") || !c.has_attr("beta") || !c.has_attr("mode") || !c.has_attr("norm_coefficient"))
      c.error("attributes alpha, beta, mode and norm_coefficient are required");
    double alpha = c.attr_f("alpha", 0), beta = c.attr_f("beta", 0), norm = c.attr_f("norm_coefficient", 0);
    std::string mode = c.attr_s("mode", "standard");
    if (mode != "standard" && mode != "nesterov") c.error("unknown mode '" + mode + "'");
    for (int64_t i = 0; i < n; ++i) {
      V x = c.in(static_cast<int>(2 + i)), g = c.in(static_cast<int>(2 + n + i)), v = c.in(static_cast<int>(2 + 2 * n + i));
      V rr = scalar_as(c, c.in(0), x);
      // beta is replaced by 1 on the first step (T == 0).
      V later = c.bin(OpKind::Gt, scalar_as(c, c.in(1), DType::i64), c.scalar(0, DType::i64));
      V badj = c.select(later, sc(c, beta, x), sc(c, 1, x));
      V gr = c.bin(OpKind::Add, c.bin(OpKind::Mul, sc(c, norm, x), x), g);
      V vn = c.bin(OpKind::Add, c.bin(OpKind::Mul, sc(c, alpha, v), v), c.bin(OpKind::Mul, badj, gr));
      V step = mode == "standard" ? vn : c.bin(OpKind::Add, gr, c.bin(OpKind::Mul, sc(c, alpha, vn), vn));
      c.set_output(static_cast<int>(i), c.bin(OpKind::Sub, x, c.bin(OpKind::Mul, rr, step)));
      c.set_output(static_cast<int>(n + i), vn);
    }
  };
  r["Adam"] = [](Ctx& c) {
    int64_t n = tensors_per_group(c, 4);
    double alpha = c.attr_f("alpha", 0.9), beta = c.attr_f("beta", 0.999), eps = c.attr_f("epsilon", 1e-6);
    double norm = c.attr_f("norm_coefficient", 0.0), post = c.attr_f("norm_coefficient_post", 0.0);
    for (int64_t i = 0; i < n; ++i) {
      V x = c.in(static_cast<int>(2 + i)), g = c.in(static_cast<int>(2 + n + i));
      V v = c.in(static_cast<int>(2 + 2 * n + i)), h = c.in(static_cast<int>(2 + 3 * n + i));
      V gr = c.bin(OpKind::Add, c.bin(OpKind::Mul, sc(c, norm, x), x), g);
      V vn = c.bin(OpKind::Add, c.bin(OpKind::Mul, sc(c, alpha, v), v), c.bin(OpKind::Mul, sc(c, 1 - alpha, gr), gr));
      V hn = c.bin(OpKind::Add, c.bin(OpKind::Mul, sc(c, beta, h), h),
                   c.bin(OpKind::Mul, sc(c, 1 - beta, gr), c.bin(OpKind::Mul, gr, gr)));
      V hs = c.bin(OpKind::Add, c.unary(OpKind::Sqrt, hn), sc(c, eps, hn));
      // Bias correction R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R (in f64).
      V t = scalar_as(c, c.in(1), DType::f64);
      V r64 = scalar_as(c, c.in(0), t);
      V one = c.scalar(1, DType::f64);
      V bt = c.bin(OpKind::Pow, c.scalar(beta, DType::f64), t), at = c.bin(OpKind::Pow, c.scalar(alpha, DType::f64), t);
      V corr = c.bin(OpKind::Div, c.bin(OpKind::Mul, r64, c.unary(OpKind::Sqrt, c.bin(OpKind::Sub, one, bt))),
                     c.bin(OpKind::Sub, one, at));
      V radj = c.select(c.bin(OpKind::Gt, t, c.scalar(0, DType::f64)), corr, r64);
      radj = c.convert(radj, c.dtype(x));
      V xn = c.bin(OpKind::Sub, x, c.bin(OpKind::Mul, radj, c.bin(OpKind::Div, vn, hs)));
      if (post != 0) xn = c.bin(OpKind::Mul, sc(c, 1 - post, xn), xn);
      c.set_output(static_cast<int>(i), xn);
      c.set_output(static_cast<int>(n + i), vn);
      c.set_output(static_cast<int>(2 * n + i), hn);
    }
  };

  // Training-mode BatchNormalization: normalize with the batch statistics (population variance) and
  // return the updated running statistics; inference mode goes to the existing converter.
  if (r.count("BatchNormalization")) {
    Converter infer = r["BatchNormalization"];
    r["BatchNormalization"] = [infer](Ctx& c) {
      bool training = c.attr_i("training_mode", 0) != 0 || (c.opset() < 14 && c.num_outputs() > 1);
      if (!training) return infer(c);
      if (c.opset() < 14) c.error("training mode before opset 14 (saved mean/var outputs) is unsupported");
      V x = c.in(0);
      int64_t rk = c.rank(x);
      if (rk < 2) c.error("input rank must be at least 2");
      std::vector<int64_t> axes{0};
      for (int64_t i = 2; i < rk; ++i) axes.push_back(i);
      std::vector<int64_t> pc(static_cast<size_t>(rk), 1);
      pc[1] = c.static_shape(x, "input")[1];
      auto chan = [&](V p) { return c.reshape(p, pc); };
      double eps = c.attr_f("epsilon", 1e-5), mom = c.attr_f("momentum", 0.9);
      V mean = c.reduce(OpKind::ReduceMean, x, axes, true);
      V xc = c.bin(OpKind::Sub, x, mean);
      V var = c.reduce(OpKind::ReduceMean, c.bin(OpKind::Mul, xc, xc), axes, true);
      V inv = c.unary(OpKind::Rsqrt, c.bin(OpKind::Add, var, sc(c, eps, var)));
      V y = c.bin(OpKind::Add, c.bin(OpKind::Mul, c.bin(OpKind::Mul, xc, inv), chan(c.in(1))), chan(c.in(2)));
      c.set_output(0, y);
      V m1 = c.reshape(mean, {pc[1]}), v1 = c.reshape(var, {pc[1]});
      V rm = c.in(3), rv = c.in(4);
      if (c.wants_output(1))
        c.set_output(1, c.bin(OpKind::Add, c.bin(OpKind::Mul, rm, sc(c, mom, rm)), c.bin(OpKind::Mul, c.convert(m1, c.dtype(rm)), sc(c, 1 - mom, rm))));
      if (c.wants_output(2))
        c.set_output(2, c.bin(OpKind::Add, c.bin(OpKind::Mul, rv, sc(c, mom, rv)), c.bin(OpKind::Mul, c.convert(v1, c.dtype(rv)), sc(c, 1 - mom, rv))));
    };
  }

  // Training-mode Dropout. Ratio 0 keeps every element. Otherwise the mask needs the `seed`
  // attribute: it is drawn at import from MT19937 seeded with it, taking uniform doubles the way NumPy's
  // legacy RandomState does (two 32-bit draws -> 53 bits), so it matches the ONNX reference's mask
  // (np.random.seed(seed); uniform(0, 1, shape) >= ratio). Without a seed the mask would have to
  // change from run to run, which a mask fixed at import cannot do: that case stays unsupported.
  if (r.count("Dropout")) {
    Converter infer = r["Dropout"];
    r["Dropout"] = [infer](Ctx& c) {
      if (!c.has_input(2) || c.const_in(2, "training_mode").get(0) == 0) return infer(c);
      double ratio = c.has_input(1) ? c.const_in(1, "ratio").get(0) : 0.5;
      V x = c.in(0);
      if (ratio == 0) {
        c.set_output(0, x);
        if (c.wants_output(1)) c.set_output(1, c.broadcast_to(c.scalar(1, DType::boolean), c.shape(x)));
        return;
      }
      if (!c.has_attr("seed")) c.error("training_mode=true without a seed is unsupported (the mask is fixed at import)");
      if (ratio < 0 || ratio >= 1) c.error("ratio must be in [0, 1)");
      auto d = c.static_shape(x, "input");
      Tensor mask(DType::boolean, d);
      std::mt19937 gen(static_cast<uint32_t>(c.attr_i("seed", 0)));
      for (int64_t i = 0; i < mask.numel(); ++i) {
        uint32_t a = gen() >> 5, b = gen() >> 6;
        double u = (a * 67108864.0 + b) / 9007199254740992.0;
        mask.set_int(i, u >= ratio);
      }
      V m = c.constant(mask);
      V scale = c.scalar(1.0 / (1.0 - ratio), c.dtype(x));
      c.set_output(0, c.bin(OpKind::Mul, c.bin(OpKind::Mul, x, c.convert(m, c.dtype(x))), scale));
      if (c.wants_output(1)) c.set_output(1, m);
    };
  }
}

}  // namespace rlx::onnx
