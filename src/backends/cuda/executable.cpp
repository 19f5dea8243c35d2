// The cuda executable. At compile time: one arena allocation for every planned LIR buffer,
// constants uploaded once, every generated/library kernel rendered and compiled (NVRTC, cached),
// cuBLASLt plans chosen. A run copies inputs through pinned staging, launches the schedule on one
// stream (replaying a CUDA graph captured on the second run), and synchronizes only for outputs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/fuse_lir.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/memory.h"
#include "backends/cuda/render.h"
#include "backends/cuda/solver.h"
#include "backends/cuda/splat.h"
#include "lir/plan.h"

namespace rlx::cuda {

namespace {

constexpr size_t kWorkspace = 32u << 20;

struct Step {
  enum Kind { Launch, Gemm, Copy, Solver, Splat } kind = Launch;
  std::string label;
  // Launch
  CUfunction fn = nullptr;
  unsigned grid = 1, grid_y = 1, block = 256, smem = 0;
  std::vector<CUdeviceptr> args;
  // Gemm: args = {A, B, bias or 0, C}
  std::unique_ptr<GemmPlan> gemm;
  // Copy: args = {src, dst}
  size_t bytes = 0;
  // Solver: cuSOLVER calls between its pre/post launches (solver.h)
  std::unique_ptr<SolverPlan> solver;
  std::unique_ptr<SplatPlan> splat;  // Splat: the kernels of one splat op (splat.h)
  // The LIR kernels this step runs (several for a merged launch); `concurrent`: a merged launch
  // whose parts run at the same time (no order between them).
  std::vector<int> kernels;
  bool concurrent = false;
  bool reordered = false;  // a row launch (no in-place feedback into its kernels, conservatively)
  // a persistent launch: per LIR kernel, its phase (parts between two grid
  // barriers), -1 for kernels it does not run.
  std::vector<int> phase;
  bool cooperative = false;               // launched with cuLaunchCooperativeKernel (all blocks co-resident or an error)
  CUdeviceptr stamps = 0;                 // RLX_PROFILE: block 0's clock64() per phase boundary
  std::vector<std::string> phase_labels;  // ... and what each phase runs
};

// Blocks of a persistent launch per multiprocessor (RLX_CUDA_GRID_PER_SM, 1 or
// 2) and in all: every one must be resident at once (build_grid checks the occupancy).
int grid_per_sm() {
  const char* e = std::getenv("RLX_CUDA_GRID_PER_SM");
  return e ? std::max(1, std::min(2, std::atoi(e))) : 1;
}
int64_t grid_blocks(int64_t sm_count) { return std::max<int64_t>(1, sm_count) * grid_per_sm(); }

class CudaExecutable : public Executable {
 public:
  explicit CudaExecutable(const LirProgram& p) : p_(p) {
    Api& a = api();
    for (auto& [pass, n] : p_.passes) {  // the schedule's passes (make_executable ran them)
      if (pass == "fold-attention-transposes") folded_ = n;
      if (pass == "residual-into-norm") folded_adds_ = n;
      if (pass == "batch-sibling-linears") batched_ = n;
      if (pass == "bias-into-gemm") gemm_bias_ = n;
    }
    check(a.cuStreamCreate(&stream_, 1 /* non-blocking */), "cuStreamCreate");
    profile_ = env_on("RLX_PROFILE", false);
    graphs_ = env_on("RLX_CUDA_GRAPHS", true);
    arena_ = DeviceBlock(static_cast<size_t>(std::max<int64_t>(p_.arena_bytes, 256)));
    ptr_.assign(p_.buffers.size(), 0);
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      size_t bytes = static_cast<size_t>(lb.bytes());
      switch (lb.kind) {
        case BufferKind::Arena: ptr_[b] = arena_.ptr + static_cast<CUdeviceptr>(lb.offset); break;
        case BufferKind::Input:
        case BufferKind::Output:
          owned_.emplace_back(bytes);
          ptr_[b] = owned_.back().ptr;
          staging_[b] = PinnedBlock(bytes);
          break;
        case BufferKind::Const:
          owned_.emplace_back(bytes);
          ptr_[b] = owned_.back().ptr;
          if (bytes) check(a.cuMemcpyHtoDAsync(ptr_[b], lb.value.raw(), bytes, stream_), "upload constant");
          break;
        case BufferKind::View: break;
      }
    }
    for (auto& k : p_.kernels) {  // batched sibling linears write their outputs to one block
      if (!k.attrs.count("cuda_siblings")) continue;
      size_t bytes = static_cast<size_t>(p_.buffers[k.out[0]].bytes());
      owned_.emplace_back(bytes * k.out.size());
      for (size_t i = 0; i < k.out.size(); ++i) ptr_[k.out[i]] = owned_.back().ptr + static_cast<CUdeviceptr>(i * bytes);
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b)  // views after their bases
      if (p_.buffers[b].kind == BufferKind::View) ptr_[b] = ptr_[p_.buffers[b].view_of];
    build_all();
    check(a.cuStreamSynchronize(stream_), "upload");
    if (env_on("RLX_CUDA_GEMM_AUTOTUNE", true)) autotune_gemms();
  }

  ~CudaExecutable() override {
    Api& a = api();
    for (auto& [b, e] : write_ev_) a.cuEventDestroy(e);
    if (exec_) a.cuGraphExecDestroy(exec_);
    if (graph_) a.cuGraphDestroy(graph_);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    upload(inputs);
    launch_schedule();
    return download();
  }

  // Each run synchronized and timed on the host clock (the inputs stay as resident_upload left them).
  std::vector<double> resident_time_each(int warmup, int iters) override {
    Api& a = api();
    check(a.cuStreamSynchronize(stream_), "sync");
    for (int i = 0; i < warmup; ++i) {
      launch_schedule();
      check(a.cuStreamSynchronize(stream_), "sync");
    }
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      launch_schedule();
      check(a.cuStreamSynchronize(stream_), "sync");
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return ms;
  }

  // After every run of the schedule, output out_to_in[i].first is copied (device to device, inside
  // the CUDA graph) into input out_to_in[i].second, so a training step's new parameters become the
  // next step's inputs without leaving the GPU. When the elementwise kernel producing the output is
  // the input's last reader, it writes into the input directly (no copy).
  void resident_feedback(const std::vector<std::pair<int, int>>& out_to_in) override {
    RLX_CHECK(!exec_, "[cuda] resident_feedback after the CUDA graph was captured");
    for (auto [o, i] : out_to_in) {
      fb_targets_.insert(i);
      RLX_CHECK(o >= 0 && o < static_cast<int>(p_.outputs.size()) && i >= 0 && i < static_cast<int>(p_.inputs.size()),
                "[cuda] feedback pair out of range");
      int ob = p_.outputs[o], ib = p_.inputs[i];
      RLX_CHECK(p_.buffers[ob].bytes() == p_.buffers[ib].bytes() && p_.buffers[ob].type.dtype == p_.buffers[ib].type.dtype,
                "[cuda] feedback output ", o, " and input ", i, " differ in size or dtype");
      if (env_on("RLX_CUDA_INPLACE_FEEDBACK", true) && write_in_place(ob, ib)) {
        ++in_place_;
        continue;
      }
      Step s;
      s.kind = Step::Copy;
      s.args = {ptr_[ob], ptr_[ib]};
      s.bytes = static_cast<size_t>(p_.buffers[ob].bytes());
      s.label = "feedback copy";
      steps_.push_back(std::move(s));
    }
  }

  // The elementwise kernel producing output `ob` writes straight into input `ib` when it is the
  // last kernel to read `ib` and reads it at the index it writes (same shape): a parameter update
  // p' = p - lr*g done in place, no copy. Every step's pointer to `ob` is redirected.
  bool write_in_place(int ob, int ib) {
    const LirBuffer &o = p_.buffers[ob], &i = p_.buffers[ib];
    if (o.kind != BufferKind::Output || i.kind != BufferKind::Input || static_dims(o.type.shape) != static_dims(i.type.shape))
      return false;
    for (const LirBuffer& b : p_.buffers)
      if (b.kind == BufferKind::View && (b.view_of == ob || b.view_of == ib)) return false;
    int prod = -1, last_read = -1;
    for (int k = 0; k < static_cast<int>(p_.kernels.size()); ++k) {
      const LirKernel& lk = p_.kernels[k];
      for (int b : lk.out)
        if (b == ob) prod = k;
      for (int b : lk.in)
        if (b == ib) last_read = k;
    }
    if (prod < 0 || last_read > prod) return false;
    const LirKernel& pk = p_.kernels[prod];
    bool elementwise = pk.kind == KernelKind::Generated || (pk.kind == KernelKind::Library && is_elementwise(pk.op));
    if (!elementwise || pk.out.size() != 1) return false;
    for (auto& st : steps_)  // the schedule order no longer holds around a row split
      if (st.reordered && std::find(st.kernels.begin(), st.kernels.end(), prod) != st.kernels.end()) return false;
    for (auto& st : steps_)  // a persistent launch: no other part of the phase may read it
      if (!st.phase.empty() && st.phase[prod] >= 0)
        for (int k : st.kernels)
          if (k != prod && st.phase[k] == st.phase[prod] &&
              std::find(p_.kernels[k].in.begin(), p_.kernels[k].in.end(), ib) != p_.kernels[k].in.end())
            return false;
    for (auto& st : steps_)  // a concurrent merged launch: no other part may read the input
      if (st.concurrent && std::find(st.kernels.begin(), st.kernels.end(), prod) != st.kernels.end())
        for (int k : st.kernels)
          if (k != prod && std::find(p_.kernels[k].in.begin(), p_.kernels[k].in.end(), ib) != p_.kernels[k].in.end())
            return false;
    CUdeviceptr from = ptr_[ob], to = ptr_[ib];
    for (auto& st : steps_)
      for (auto& a : st.args)
        if (a == from) a = to;
    ptr_[ob] = to;
    return true;
  }

  // Runs the schedule `n` times back to back with no host synchronization in between; returns the
  // milliseconds per run (CUDA events around the whole batch).
  double resident_time(int n) override {
    Api& a = api();
    CUevent e0, e1;
    check(a.cuEventCreate(&e0, 0), "event"), check(a.cuEventCreate(&e1, 0), "event");
    check(a.cuEventRecord(e0, stream_), "event");
    for (int i = 0; i < n; ++i) launch_schedule();
    check(a.cuEventRecord(e1, stream_), "event");
    check(a.cuEventSynchronize(e1), "resident_time");
    float ms = 0;
    check(a.cuEventElapsedTime(&ms, e0, e1), "event time");
    a.cuEventDestroy(e0), a.cuEventDestroy(e1);
    return n > 0 ? ms / n : 0.0;
  }

  // The device-neutral resident API (runtime/backend.h) that train::Trainer drives: the
  // parameters and optimizer state stay on the GPU (feedback inside the CUDA graph), a step writes
  // only its data and scalars (one async H2D copy each; a small input whose bytes did not change is
  // not copied again) and reads back only what the caller asks for.
  void resident_upload(const std::vector<Tensor>& inputs) override {
    upload(inputs);
    check(api().cuStreamSynchronize(stream_), "upload");
    last_small_.clear();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].nbytes() <= kSmallWrite)
        last_small_[static_cast<int>(i)] = std::string(static_cast<const char*>(inputs[i].raw()), inputs[i].nbytes());
  }
  void resident_write(int i, const Tensor& t) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(p_.inputs.size()), "[cuda] resident_write: input ", i, " out of range");
    int b = p_.inputs[i];
    size_t bytes = static_cast<size_t>(p_.buffers[b].bytes());
    RLX_CHECK(t.nbytes() == bytes && t.dtype() == p_.buffers[b].type.dtype, "[cuda] resident_write: input ", i,
              " expects ", bytes, " bytes of ", dtype_name(p_.buffers[b].type.dtype));
    if (!bytes) return;
    if (bytes <= kSmallWrite && !fb_targets_.count(i)) {  // a fed-back input changes on the device
      const char* now = static_cast<const char*>(t.raw());
      std::string& last = last_small_[i];  // compared in place: no string built on the per-step path
      if (last.size() == bytes && std::memcmp(last.data(), now, bytes) == 0) return;
      last.assign(now, bytes);
    }
    Api& a = api();
    auto ev = write_ev_.find(b);
    if (ev == write_ev_.end()) {
      CUevent e;
      check(a.cuEventCreate(&e, 2 /* CU_EVENT_DISABLE_TIMING */), "event");
      ev = write_ev_.emplace(b, e).first;
    } else {
      check(a.cuEventSynchronize(ev->second), "resident_write");  // the last copy out of the staging block is done
    }
    PinnedBlock& pin = staging_.at(b);
    std::memcpy(pin.ptr, t.raw(), bytes);
    check(a.cuMemcpyHtoDAsync(ptr_[b], pin.ptr, bytes, stream_), "resident_write");
    check(a.cuEventRecord(ev->second, stream_), "event");
  }
  // Queues n runs and returns at once (no host synchronization; 0 is returned: time with
  // resident_time, which synchronizes).
  double resident_run(int n) override {
    for (int i = 0; i < n; ++i) launch_schedule();
    return 0.0;
  }
  Tensor resident_read_output(int i) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(p_.outputs.size()), "[cuda] resident_read_output: ", i, " out of range");
    return read_buffer(p_.outputs[i]);
  }
  Tensor resident_read_input(int i) override {
    RLX_CHECK(i >= 0 && i < static_cast<int>(p_.inputs.size()), "[cuda] resident_read_input: ", i, " out of range");
    return read_buffer(p_.inputs[i]);
  }
  Tensor read_buffer(int b) { return read_buffers({b})[0]; }

  // "N steps (G cuBLASLt GEMMs, L NVRTC kernel launches, ...), CUDA graph captured, arena X KiB".
  std::string summary() const override {
    int gemms = 0, launches = 0, copies = 0, compiled = compiled_, disk_hits = disk_hits_;
    for (auto& s : steps_) (s.kind == Step::Gemm ? gemms : s.kind == Step::Launch ? launches : copies)++;
    for (auto& s : steps_)  // GEMM plans' own kernels and epilogue kernels (compiled when first used)
      if (s.kind == Step::Gemm) compiled += s.gemm->compiled(), disk_hits += s.gemm->disk_hits();
    std::ostringstream os;
    os << steps_.size() << " steps (" << gemms << " cuBLASLt GEMMs, " << launches << " NVRTC kernel launches, " << copies
       << " copies; " << folded_ << " transposes folded into attention, " << folded_adds_ << " residual adds into norms, " << batched_ << " sibling-linear groups batched, " << gemm_bias_ << " bias adds into GEMM epilogues, " << in_place_ << " feedbacks written in place, " << merged_ << " kernels merged into " << merged_launches_ << " launches, " << tuned_ << " GEMMs autotuned off the heuristic's first choice; " << compiled << " kernels compiled, " << disk_hits << " from the disk cache), CUDA graph "
       << (graphs_ ? (exec_ ? "captured" : "pending") : "off") << ", arena " << (p_.arena_bytes >> 10) << " KiB";
    for (auto& s : steps_)
      if (!s.phase.empty()) os << ", persistent launch " << (s.cooperative ? "cooperative" : "plain (no cooperative launch here)");
    if (!graph_coop_) os << " (captured as a plain launch: this driver cannot capture a cooperative one)";
    if (!grid_refused_.empty()) os << ", persistent launch refused: " << grid_refused_;
    return os.str();
  }

  std::string profile() const override {
    if (!profile_) return "";
    std::ostringstream os;
    os << "profile (cuda, eager runs, CUDA events between back-to-back launches, cumulative):\n";
    if (!grid_refused_.empty()) os << "  (persistent launch refused: " << grid_refused_ << ")\n";
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [k, v] : times_) rows.push_back({v.first, k});
    std::sort(rows.rbegin(), rows.rend());
    char buf[320];
    for (auto& [ms, k] : rows) {
      std::snprintf(buf, sizeof buf, "  %10.1f us  %6d calls  %s\n", ms * 1000, times_.at(k).second, k.c_str());
      os << buf;
    }
    return os.str();
  }

 private:
  std::vector<ValueType> types(const std::vector<int>& ids) const {
    std::vector<ValueType> t;
    for (int b : ids) t.push_back(p_.buffers[b].type);
    return t;
  }

  void add_launch(const KernelSource& ks, std::vector<CUdeviceptr> args, const std::string& label) {
    Step s;
    s.kind = Step::Launch;
    bool hit = false;
    s.fn = load_function(ks, &hit);
    ++compiled_;
    disk_hits_ += hit;
    s.grid = ks.grid, s.grid_y = ks.grid_y, s.block = ks.block, s.smem = ks.smem;
    s.args = std::move(args);
    s.label = label;
    steps_.push_back(std::move(s));
  }

  // The whole schedule as one persistent launch (MergePlanner::grid_parts).
  // Returns false, with the reason in `why` and nothing built, when it cannot be: rendering or
  // NVRTC failed, or the occupancy calculator says fewer blocks than grid_per_sm() fit on a
  // multiprocessor (a grid barrier would wait for blocks that never start).
  bool build_grid(const std::vector<GridPart>& parts, std::string* why) {
    Api& a = api();
    const int per = grid_per_sm();
    KernelSource ks_g;
    bool hit = false;
    try {
      ks_g = render_grid(parts, grid_blocks(a.sm_count), profile_);
      CUfunction fn = load_function(ks_g, &hit);
      if (a.cuOccupancyMaxActiveBlocksPerMultiprocessor) {
        int fit = 0;
        check(a.cuOccupancyMaxActiveBlocksPerMultiprocessor(&fit, fn, static_cast<int>(ks_g.block), ks_g.smem),
              "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        if (fit < per) {
          *why = std::to_string(fit) + " block(s) of the persistent kernel fit on a multiprocessor, " + std::to_string(per) +
                 " needed";
          return false;
        }
      }
    } catch (const Error& e) {
      *why = e.what();
      return false;
    }
    std::vector<CUdeviceptr> args;
    std::vector<int> ks, phase(p_.kernels.size(), -1);
    int ph = 0;
    for (auto& gp : parts) {
      const LirKernel& k = p_.kernels[gp.kernel];
      for (int b : k.in) args.push_back(ptr_[b]);
      args.push_back(ptr_[k.out[0]]);
      ks.push_back(gp.kernel);
      ph += gp.barrier;
      phase[gp.kernel] = ph;
    }
    owned_.emplace_back(ks_g.scratch_bytes);
    check(api().cuMemsetD8Async(owned_.back().ptr, 0, ks_g.scratch_bytes, stream_), "scratch");
    args.push_back(owned_.back().ptr);
    add_launch(ks_g, args, "persistent(" + std::to_string(parts.size()) + " kernels, " + std::to_string(ph + 1) + " phases)");
    disk_hits_ += hit;  // add_launch found it in memory
    steps_.back().kernels = ks;
    steps_.back().phase = std::move(phase);
    steps_.back().cooperative = a.cuLaunchCooperativeKernel && a.cooperative_launch;
    if (profile_) {
      steps_.back().stamps = owned_.back().ptr + 16;
      for (auto& gp : parts) {
        if (gp.barrier || steps_.back().phase_labels.empty()) steps_.back().phase_labels.push_back("");
        std::string& l = steps_.back().phase_labels.back();
        l += (l.empty() ? "" : " ") + p_.kernels[gp.kernel].label() + (gp.gemm ? "[own f32 GEMM]" : "");
      }
    }
    merged_ += static_cast<int>(parts.size());
    ++merged_launches_;
    return true;
  }

  void build_all() {
    MergePlanner mp{p_, [this](int b) { return static_cast<uint64_t>(ptr_[b]); }};
    if (auto gp = mp.grid_parts(); !gp.empty()) {
      if (build_grid(gp, &grid_refused_)) return;
      if (grid_refused_.empty()) grid_refused_ = "unknown";
    }
    for (auto& L : mp.plan(env_on("RLX_CUDA_MERGE", true), env_on("RLX_CUDA_ROWS", true))) {
      std::vector<int> ks(L.ks.begin(), L.ks.end());
      if (L.ks.size() >= 2) {
        std::vector<MergePart> parts = mp.parts(L.ks, L.mode, L.rows, L.tail);
        std::vector<CUdeviceptr> args;
        const char* kind = merge_mode_name(L.mode);
        std::string label = std::string(kind) + "(" + std::to_string(L.ks.size()) + ":";
        for (size_t j : L.ks) {
          const LirKernel& k = p_.kernels[j];
          for (int b : k.in) args.push_back(ptr_[b]);
          args.push_back(ptr_[k.out[0]]);
          label += (j != L.ks[0] ? " " : "") + k.label();
        }
        KernelSource ks_m = render_merged(parts, L.mode, L.rows, api().sm_count);
        if (ks_m.scratch_bytes) {  // zero-filled once; the kernel leaves it zero-filled
          owned_.emplace_back(ks_m.scratch_bytes);
          check(api().cuMemsetD8Async(owned_.back().ptr, 0, ks_m.scratch_bytes, stream_), "scratch");
          args.push_back(owned_.back().ptr);
        }
        add_launch(ks_m, args, label + ")");
        steps_.back().kernels = ks;
        steps_.back().concurrent = L.mode == MergeMode::Concurrent;
        steps_.back().reordered = L.reordered;
        merged_ += static_cast<int>(L.ks.size());
        ++merged_launches_;
        continue;
      }
      size_t before = steps_.size();
      build(p_.kernels[L.ks[0]]);
      for (size_t t = before; t < steps_.size(); ++t) steps_[t].kernels = ks, steps_[t].reordered = L.reordered;
    }
  }

  void build(const LirKernel& k) {
    auto in = types(k.in), out = types(k.out);
    std::vector<CUdeviceptr> args;
    for (int b : k.in) args.push_back(ptr_[b]);
    for (int b : k.out) args.push_back(ptr_[b]);
    std::string label = k.label();
    for (auto& t : in)
      if (t.dtype == DType::c64) fail("[cuda] ", label, ": complex buffers are not supported on cuda");
    if (k.kind == KernelKind::Generated) {
      add_launch(render_fused(k.body, out[0]), args, label);
      return;
    }
    if (k.op == OpKind::Reshape && k.in.size() == 1) {  // a copy into an output buffer
      Step s;
      s.kind = Step::Copy;
      s.args = {ptr_[k.in[0]], ptr_[k.out[0]]};
      s.bytes = static_cast<size_t>(p_.buffers[k.out[0]].bytes());
      s.label = "copy";
      steps_.push_back(std::move(s));
      return;
    }
    if (solver_has(k.op)) {  // dense linear algebra: cuSOLVER between two small kernels
      auto plan = std::make_unique<SolverPlan>(k.op, in, out, args);
      add_launch(plan->pre(), args, label + "[in]");
      KernelSource post = plan->post();
      Step s;
      s.kind = Step::Solver;
      s.label = label + plan->label();
      s.solver = std::move(plan);
      steps_.push_back(std::move(s));
      add_launch(post, args, label + "[out]");
      return;
    }
    if (splat_has(k.op)) {  // gaussian splatting (splat.h); a rasterize step syncs, so no CUDA graph then
      Step s;
      s.kind = Step::Splat;
      s.splat = std::make_unique<SplatPlan>(k.op, k.attrs, in, args);
      compiled_ += s.splat->kernels(), graphs_ = graphs_ && !splat_syncs(k.op);
      s.label = label + "[splat]";
      steps_.push_back(std::move(s));
      return;
    }
    GemmShape g;
    std::string post;
    if (k.attrs.count("cuda_siblings")) {  // batched sibling linears: A shared, B/bias/C strided
      LirKernel one = k;
      one.attrs.erase("cuda_siblings");
      std::vector<ValueType> in1 = in;
      int64_t n = static_cast<int64_t>(k.out.size());
      for (size_t j = 1; j < in1.size(); ++j) {
        auto d = static_dims(in1[j].shape);
        d[0] /= n;
        in1[j].shape = to_shape(d);
      }
      RLX_CHECK(plan_gemm(one, in1, out[0], &g, &post), "[cuda] batched linears: no GEMM plan");
      g.batch = n;
      g.stride_a = 0, g.stride_b = g.N * g.K, g.stride_c = g.M * g.N, g.bias_stride = g.bias ? g.N : 0;
      if (!workspace_.ptr) workspace_ = DeviceBlock(kWorkspace);
      Step s;
      s.kind = Step::Gemm;
      s.gemm = std::make_unique<GemmPlan>(g, kWorkspace);
      s.args = {ptr_[k.in[0]], ptr_[k.in[1]], g.bias ? ptr_[k.in[2]] : 0, ptr_[k.out[0]]};
      s.label = label + "[cublasLt batched " + std::to_string(n) + "x" + std::to_string(g.M) + "x" + std::to_string(g.N) +
                "x" + std::to_string(g.K) + "]";
      steps_.push_back(std::move(s));
      for (size_t i = 0; i < k.out.size() && post != "none"; ++i)
        add_launch(render_activation(post, out[i]), {ptr_[k.out[i]]}, label + "[" + post + "]");
      return;
    }
    if ((k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral) &&
        plan_gemm(k, in, out[0], &g, &post)) {
      if (g.M * g.N * g.K == 0) fail("[cuda] ", label, ": empty GEMM is not supported");
      if (!workspace_.ptr) workspace_ = DeviceBlock(kWorkspace);
      if (k.attrs.count("cuda_bias")) g.bias = true;  // fold-bias-into-gemm: the epilogue adds it
      if (k.attrs.count("cuda_relu")) g.epilogue = "relu";
      Step s;
      s.kind = Step::Gemm;
      s.gemm = std::make_unique<GemmPlan>(g, kWorkspace);
      s.args = {ptr_[k.in[0]], ptr_[k.in[1]], g.bias ? ptr_[k.in.back()] : 0, ptr_[k.out[0]]};
      if (k.attrs.count("cuda_ln")) s.gemm->set_norm_args(ptr_[k.in[2]], ptr_[k.in[3]], ptr_[k.in[4]]);  // fold-gemm-layernorm
      s.label = label + "[cublasLt " + std::string(dtype_name(g.dtype)) + " " + std::to_string(g.batch) + "x" +
                std::to_string(g.M) + "x" + std::to_string(g.N) + "x" + std::to_string(g.K) +
                (g.epilogue != "none" ? " +" + g.epilogue : "") + (g.bias ? " +bias" : "") + "]";
      steps_.push_back(std::move(s));
      if (post != "none") add_launch(render_activation(post, out[0]), {ptr_[k.out[0]]}, label + "[" + post + "]");
      return;
    }
    KernelSource ks;
    if (!render_library(k, in, out, &ks, api().sm_count))
      fail("[cuda] no cuda kernel for ", label, " (", dtype_name(in.empty() ? out[0].dtype : in[0].dtype),
           "); the capability set in src/backends/cuda/backend.cpp should not have claimed it");
    add_launch(ks, args, label);
  }

  // gemm-autotune: each GEMM step times the heuristic's candidates (up to 24) on its real buffers
  // (contents arbitrary; outputs are rewritten by every run) and keeps the fastest, unless it is
  // within 3% of the heuristic's first choice. RLX_CUDA_GEMM_AUTOTUNE=0 keeps the first choice.
  void autotune_gemms() {
    Api& a = api();
    CUevent e0, e1;
    check(a.cuEventCreate(&e0, 0), "event"), check(a.cuEventCreate(&e1, 0), "event");
    for (auto& s : steps_) {
      if (s.kind != Step::Gemm || s.gemm->candidates() < 2) continue;
      std::vector<float> best(s.gemm->candidates(), 1e30f);
      for (int c = 0; c < s.gemm->candidates(); ++c) {
        try {
          s.gemm->select(c);  // compiles our kernel candidates on first use
          enqueue(s);  // warm-up (and rejects a candidate that cannot run)
          // Times a captured graph of 5 launches, as the schedule replays: the
          // host's enqueue cost (several us per cuBLASLt call) stays out of the comparison.
          CUgraph g = nullptr;
          CUgraphExec ge = nullptr;
          check(a.cuStreamBeginCapture(stream_, kCaptureModeThreadLocal), "autotune capture");
          try {
            for (int i = 0; i < 5; ++i) enqueue(s);
          } catch (const Error&) {
            a.cuStreamEndCapture(stream_, &g);
            if (g) a.cuGraphDestroy(g);
            throw;
          }
          check(a.cuStreamEndCapture(stream_, &g), "autotune capture");
          CUresult rc = a.cuGraphInstantiateWithFlags(&ge, g, 0);
          for (int rep = 0; rc == 0 && rep < 4; ++rep) {  // the first replay warms up
            rc = a.cuEventRecord(e0, stream_);
            if (!rc) rc = a.cuGraphLaunch(ge, stream_);
            if (!rc) rc = a.cuEventRecord(e1, stream_);
            if (!rc) rc = a.cuEventSynchronize(e1);
            float ms = 0;
            if (!rc) rc = a.cuEventElapsedTime(&ms, e0, e1);
            if (!rc && rep) best[c] = std::min(best[c], ms);
          }
          if (ge) a.cuGraphExecDestroy(ge);
          a.cuGraphDestroy(g);
          check(rc, "autotune replay");
        } catch (const Error&) {
          best[c] = 1e30f;
        }
      }
      int pick = static_cast<int>(std::min_element(best.begin(), best.end()) - best.begin());
      if (best[pick] > 0.97f * best[0]) pick = 0;
      s.gemm->select(pick);
      if (pick) ++tuned_;
      s.label += " -> " + s.gemm->choice();  // cuBLASLt or our GEMM, in profiles
    }
    a.cuEventDestroy(e0), a.cuEventDestroy(e1);
    check(a.cuStreamSynchronize(stream_), "autotune");
  }

  void upload(const std::vector<Tensor>& inputs) {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[cuda] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    Api& a = api();
    last_small_.clear();  // the device inputs change here: resident_write must not skip a later write
    for (size_t i = 0; i < inputs.size(); ++i) {
      int b = p_.inputs[i];
      size_t bytes = static_cast<size_t>(p_.buffers[b].bytes());
      RLX_CHECK(inputs[i].nbytes() == bytes && inputs[i].dtype() == p_.buffers[b].type.dtype, "[cuda] input ", i,
                " ('", p_.buffers[b].name, "') has ", inputs[i].nbytes(), " bytes of ", dtype_name(inputs[i].dtype()),
                ", expected ", bytes, " of ", dtype_name(p_.buffers[b].type.dtype));
      if (!bytes) continue;
      PinnedBlock& pin = staging_.at(b);
      std::memcpy(pin.ptr, inputs[i].raw(), bytes);
      check(a.cuMemcpyHtoDAsync(ptr_[b], pin.ptr, bytes, stream_), "upload input");
    }
  }
  std::vector<Tensor> download() { return read_buffers(p_.outputs); }

  // Device buffers `bs` to host tensors: every copy queued on the stream behind the work already
  // there, one synchronize, then out of the pinned staging blocks.
  std::vector<Tensor> read_buffers(const std::vector<int>& bs) {
    Api& a = api();
    for (int b : bs) {
      size_t bytes = static_cast<size_t>(p_.buffers[b].bytes());
      if (bytes) check(a.cuMemcpyDtoHAsync(staging_.at(b).ptr, ptr_[b], bytes, stream_), "read buffer");
    }
    check(a.cuStreamSynchronize(stream_), "run");
    std::vector<Tensor> outs;
    for (int b : bs) {
      const LirBuffer& lb = p_.buffers[b];
      Tensor t(lb.type.dtype, static_dims(lb.type.shape));
      if (t.nbytes()) std::memcpy(t.raw(), staging_.at(b).ptr, t.nbytes());
      outs.push_back(std::move(t));
    }
    return outs;
  }

  void enqueue(Step& s) {
    Api& a = api();
    switch (s.kind) {
      case Step::Launch: {
        std::vector<void*> params;
        for (auto& p : s.args) params.push_back(&p);
        if (s.cooperative && coop_now_)  // a persistent launch: co-residency guaranteed or an error
          check(a.cuLaunchCooperativeKernel(s.fn, s.grid, s.grid_y, 1, s.block, 1, 1, s.smem, stream_, params.data()),
                s.label.c_str());
        else
          check(a.cuLaunchKernel(s.fn, s.grid, s.grid_y, 1, s.block, 1, 1, s.smem, stream_, params.data(), nullptr),
                s.label.c_str());
        break;
      }
      case Step::Gemm: s.gemm->run(s.args[0], s.args[1], s.args[2], s.args[3], workspace_.ptr, stream_); break;
      case Step::Solver: s.solver->run(stream_); break;
      case Step::Splat: s.splat->run(stream_); break;
      case Step::Copy:
        if (s.bytes) check(a.cuMemcpyDtoDAsync(s.args[1], s.args[0], s.bytes, stream_), "copy");
        break;
    }
  }

  // Captures the schedule as a CUDA graph. A cooperative launch that the driver cannot capture is
  // captured again as a plain launch (its co-residency was checked at build time, and the eager
  // first run launched it cooperatively).
  void capture() {
    Api& a = api();
    bool coop = false;
    for (auto& s : steps_) coop |= s.cooperative;
    for (int attempt = coop ? 0 : 1; attempt < 2; ++attempt) {
      coop_now_ = attempt == 0;
      check(a.cuStreamBeginCapture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
      std::string err;
      try {
        for (auto& s : steps_) enqueue(s);
      } catch (const Error& e) {
        err = e.what();
      }
      CUgraph g = nullptr;
      CUresult rc = a.cuStreamEndCapture(stream_, &g);
      if (err.empty() && rc == 0) rc = a.cuGraphInstantiateWithFlags(&exec_, g, 0);
      coop_now_ = true;
      if (err.empty() && rc == 0) {
        graph_ = g;
        graph_coop_ = attempt == 0 || !coop;
        return;
      }
      if (g) a.cuGraphDestroy(g);
      exec_ = nullptr;
      if (attempt == 1) {
        RLX_CHECK(err.empty(), err);
        check(rc, "CUDA graph capture");
      }
    }
  }

  void launch_schedule() {
    Api& a = api();
    ++runs_;
    if (graphs_ && !profile_ && runs_ >= 2 && !steps_.empty()) {
      if (!exec_) capture();  // once: buffer addresses never change for this executable
      check(a.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
      return;
    }
    if (!profile_) {
      for (auto& s : steps_) enqueue(s);
      return;
    }
    // One event between consecutive steps, one host synchronization at the end: the launches queue
    // back to back as in a normal run (no per-kernel host round trip inside the numbers).
    std::vector<CUevent> ev(steps_.size() + 1);
    for (auto& e : ev) check(a.cuEventCreate(&e, 0), "event");
    check(a.cuEventRecord(ev[0], stream_), "event");
    for (size_t i = 0; i < steps_.size(); ++i) {
      enqueue(steps_[i]);
      check(a.cuEventRecord(ev[i + 1], stream_), "event");
    }
    check(a.cuEventSynchronize(ev.back()), "profile");
    for (size_t i = 0; i < steps_.size(); ++i) {
      float ms = 0;
      a.cuEventElapsedTime(&ms, ev[i], ev[i + 1]);
      auto& t = times_[steps_[i].label];
      t.first += ms;
      t.second += 1;
      const Step& st = steps_[i];
      if (st.stamps) {  // a persistent launch: its time split by block 0's phase clocks
        size_t n = st.phase_labels.size();
        std::vector<long long> c(n + 1);
        check(a.cuMemcpyDtoHAsync(c.data(), st.stamps, c.size() * sizeof(long long), stream_), "phase clocks");
        check(a.cuStreamSynchronize(stream_), "phase clocks");
        double all = static_cast<double>(c[n] - c[0]);
        for (size_t q = 0; q < n && all > 0; ++q) {
          auto& pt = times_["  phase " + std::to_string(q) + ": " + st.phase_labels[q]];
          pt.first += ms * static_cast<double>(c[q + 1] - c[q]) / all;
          pt.second += 1;
        }
      }
    }
    for (auto& e : ev) a.cuEventDestroy(e);
  }

  LirProgram p_;
  CUstream stream_ = nullptr;
  DeviceBlock arena_, workspace_;
  std::vector<DeviceBlock> owned_;
  std::map<int, PinnedBlock> staging_;
  std::vector<CUdeviceptr> ptr_;
  std::vector<Step> steps_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  bool profile_ = false, graphs_ = true;
  bool coop_now_ = true, graph_coop_ = true;  // cooperative launches now / inside the captured graph
  std::string grid_refused_;                  // why the persistent launch was not built (empty: built or not planned)
  int merged_ = 0, merged_launches_ = 0;
  static constexpr size_t kSmallWrite = 256;
  std::map<int, std::string> last_small_;  // resident_write: the bytes of small inputs last copied
  std::set<int> fb_targets_;               // inputs that feedback overwrites
  std::map<int, CUevent> write_ev_;        // resident_write: per input, its last H2D copy
  int runs_ = 0, compiled_ = 0, disk_hits_ = 0, folded_ = 0, folded_adds_ = 0, batched_ = 0, tuned_ = 0, gemm_bias_ = 0,
      in_place_ = 0;
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

std::vector<std::pair<std::string, KernelSource>> render_for_check(const LirProgram& program) {
  LirProgram p = program;
  if (!p.scheduled) schedule_lir(p, cuda_schedule());
  // Addresses as the executable lays buffers out: the arena at 0, every other buffer on its own.
  MergePlanner mp{p, [&p](int id) {
    while (p.buffers[id].kind == BufferKind::View) id = p.buffers[id].view_of;
    return p.buffers[id].kind == BufferKind::Arena ? static_cast<uint64_t>(p.buffers[id].offset)
                                                   : (static_cast<uint64_t>(id) + 1) << 40;
  }};
  std::vector<std::pair<std::string, KernelSource>> r;
  if (auto gp = mp.grid_parts(); !gp.empty()) {  // a persistent launch
    r.emplace_back("persistent(" + std::to_string(gp.size()) + ")", render_grid(gp, grid_blocks(132)));
    return r;
  }
  for (auto& L : mp.plan(env_on("RLX_CUDA_MERGE", true), env_on("RLX_CUDA_ROWS", true))) {
    if (L.ks.size() >= 2) {
      const char* kind = merge_mode_name(L.mode);
      r.emplace_back(std::string(kind) + "(" + std::to_string(L.ks.size()) + ")",
                     render_merged(mp.parts(L.ks, L.mode, L.rows, L.tail), L.mode, L.rows));
      continue;
    }
    const LirKernel& k = p.kernels[L.ks[0]];
    auto in = mp.types(k.in), out = mp.types(k.out);
    GemmShape g;
    std::string post;
    if (k.kind == KernelKind::Generated) {
      r.emplace_back(k.label(), render_fused(k.body, out[0]));
    } else if (k.attrs.count("cuda_siblings") || ((k.op == OpKind::Linear || k.op == OpKind::MatMul || k.op == OpKind::DotGeneral) &&
                                                  plan_gemm(k, in, out[0], &g, &post))) {
      if (k.attrs.count("cuda_siblings")) {
        post = activation_of(k);
        if (post == "relu" || post == "gelu_tanh") post = "none";
      }
      r.emplace_back(k.label() + "[cublasLt]", KernelSource{});
      if (post != "none") r.emplace_back(k.label() + "[" + post + "]", render_activation(post, out[0]));
    } else if (k.op == OpKind::Reshape && k.in.size() == 1) {
      r.emplace_back("copy", KernelSource{});
    } else if (splat_has(k.op)) {
      for (auto& [name, ks] : splat_kernels(k.op, k.attrs, in)) r.emplace_back(k.label() + "[" + name + "]", ks);
    } else if (solver_has(k.op)) {
      auto [pre, post] = solver_kernels(k.op, in);
      r.emplace_back(k.label() + "[in]", pre);
      r.emplace_back(k.label() + "[cusolver]", KernelSource{});
      r.emplace_back(k.label() + "[out]", post);
    } else {
      KernelSource ks;
      RLX_CHECK(render_library(k, in, out, &ks), "[cuda] no cuda kernel for ", k.label());
      r.emplace_back(k.label(), ks);
    }
  }
  return r;
}

std::unique_ptr<Executable> make_cuda_executable(const LirProgram& p) { return std::make_unique<CudaExecutable>(p); }

}  // namespace rlx::cuda
