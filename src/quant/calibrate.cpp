// Activation clipping ranges (calibrate.h).
#include "quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rlx::quant {

namespace {

constexpr int kBins = 2048, kGrid = 40, kLevels = 255;

std::vector<double> histogram(const std::vector<float>& s, double lo, double hi, int bins) {
  std::vector<double> h(static_cast<size_t>(bins), 0.0);
  double w = (hi - lo) / bins;
  for (float v : s) {
    int i = w > 0 ? static_cast<int>((v - lo) / w) : 0;
    h[static_cast<size_t>(std::clamp(i, 0, bins - 1))] += 1;
  }
  return h;
}

// Bin index of value v on a histogram of `bins` bins.
int bin_of(double v, double lo, double w, int bins) { return std::clamp(static_cast<int>(std::floor((v - lo) / w)), 0, bins); }

double kl_divergence(const std::vector<double>& hist, double lo, double hi, double a, double b) {
  const int bins = static_cast<int>(hist.size());
  double w = (hi - lo) / bins;
  int i0 = bin_of(a, lo, w, bins), i1 = std::min(bin_of(b, lo, w, bins), bins);  // window [i0, i1)
  int n = i1 - i0;
  // A window of fewer bins than levels is copied exactly (KL 0): not a candidate.
  if (n < kLevels) return std::numeric_limits<double>::infinity();
  std::vector<double> p(hist.begin() + i0, hist.begin() + i1);
  for (int i = 0; i < i0; ++i) p.front() += hist[static_cast<size_t>(i)];
  for (int i = i1; i < bins; ++i) p.back() += hist[static_cast<size_t>(i)];
  double total = 0;
  for (double v : p) total += v;
  if (total <= 0) return std::numeric_limits<double>::infinity();
  // Q (as TensorRT's entropy calibration): the window's own histogram, without the clipped mass,
  // merged into kLevels levels and spread back over the bins where P is non-zero; so clipping
  // costs what it moves into the edge bins.
  std::vector<double> q(p.size(), 0.0);
  for (int l = 0; l < kLevels; ++l) {  // bins [l*n/255, (l+1)*n/255) form one level
    int s = l * n / kLevels, e = std::max((l + 1) * n / kLevels, s + 1);
    e = std::min(e, n);
    double mass = 0;
    int nz = 0;
    for (int i = s; i < e; ++i) mass += hist[static_cast<size_t>(i0 + i)], nz += p[static_cast<size_t>(i)] > 0;
    for (int i = s; i < e && nz > 0; ++i)
      if (p[static_cast<size_t>(i)] > 0) q[static_cast<size_t>(i)] = mass / nz;
  }
  double qtotal = 0;
  for (double v : q) qtotal += v;
  if (qtotal <= 0) return std::numeric_limits<double>::infinity();
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    double pi = p[i] / total, qi = q[i] > 0 ? q[i] / qtotal : 1e-12;  // clipped mass where Q has none
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

}  // namespace

bool known_calibration(const std::string& m) {
  return m == "minmax" || m == "percentile" || m == "mse" || m == "entropy";
}

double histogram_mse(const std::vector<double>& hist, double lo, double hi, double a, double b) {
  const double s = (b - a) / kLevels, w = (hi - lo) / static_cast<double>(hist.size());
  // The dequantized ends: a and b as the grid of scale s through the zero point reaches them.
  const double zp = std::clamp(std::nearbyint(-a / s), 0.0, 255.0), qa = -zp * s, qb = (255 - zp) * s;
  double e = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    if (hist[i] == 0) continue;
    double c = lo + (static_cast<double>(i) + 0.5) * w;
    double d = c < qa ? qa - c : c > qb ? c - qb : 0.0;
    e += hist[i] * (d > 0 ? d * d : s * s / 12);
  }
  return e;
}

ClipRange calibrate_range(std::vector<float>& samples, double lo, double hi, const std::string& method,
                          double percentile) {
  ClipRange r{lo, hi};
  if (method == "percentile" && samples.size() > 1) {
    std::sort(samples.begin(), samples.end());
    double q = (100.0 - percentile) / 200.0, n1 = static_cast<double>(samples.size() - 1);
    r.lo = samples[static_cast<size_t>(std::floor(q * n1))];
    r.hi = samples[static_cast<size_t>(std::ceil((1 - q) * n1))];
  } else if ((method == "mse" || method == "entropy") && samples.size() > 1 && hi > lo) {
    // mse: 2048 bins. entropy: ~32 samples per bin (256 to 2048 bins), since KL on a sparse histogram
    // sees no loss in any merge; with few samples it clips little.
    int bins = method == "mse" ? kBins : std::clamp(static_cast<int>(samples.size() / 32), 256, kBins);
    std::vector<double> h = histogram(samples, lo, hi, bins);
    double best = std::numeric_limits<double>::infinity();
    const double l0 = std::min(lo, 0.0), h0 = std::max(hi, 0.0);
    for (int i = 0; i < kGrid; ++i)
      for (int j = 0; j < kGrid; ++j) {
        // Fractions 1, 0.98, ... 0.22 of each end (an end at 0 stays at 0).
        double a = l0 * (1.0 - 0.02 * i), b = h0 * (1.0 - 0.02 * j);
        if (b - a < 1e-12) continue;
        double cost = method == "mse" ? histogram_mse(h, lo, hi, a, b) : kl_divergence(h, lo, hi, a, b);
        if (cost < best) best = cost, r.lo = a, r.hi = b;
      }
  }
  r.lo = std::min(r.lo, 0.0), r.hi = std::max(r.hi, 0.0);
  if (r.hi - r.lo < 1e-12) r.hi = r.lo + 1e-6;
  return r;
}

}  // namespace rlx::quant
