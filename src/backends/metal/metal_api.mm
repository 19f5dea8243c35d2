// The Metal host executor (Objective-C++, Apple platforms only; CMake builds it there and says so
// elsewhere): the gpu::Api of src/backends/portable over MTLDevice. Each rendered MSL kernel is
// compiled with newLibraryWithSource into a compute pipeline; buffers are shared-storage MTLBuffers
// (zeroed at creation); a schedule is one command buffer per submit with one compute encoder whose
// dispatches are serialized (MTLDispatchTypeSerial), so each sees the previous one's writes.
// It has never run on the machines this project is tested on (no Apple GPU there).
#import <Metal/Metal.h>

#include <cstring>
#include <map>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"  // fnv1a64

namespace rlx::gpu {

namespace {

class MetalApi : public Api {
 public:
  id<MTLDevice> dev = nil;
  id<MTLCommandQueue> queue = nil;
  std::unique_ptr<codegen::CLikeRenderer> r = codegen::make_msl_renderer();
  std::string desc;
  std::map<int, id<MTLBuffer>> bufs;
  int next_buf = 0;
  std::vector<id<MTLComputePipelineState>> pipes;
  std::map<uint64_t, int> prog_cache;
  std::map<int, std::vector<Launch>> recs;
  int next_rec = 0;

  std::string name() const override { return "metal"; }
  std::string device() const override { return desc; }
  const codegen::CLikeRenderer& renderer() const override { return *r; }

  int buffer(size_t bytes) override {
    id<MTLBuffer> b = [dev newBufferWithLength:std::max<size_t>(bytes, 4) options:MTLResourceStorageModeShared];
    RLX_CHECK(b != nil, "[metal] cannot allocate ", bytes, " bytes");
    std::memset([b contents], 0, [b length]);
    bufs[next_buf] = b;
    return next_buf++;
  }
  void free_buffer(int id) override { bufs.erase(id); }
  void upload(int id, const void* src, size_t n) override { std::memcpy([bufs.at(id) contents], src, n); }
  void download(int id, void* dst, size_t n) override { std::memcpy(dst, [bufs.at(id) contents], n); }

  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    NSError* err = nil;
    MTLCompileOptions* opt = [MTLCompileOptions new];
    id<MTLLibrary> lib = [dev newLibraryWithSource:[NSString stringWithUTF8String:k.source.c_str()] options:opt error:&err];
    RLX_CHECK(lib != nil, "[metal] MSL of ", k.name, " rejected: ", err ? [[err localizedDescription] UTF8String] : "?");
    id<MTLFunction> fn = [lib newFunctionWithName:[NSString stringWithUTF8String:k.name.c_str()]];
    RLX_CHECK(fn != nil, "[metal] no function ", k.name);
    id<MTLComputePipelineState> p = [dev newComputePipelineStateWithFunction:fn error:&err];
    RLX_CHECK(p != nil, "[metal] pipeline for ", k.name, ": ", err ? [[err localizedDescription] UTF8String] : "?");
    pipes.push_back(p);
    return prog_cache[h] = static_cast<int>(pipes.size() - 1);
  }
  int record(const std::vector<Launch>& ls) override {
    recs[next_rec] = ls;
    return next_rec++;
  }
  void free_recording(int id) override { recs.erase(id); }
  void submit(int id) override {
    id<MTLCommandBuffer> cb = [queue commandBuffer];
    id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial];
    for (const Launch& l : recs.at(id)) {
      [enc setComputePipelineState:pipes.at(static_cast<size_t>(l.prog))];
      for (size_t i = 0; i < l.bufs.size(); ++i) [enc setBuffer:bufs.at(l.bufs[i]) offset:0 atIndex:i];
      [enc dispatchThreadgroups:MTLSizeMake(static_cast<NSUInteger>(l.groups), 1, 1)
          threadsPerThreadgroup:MTLSizeMake(static_cast<NSUInteger>(l.local), 1, 1)];
    }
    [enc endEncoding];
    [cb commit];
    [cb waitUntilCompleted];
    RLX_CHECK([cb status] == MTLCommandBufferStatusCompleted, "[metal] command buffer failed");
  }
};

}  // namespace

std::unique_ptr<Api> make_metal_api(std::string* why) {
  id<MTLDevice> d = MTLCreateSystemDefaultDevice();
  if (d == nil) {
    *why = "no hardware: MTLCreateSystemDefaultDevice found no Metal device";
    return nullptr;
  }
  auto a = std::make_unique<MetalApi>();
  a->dev = d;
  a->queue = [d newCommandQueue];
  a->desc = std::string([[d name] UTF8String]) + " (Metal)";
  return a;
}

}  // namespace rlx::gpu
