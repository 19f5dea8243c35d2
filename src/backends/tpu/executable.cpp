// The tpu device: the flat MIR graph emitted as StableHLO, compiled by the PJRT plugin, run on its
// first device. Constants are uploaded once; the resident API keeps every input as a PJRT device
// buffer between runs (feedback hands an output buffer to an input slot, no host round trip).
#include "runtime/backend.h"
#ifdef RLX_HAVE_PJRT
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "backends/graph_api/flat.h"
#include "backends/tpu/pjrt.h"
#include "backends/tpu/stablehlo.h"
#include "runtime/backend.h"

namespace rlx {
namespace pjrt {
namespace {

// A device buffer with its plugin's destructor.
using Buf = std::shared_ptr<PJRT_Buffer>;

class PjrtExecutable : public Executable {
 public:
  explicit PjrtExecutable(const LirProgram& p) : pl_(plugin()), f_(graph_api::flatten_lir(p, "tpu")) {
    std::string text = emit_stablehlo(f_);
    if (const char* d = std::getenv("RLX_PJRT_DUMP"); d && *d) std::ofstream(d) << text;
    // CompileOptionsProto{executable_build_options{num_replicas: 1, num_partitions: 1}}, hand-encoded
    // (field 3, length 4: field 4 = 1, field 5 = 1).
    static const char kOptions[] = {0x1a, 0x04, 0x20, 0x01, 0x28, 0x01};
    PJRT_Program prog{};
    prog.struct_size = PJRT_Program_STRUCT_SIZE;
    prog.code = text.data();
    prog.code_size = text.size();
    prog.format = "mlir";
    prog.format_size = 4;
    PJRT_Client_Compile_Args c{};
    c.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
    c.client = pl_.client;
    c.program = &prog;
    c.compile_options = kOptions;
    c.compile_options_size = sizeof kOptions;
    auto t0 = std::chrono::steady_clock::now();
    pl_.check(pl_.api->PJRT_Client_Compile(&c), "compile StableHLO (RLX_PJRT_DUMP=file writes the module)");
    compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    exe_ = c.executable;
    for (auto& k : f_.constants) consts_.push_back(upload(k.second));
  }
  ~PjrtExecutable() override {
    res_in_.clear();
    res_out_.clear();
    consts_.clear();
    if (exe_) {
      PJRT_LoadedExecutable_Destroy_Args d{};
      d.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
      d.executable = exe_;
      PJRT_Error* e = pl_.api->PJRT_LoadedExecutable_Destroy(&d);
      if (e) try { pl_.check(e, "destroy"); } catch (...) {}
    }
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == f_.inputs.size(), "[tpu] expected ", f_.inputs.size(), " inputs, got ", inputs.size());
    std::vector<Buf> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_input(i, inputs[i]);
      in.push_back(upload(inputs[i]));
    }
    auto out = execute(in);
    std::vector<Tensor> r;
    for (size_t i = 0; i < out.size(); ++i) r.push_back(download(out[i], f_.values[f_.outputs[i]]));
    return r;
  }
  std::string profile() const override {
    return "tpu: " + pl_.platform + " via " + pl_.path + ", StableHLO compile " + std::to_string(compile_ms_) + " ms";
  }

  void resident_feedback(const std::vector<std::pair<int, int>>& out_to_in) override { fb_ = out_to_in; }
  void resident_upload(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == f_.inputs.size(), "[tpu] resident_upload: expected ", f_.inputs.size(), " inputs");
    res_in_.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_input(i, inputs[i]);
      res_in_.push_back(upload(inputs[i]));
    }
    res_out_.clear();
  }
  void resident_write(int i, const Tensor& t) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(res_in_.size()), "[tpu] resident input ", i, " out of range (upload first)");
    check_input(i, t);
    res_in_[i] = upload(t);
  }
  double resident_run(int n) override {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < n; ++k) {
      res_out_ = execute(res_in_);
      for (auto& [o, i] : fb_) res_in_.at(i) = res_out_.at(o);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / std::max(n, 1);
  }
  Tensor resident_read_output(int i) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(res_out_.size()), "[tpu] resident output ", i, " not available (run first)");
    return download(res_out_[i], f_.values[f_.outputs[i]]);
  }
  Tensor resident_read_input(int i) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(res_in_.size()), "[tpu] resident input ", i, " out of range");
    return download(res_in_[i], f_.values[f_.inputs[i]]);
  }

 private:
  Buf wrap(PJRT_Buffer* b) {
    const Plugin* pl = &pl_;
    return Buf(b, [pl](PJRT_Buffer* x) { pl->destroy(x); });
  }
  Buf upload(const Tensor& t) {
    PJRT_Client_BufferFromHostBuffer_Args a{};
    a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    a.client = pl_.client;
    static const char kEmpty[8] = {};
    a.data = t.nbytes() ? t.raw() : kEmpty;
    a.type = buffer_type(t.dtype());
    a.dims = t.shape().data();
    a.num_dims = t.shape().size();
    a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
    a.device = pl_.device;
    pl_.check(pl_.api->PJRT_Client_BufferFromHostBuffer(&a), "upload");
    Buf b = wrap(a.buffer);
    pl_.await(a.done_with_host_buffer, "upload");
    return b;
  }
  Tensor download(const Buf& b, const ValueType& vt) {
    Tensor t(vt.dtype, static_dims(vt.shape));
    if (!t.nbytes()) return t;
    PJRT_Buffer_ToHostBuffer_Args a{};
    a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
    a.src = b.get();
    a.dst = t.raw();
    a.dst_size = t.nbytes();
    pl_.check(pl_.api->PJRT_Buffer_ToHostBuffer(&a), "download");
    pl_.await(a.event, "download");
    return t;
  }
  std::vector<Buf> execute(const std::vector<Buf>& in) {
    std::vector<PJRT_Buffer*> args;
    for (auto& b : in) args.push_back(b.get());
    for (auto& b : consts_) args.push_back(b.get());
    std::vector<PJRT_Buffer*> outs(f_.outputs.size(), nullptr);
    PJRT_Buffer* const* arg_list = args.data();
    PJRT_Buffer** out_list = outs.data();
    PJRT_Event* done = nullptr;
    PJRT_ExecuteOptions opt{};
    opt.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
    PJRT_LoadedExecutable_Execute_Args e{};
    e.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
    e.executable = exe_;
    e.options = &opt;
    e.argument_lists = &arg_list;
    e.num_devices = 1;
    e.num_args = args.size();
    e.output_lists = &out_list;
    e.device_complete_events = &done;
    pl_.check(pl_.api->PJRT_LoadedExecutable_Execute(&e), "execute");
    std::vector<Buf> r;
    for (auto* b : outs) r.push_back(wrap(b));
    pl_.await(done, "execute");
    return r;
  }
  void check_input(size_t i, const Tensor& t) const {
    const ValueType& vt = f_.values[f_.inputs[i]];
    RLX_CHECK(t.dtype() == vt.dtype && t.shape() == static_dims(vt.shape), "[tpu] input ", i, " is ",
              dtype_name(t.dtype()), shape_str(to_shape(t.shape())), ", the program takes ", dtype_name(vt.dtype),
              shape_str(vt.shape));
  }

  const Plugin& pl_;
  graph_api::FlatProgram f_;
  PJRT_LoadedExecutable* exe_ = nullptr;
  double compile_ms_ = 0;
  std::vector<Buf> consts_, res_in_, res_out_;
  std::vector<std::pair<int, int>> fb_;
};

}  // namespace
}  // namespace pjrt

std::unique_ptr<Executable> make_tpu_executable(const LirProgram& p) {
  return std::make_unique<pjrt::PjrtExecutable>(p);
}
#else
namespace rlx {
std::unique_ptr<Executable> make_tpu_executable(const LirProgram&) {
  fail("[tpu] compiled out: the PJRT C API header was not found when RLX was built");
}
#endif

}  // namespace rlx
