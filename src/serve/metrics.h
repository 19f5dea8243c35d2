// Prometheus metrics of `rlx serve`: counters, gauges and histograms keyed by a label string, written
// in the Prometheus text exposition format at /metrics. Thread-safe (one mutex; updates are rare
// next to a forward pass).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace rlx::serve {

class Metrics {
 public:
  Metrics();
  // labels: Prometheus label text without braces, e.g. `endpoint="/v1/embeddings",status="200"`.
  void add(const std::string& name, const std::string& labels, double v = 1);
  void set(const std::string& name, const std::string& labels, double v);
  void observe(const std::string& name, const std::string& labels, double v);
  std::string text() const;  // the exposition format, every family with # HELP and # TYPE
  double value(const std::string& name, const std::string& labels) const;  // counter or gauge, 0 if absent

 private:
  struct Family {
    std::string type, help;
    std::vector<double> bounds;  // histograms
  };
  struct Hist {
    std::vector<uint64_t> buckets;
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, std::map<std::string, double>> scalars_;
  std::map<std::string, std::map<std::string, Hist>> hists_;
  void family(const std::string& name, std::string type, std::string help, std::vector<double> bounds = {});
};

}  // namespace rlx::serve
