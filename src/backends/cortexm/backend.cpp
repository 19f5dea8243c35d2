// The cortexm device: its `rlx devices` entry (toolchain probed), capability set, and an executable
// that generates the firmware project (src/codegen/cortexm), builds it with arm-none-eabi-gcc and
// runs each call in qemu-system-arm with semihosting: the inputs go in as one record file, the
// outputs come back from the file the firmware writes. Everything runs emulated.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cortexm/cortexm_device.h"
#include "codegen/cortexm/cortexm.h"
#include "rlx/device.h"
#include "runtime/backend.h"
#include "runtime/subprocess.h"

namespace rlx {

namespace {

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Runs `cmd` (a shell line), its stdout+stderr to `log`; the exit status.
int run_logged(const std::string& cmd, const std::string& log) {
  int st = std::system((cmd + " >" + shell_quote(log) + " 2>&1").c_str());
  return st == -1 ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

std::string tail_of(const std::string& path, size_t n = 1500) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

class CortexmExecutable : public Executable {
 public:
  CortexmExecutable(const LirProgram& p, cortexm::Board b) : prog_(p), board_(b) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rlx-cortexm-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) fail("[cortexm] cannot create a build directory under ", tmpl);
    dir_ = buf.data();
    cortexm::write_project(cortexm::generate_project(p, b), dir_);
    if (run_logged("make -C " + shell_quote(dir_) + " model.elf", dir_ + "/build.log") != 0)
      fail("[cortexm] building the firmware failed (", dir_, "):\n", tail_of(dir_ + "/build.log"));
  }
  ~CortexmExecutable() override {
    if (!std::getenv("RLX_CORTEXM_KEEP")) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == prog_.inputs.size(), "[cortexm] expected ", prog_.inputs.size(), " inputs, got ", inputs.size());
    {
      std::ofstream f(dir_ + "/input.bin", std::ios::binary);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const LirBuffer& b = prog_.buffers[static_cast<size_t>(prog_.inputs[i])];
        RLX_CHECK(inputs[i].dtype() == b.type.dtype && inputs[i].numel() == numel(b.type.shape), "[cortexm] input ", i,
                  " does not match the compiled program");
        f.write(static_cast<const char*>(inputs[i].raw()), static_cast<std::streamsize>(inputs[i].nbytes()));
      }
      if (!f) fail("[cortexm] cannot write ", dir_, "/input.bin");
    }
    std::filesystem::remove(dir_ + "/output.bin");
    const char* t = std::getenv("RLX_CORTEXM_TIMEOUT");
    std::string cmd = "cd " + shell_quote(dir_) + " && timeout " + std::string(t && *t ? t : "300") + " make -s run";
    int rc = run_logged(cmd, dir_ + "/run.log");
    if (rc != 0) fail("[cortexm] the firmware failed in qemu-system-arm (exit ", rc, "; ", dir_, "):\n", tail_of(dir_ + "/run.log"));
    std::ifstream f(dir_ + "/output.bin", std::ios::binary);
    std::vector<Tensor> out;
    for (int id : prog_.outputs) {
      const LirBuffer& b = prog_.buffers[static_cast<size_t>(id)];
      Tensor o(b.type.dtype, static_dims(b.type.shape));
      f.read(static_cast<char*>(o.raw()), static_cast<std::streamsize>(o.nbytes()));
      if (!f) fail("[cortexm] the firmware wrote fewer output bytes than the program's outputs (", dir_, ")");
      out.push_back(std::move(o));
    }
    return out;
  }

 private:
  LirProgram prog_;
  cortexm::Board board_;
  std::string dir_;
};

}  // namespace

cortexm::Board cortexm_board_from_env() {
  const char* e = std::getenv("RLX_CORTEXM_BOARD");
  cortexm::Board b = cortexm::Board::M4;
  if (e && *e && !cortexm::parse_board(e, &b)) fail("[cortexm] RLX_CORTEXM_BOARD='", e, "': expected m4 or m55");
  return b;
}

DeviceInfo cortexm_device_info(bool probing) {
  using D = DType;
  CapabilitySet c;
  c.add(OpKind::QLinear, DTypeSet::of({D::i8, D::u8}));
  c.add(OpKind::QConv, DTypeSet::of({D::i8, D::u8}));         // rlx_qconv (im2col row + int8 dot)
  c.add(OpKind::ReduceWindow, DTypeSet::of({D::i8, D::u8}));  // rlx_pool8: max/min pooling
  c.add(OpKind::QuantizeAffine, DTypeSet::of({D::f32}));
  c.add(OpKind::DequantizeAffine, DTypeSet::of({D::i8, D::u8, D::i32}));
  for (auto k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min, OpKind::Neg})
    c.add(k, DTypeSet::of({D::f32}));
  for (auto k : {OpKind::Constant, OpKind::Reshape}) c.add(k, DTypeSet::of({D::f32, D::i8, D::u8, D::i32}));
  c.storage = DTypeSet::of({D::f32, D::i8, D::u8, D::i32});
  const char* what = "INT8 C firmware for Cortex-M4 (mps2-an386) / M55 + MVE (mps3-an547), run in qemu-system-arm";
  if (!probing) return DeviceInfo{"cortexm", what, DeviceStatus::Available, "not probed", c};
  std::string missing;
  for (const char* t : {"arm-none-eabi-gcc", "qemu-system-arm", "make"})
    if (find_on_path(t).empty()) missing += (missing.empty() ? "" : ", ") + std::string(t);
  if (!missing.empty())
    return DeviceInfo{"cortexm", what, DeviceStatus::NoDriver,
                      "not found on PATH: " + missing +
                          " (apt install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm make); "
                          "rlx compile --device cortexm --out DIR still writes the project",
                      c};
  return DeviceInfo{"cortexm", what, DeviceStatus::Available,
                    "emulated, not hardware: arm-none-eabi-gcc + qemu-system-arm semihosting; board from "
                    "RLX_CORTEXM_BOARD (m4|m55); instruction counts only under -icount",
                    c};
}

namespace {
class CortexmBackend : public Backend {
 public:
  std::string name() const override { return "cortexm"; }
  int rank() const override { return 14; }
  DeviceInfo info(bool probing) const override { return cortexm_device_info(probing); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override {
    return std::make_unique<CortexmExecutable>(p, cortexm_board_from_env());
  }
};
}  // namespace

}  // namespace rlx

RLX_REGISTER_BACKEND(cortexm, rlx::CortexmBackend)
