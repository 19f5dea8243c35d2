// The mlx device: the flat MIR graph lowered onto mlx::core ops, traced once by mlx::core::compile,
// run on MLX's default device (CPU in the Linux `mlx-cpu` wheel). Graph inputs and constants are the
// compiled function's arguments; the constants are converted once, and the resident API keeps every
// input as an mlx array between runs (feedback swaps arrays, no host copy).
#include <dlfcn.h>

#include <chrono>
#include <cstring>

#include "backends/graph_api/flat.h"
#include "backends/mlx/lower.h"
#include "runtime/backend.h"

namespace rlx {

#ifdef RLX_HAVE_MLX
namespace mlx_backend {
namespace {

mx::array to_array(const Tensor& t) {
  mx::Shape s(t.shape().begin(), t.shape().end());
  size_t n = t.nbytes();
  void* p = std::malloc(n ? n : 1);
  RLX_CHECK(p, "[mlx] out of host memory for ", n, " bytes");
  if (n) std::memcpy(p, t.raw(), n);
  return mx::array(p, s, to_mlx(t.dtype()), [](void* q) { std::free(q); });
}

void to_tensor(const mx::array& a, Tensor& t) {
  mx::array c = mx::contiguous(a);
  c.eval();
  RLX_CHECK(c.nbytes() == t.nbytes(), "[mlx] output of ", c.nbytes(), " bytes for a ", t.nbytes(), "-byte tensor");
  if (t.nbytes()) std::memcpy(t.raw(), c.data<uint8_t>(), t.nbytes());
}

class MlxExecutable : public Executable {
 public:
  explicit MlxExecutable(const LirProgram& p) : f_(graph_api::flatten_lir(p, "mlx")) {
    for (auto& c : f_.constants) consts_.push_back(to_array(c.second));
    auto flat = std::make_shared<graph_api::FlatProgram>(f_);
    fn_ = mx::compile([flat](const std::vector<mx::array>& a) { return lower_graph(*flat, a); });
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == f_.inputs.size(), "[mlx] expected ", f_.inputs.size(), " inputs, got ", inputs.size());
    std::vector<mx::array> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_input(i, inputs[i]);
      args.push_back(to_array(inputs[i]));
    }
    auto outs = call(args);
    std::vector<Tensor> r;
    for (size_t i = 0; i < outs.size(); ++i) {
      const ValueType& t = f_.values[f_.outputs[i]];
      r.emplace_back(t.dtype, static_dims(t.shape));
      to_tensor(outs[i], r.back());
    }
    return r;
  }

  void resident_feedback(const std::vector<std::pair<int, int>>& out_to_in) override { fb_ = out_to_in; }
  void resident_upload(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == f_.inputs.size(), "[mlx] resident_upload: expected ", f_.inputs.size(), " inputs");
    res_in_.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_input(i, inputs[i]);
      res_in_.push_back(to_array(inputs[i]));
    }
    res_out_.clear();
  }
  void resident_write(int i, const Tensor& t) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(res_in_.size()), "[mlx] resident input ", i, " out of range (upload first)");
    check_input(i, t);
    res_in_[i] = to_array(t);
  }
  double resident_run(int n) override {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < n; ++k) {
      res_out_ = call(res_in_);
      for (auto& [o, i] : fb_) res_in_.at(i) = res_out_.at(o);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / std::max(n, 1);
  }
  Tensor resident_read_output(int i) override { return read(res_out_, f_.outputs, i); }
  Tensor resident_read_input(int i) override { return read(res_in_, f_.inputs, i); }

 private:
  std::vector<mx::array> call(const std::vector<mx::array>& in) {
    std::vector<mx::array> args = in;
    args.insert(args.end(), consts_.begin(), consts_.end());
    auto outs = fn_(args);
    mx::eval(outs);
    return outs;
  }
  void check_input(size_t i, const Tensor& t) const {
    const ValueType& vt = f_.values[f_.inputs[i]];
    RLX_CHECK(t.dtype() == vt.dtype && t.shape() == static_dims(vt.shape), "[mlx] input ", i, " is ",
              dtype_name(t.dtype()), shape_str(to_shape(t.shape())), ", the program takes ", dtype_name(vt.dtype),
              shape_str(vt.shape));
  }
  Tensor read(const std::vector<mx::array>& v, const std::vector<int>& ids, int i) const {
    RLX_CHECK(i >= 0 && i < static_cast<int>(v.size()), "[mlx] resident tensor ", i, " out of range (run first)");
    const ValueType& t = f_.values[ids[i]];
    Tensor r(t.dtype, static_dims(t.shape));
    to_tensor(v[i], r);
    return r;
  }

  graph_api::FlatProgram f_;
  std::vector<mx::array> consts_;
  std::function<std::vector<mx::array>(const std::vector<mx::array>&)> fn_;
  std::vector<mx::array> res_in_, res_out_;
  std::vector<std::pair<int, int>> fb_;
};

}  // namespace
}  // namespace mlx_backend

// 0 when MLX runs here; `why` names the library, its version and device.
int mlx_probe(std::string* why) {
  try {
    auto d = mlx::core::default_device();
    mlx::core::array a = mlx::core::add(mlx::core::array(1.0f), mlx::core::array(2.0f));
    a.eval();
    if (a.item<float>() != 3.0f) {
      *why = "MLX " + std::string(mlx::core::version()) + " computed 1+2 wrong";
      return 2;
    }
    // The wheel bundles a reference BLAS; which library its cblas_sgemm binds to in this process
    // (an OpenBLAS loaded before libmlx interposes it) decides its CPU matmul speed.
    std::string blas = "unresolved";
    Dl_info info;
    if (void* f = ::dlsym(RTLD_DEFAULT, "cblas_sgemm"); f && ::dladdr(f, &info) && info.dli_fname) {
      blas = info.dli_fname;
      blas = blas.substr(blas.rfind('/') + 1);
    }
    *why = "MLX " + std::string(mlx::core::version()) + " (libmlx.so, linked), device " +
           (d.type == mlx::core::Device::cpu ? "cpu" : "gpu") + "; CPU matmul through cblas_sgemm of " + blas +
           (blas.find("openblas") == std::string::npos ? " (the wheel's reference BLAS: slow)" : "");
    return 0;
  } catch (const std::exception& e) {
    *why = std::string("MLX failed to run: ") + e.what();
    return 2;
  }
}

std::unique_ptr<Executable> make_mlx_executable(const LirProgram& p) {
  return std::make_unique<mlx_backend::MlxExecutable>(p);
}
#else
int mlx_probe(std::string* why) {
  *why = "compiled out: MLX was not found at configure time (pip mlx-cpu; find_package(MLX CONFIG))";
  return 1;
}
std::unique_ptr<Executable> make_mlx_executable(const LirProgram&) {
  fail("[mlx] compiled out: MLX was not found at configure time");
}
#endif

}  // namespace rlx
