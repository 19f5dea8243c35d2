// The Direct3D 12 executor for the `directx` device's HLSL kernels, written against the D3D12 API
// headers (Debian directx-headers-dev; on Linux through its winadapter.h). It opens
// libd3d12.so (WSL 2 ships one; RLX_D3D12_LIB overrides) and compiles each kernel to DXIL with
// DXC's command-line compiler (`dxc`, RLX_DXC). Neither exists on the Linux CI machines, so this
// file is compiled there but never run: make_directx_api() uses it only where both are found,
// else the HLSL runs as SPIR-V on Vulkan (directx_api.cpp) and `rlx devices` says which ran.
//
// Buffers are committed default-heap resources (zeroed at creation) in the COMMON state, bound
// as root UAVs u0..uN (the rendered kernels declare RWStructuredBuffer<uint> b<i> :
// register(u<i>)); uploads and readbacks go through UPLOAD/READBACK heap copies; a schedule is
// one command list with a UAV barrier between dispatches, re-recorded per submit.
#if RLX_HAVE_D3D12_HEADERS
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include <wsl/winadapter.h>  // must precede the D3D12 headers
#include <directx/d3d12.h>
#include <dxguids/dxguids.h>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"  // fnv1a64, temp paths
#include "runtime/subprocess.h"

namespace rlx::gpu {

namespace {

void hr_check(HRESULT hr, const char* what) {
  if (FAILED(hr)) fail("[directx] ", what, " failed (HRESULT 0x", hex64(static_cast<uint32_t>(hr)), ")");
}

class D3D12Api : public Api {
 public:
  ID3D12Device* dev = nullptr;
  ID3D12CommandQueue* queue = nullptr;
  ID3D12CommandAllocator* alloc = nullptr;
  ID3D12GraphicsCommandList* list = nullptr;
  ID3D12Fence* fence = nullptr;
  UINT64 fence_value = 0;
  PFN_D3D12_SERIALIZE_ROOT_SIGNATURE serialize = nullptr;
  std::string dxc, desc;
  std::unique_ptr<codegen::CLikeRenderer> r = codegen::make_hlsl_renderer();
  struct Buf {
    ID3D12Resource* res;
    size_t bytes;
  };
  std::map<int, Buf> bufs;
  int next_buf = 0;
  struct Pipeline {
    ID3D12RootSignature* root;
    ID3D12PipelineState* pso;
  };
  std::vector<Pipeline> pipes;
  std::map<uint64_t, int> prog_cache;
  std::map<int, std::vector<Launch>> recs;
  int next_rec = 0;

  std::string name() const override { return "directx"; }
  std::string device() const override { return desc; }
  const codegen::CLikeRenderer& renderer() const override { return *r; }

  ID3D12Resource* make_buffer(size_t bytes, D3D12_HEAP_TYPE heap, bool uav, D3D12_RESOURCE_STATES state) {
    D3D12_HEAP_PROPERTIES hp{};
    hp.Type = heap;
    D3D12_RESOURCE_DESC rd{};
    rd.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER;
    rd.Width = std::max<size_t>(bytes, 4);
    rd.Height = 1;
    rd.DepthOrArraySize = 1;
    rd.MipLevels = 1;
    rd.SampleDesc.Count = 1;
    rd.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR;
    rd.Flags = uav ? D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS : D3D12_RESOURCE_FLAG_NONE;
    ID3D12Resource* res = nullptr;
    hr_check(dev->CreateCommittedResource(&hp, D3D12_HEAP_FLAG_NONE, &rd, state, nullptr, IID_PPV_ARGS(&res)),
             "CreateCommittedResource");
    return res;
  }
  void execute_and_wait() {
    hr_check(list->Close(), "Close");
    ID3D12CommandList* lists[] = {list};
    queue->ExecuteCommandLists(1, lists);
    hr_check(queue->Signal(fence, ++fence_value), "Signal");
    hr_check(fence->SetEventOnCompletion(fence_value, nullptr), "SetEventOnCompletion");  // null event: blocks
    hr_check(alloc->Reset(), "allocator Reset");
    hr_check(list->Reset(alloc, nullptr), "list Reset");
  }

  int buffer(size_t bytes) override {
    bufs[next_buf] = {make_buffer(bytes, D3D12_HEAP_TYPE_DEFAULT, true, D3D12_RESOURCE_STATE_COMMON), bytes};
    return next_buf++;
  }
  void free_buffer(int id) override {
    auto it = bufs.find(id);
    if (it == bufs.end()) return;
    it->second.res->Release();
    bufs.erase(it);
  }
  void upload(int id, const void* src, size_t bytes) override {
    ID3D12Resource* up = make_buffer(bytes, D3D12_HEAP_TYPE_UPLOAD, false, D3D12_RESOURCE_STATE_GENERIC_READ);
    void* p = nullptr;
    hr_check(up->Map(0, nullptr, &p), "Map");
    std::memcpy(p, src, bytes);
    up->Unmap(0, nullptr);
    list->CopyBufferRegion(bufs.at(id).res, 0, up, 0, bytes);
    execute_and_wait();
    up->Release();
  }
  void download(int id, void* dst, size_t bytes) override {
    ID3D12Resource* rb = make_buffer(bytes, D3D12_HEAP_TYPE_READBACK, false, D3D12_RESOURCE_STATE_COPY_DEST);
    list->CopyBufferRegion(rb, 0, bufs.at(id).res, 0, bytes);
    execute_and_wait();
    void* p = nullptr;
    D3D12_RANGE range{0, bytes};
    hr_check(rb->Map(0, &range, &p), "Map");
    std::memcpy(dst, p, bytes);
    rb->Unmap(0, nullptr);
    rb->Release();
  }

  std::string dxil(const codegen::RenderedKernel& k) {
    const std::string base = temp_path_for(cache_dir("dxil") + "/" + hex64(fnv1a64(k.source)));
    const std::string src = base + ".hlsl", out = base + ".dxil";
    RLX_CHECK(write_file_atomic(src, k.source), "[directx] cannot write ", src);
    std::string log;
    int rc = run_tool({dxc, "-T", "cs_6_0", "-E", "main", "-Fo", out, src}, log);
    std::remove(src.c_str());
    RLX_CHECK(rc == 0, "[directx] dxc failed for ", k.name, ":\n", log);
    std::ifstream in(out, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(out.c_str());
    return bytes;
  }
  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    std::vector<D3D12_ROOT_PARAMETER> params(k.args.size());
    for (size_t i = 0; i < params.size(); ++i) {
      params[i] = {};
      params[i].ParameterType = D3D12_ROOT_PARAMETER_TYPE_UAV;
      params[i].Descriptor.ShaderRegister = static_cast<UINT>(i);
      params[i].ShaderVisibility = D3D12_SHADER_VISIBILITY_ALL;
    }
    D3D12_ROOT_SIGNATURE_DESC rs{};
    rs.NumParameters = static_cast<UINT>(params.size());
    rs.pParameters = params.data();
    ID3DBlob* blob = nullptr;
    ID3DBlob* err = nullptr;
    hr_check(serialize(&rs, D3D_ROOT_SIGNATURE_VERSION_1, &blob, &err), "D3D12SerializeRootSignature");
    Pipeline pl{};
    hr_check(dev->CreateRootSignature(0, blob->GetBufferPointer(), blob->GetBufferSize(), IID_PPV_ARGS(&pl.root)),
             "CreateRootSignature");
    blob->Release();
    std::string code = dxil(k);
    D3D12_COMPUTE_PIPELINE_STATE_DESC pd{};
    pd.pRootSignature = pl.root;
    pd.CS.pShaderBytecode = code.data();
    pd.CS.BytecodeLength = code.size();
    hr_check(dev->CreateComputePipelineState(&pd, IID_PPV_ARGS(&pl.pso)), "CreateComputePipelineState");
    pipes.push_back(pl);
    return prog_cache[h] = static_cast<int>(pipes.size() - 1);
  }
  int record(const std::vector<Launch>& ls) override {
    recs[next_rec] = ls;
    return next_rec++;
  }
  void free_recording(int id) override { recs.erase(id); }
  void submit(int id) override {
    for (const Launch& l : recs.at(id)) {
      const Pipeline& p = pipes.at(static_cast<size_t>(l.prog));
      list->SetComputeRootSignature(p.root);
      list->SetPipelineState(p.pso);
      for (size_t i = 0; i < l.bufs.size(); ++i)
        list->SetComputeRootUnorderedAccessView(static_cast<UINT>(i), bufs.at(l.bufs[i]).res->GetGPUVirtualAddress());
      UINT gx = static_cast<UINT>(std::min<int64_t>(l.groups, 65535));
      list->Dispatch(gx, static_cast<UINT>((l.groups + gx - 1) / gx), 1);
      D3D12_RESOURCE_BARRIER b{};
      b.Type = D3D12_RESOURCE_BARRIER_TYPE_UAV;
      b.UAV.pResource = nullptr;  // every UAV: the next dispatch sees this one's writes
      list->ResourceBarrier(1, &b);
    }
    execute_and_wait();
  }
};

}  // namespace

std::unique_ptr<Api> make_d3d12_api(std::string* why) {
  const char* lib = std::getenv("RLX_D3D12_LIB");
  void* h = dlopen(lib && *lib ? lib : "libd3d12.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = "Direct3D 12 not found (needs Windows, or WSL 2's libd3d12.so)";
    return nullptr;
  }
  auto create = reinterpret_cast<PFN_D3D12_CREATE_DEVICE>(dlsym(h, "D3D12CreateDevice"));
  auto a = std::make_unique<D3D12Api>();
  a->serialize = reinterpret_cast<PFN_D3D12_SERIALIZE_ROOT_SIGNATURE>(dlsym(h, "D3D12SerializeRootSignature"));
  const char* dxc = std::getenv("RLX_DXC");
  const std::string dxc_name = dxc && *dxc ? dxc : "dxc";
  a->dxc = find_on_path(dxc_name);
  if (!create || !a->serialize || a->dxc.empty()) {
    *why = "Direct3D 12 found but no D3D12CreateDevice/serializer or no DXC ('" + dxc_name + "' not on PATH; set RLX_DXC)";
    return nullptr;
  }
  if (FAILED(create(nullptr, D3D_FEATURE_LEVEL_11_0, IID_PPV_ARGS(&a->dev)))) {
    *why = "Direct3D 12: D3D12CreateDevice found no adapter";
    return nullptr;
  }
  D3D12_COMMAND_QUEUE_DESC qd{};
  qd.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
  hr_check(a->dev->CreateCommandQueue(&qd, IID_PPV_ARGS(&a->queue)), "CreateCommandQueue");
  hr_check(a->dev->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_COMPUTE, IID_PPV_ARGS(&a->alloc)), "CreateCommandAllocator");
  hr_check(a->dev->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, a->alloc, nullptr, IID_PPV_ARGS(&a->list)),
           "CreateCommandList");
  hr_check(a->dev->CreateFence(0, D3D12_FENCE_FLAG_NONE, IID_PPV_ARGS(&a->fence)), "CreateFence");
  a->desc = "Direct3D 12 (" + a->dxc + " -> DXIL)";
  return a;
}

}  // namespace rlx::gpu

#else  // built without the D3D12 headers

#include "backends/portable/api.h"

namespace rlx::gpu {
std::unique_ptr<Api> make_d3d12_api(std::string* why) {
  *why = "built without the Direct3D 12 headers (apt install directx-headers-dev)";
  return nullptr;
}
}  // namespace rlx::gpu

#endif
