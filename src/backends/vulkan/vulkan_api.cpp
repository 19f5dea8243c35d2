// `vulkan`: GLSL compute -> SPIR-V (glslc, cached on disk by source hash: runtime/disk_cache.h) -> compute pipelines.
// libvulkan.so.1 is dlopen'ed; every entry point comes from vkGet{Instance,Device}ProcAddr.
// Buffers are host-visible coherent and stay mapped; a schedule is one command buffer with a
// compute->compute barrier between dispatches, recorded once and resubmitted on every run.
// Why glslc and not libshaderc: Debian's libshaderc.so is built against another glslang than
// glslang-dev ships (link errors, then segfaults), and the static libshaderc_combined line costs
// ~9 MB and a long link in every binary; glslc is the same compiler behind a stable interface.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"  // the shared on-disk cache (RLX_CACHE_DIR, RLX_CACHE_MAX_MB)
#include "runtime/subprocess.h"

namespace rlx::gpu {

namespace {

#define RLX_VK_DEV(X)                                                                                                 \
  X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory)       \
  X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule)               \
  X(vkCreateDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkCreateComputePipelines) X(vkCreateDescriptorPool)      \
  X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool)             \
  X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)                   \
  X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkQueueSubmit)           \
  X(vkCreateFence) X(vkWaitForFences) X(vkResetFences)

void vk_check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) fail("[vulkan] ", what, " failed (VkResult ", static_cast<int>(r), ")");
}

struct Pipeline {
  VkDescriptorSetLayout dsl;
  VkPipelineLayout layout;
  VkPipeline pipe;
  int nbind;
};
struct Buf {
  VkBuffer buf;
  VkDeviceMemory mem;
  void* map;
  size_t size;
};
struct Rec {
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
};

class VulkanApi : public Api {
 public:
#define RLX_VKF(n) PFN_##n n = nullptr;
  RLX_VK_DEV(RLX_VKF)
#undef RLX_VKF
  VkInstance inst = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool cmd_pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  uint32_t mem_type = 0;
  std::string desc, glslc;
  VulkanFlavor flavor;  // vulkan: GLSL + glslc; directx: HLSL + glslangValidator's HLSL front end
  std::unique_ptr<codegen::CLikeRenderer> r;
  std::map<int, Buf> bufs;
  std::map<uint64_t, int> prog_cache;
  std::vector<Pipeline> pipes;
  std::map<int, Rec> recs;
  int next_buf = 0, next_rec = 0;

  std::string name() const override { return flavor.device; }
  std::string device() const override { return desc; }
  const codegen::CLikeRenderer& renderer() const override { return *r; }

  int buffer(size_t bytes) override {
    Buf b{};
    b.size = bytes;
    VkBufferCreateInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bi.size = bytes;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    vk_check(vkCreateBuffer(dev, &bi, nullptr, &b.buf), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b.buf, &req);
    VkMemoryAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = mem_type;
    vk_check(vkAllocateMemory(dev, &ai, nullptr, &b.mem), "vkAllocateMemory");
    vk_check(vkBindBufferMemory(dev, b.buf, b.mem, 0), "vkBindBufferMemory");
    vk_check(vkMapMemory(dev, b.mem, 0, VK_WHOLE_SIZE, 0, &b.map), "vkMapMemory");
    std::memset(b.map, 0, bytes);
    bufs[next_buf] = b;
    return next_buf++;
  }
  void free_buffer(int id) override {
    Buf& b = bufs.at(id);
    vkDestroyBuffer(dev, b.buf, nullptr);
    vkFreeMemory(dev, b.mem, nullptr);
    bufs.erase(id);
  }
  void upload(int b, const void* src, size_t n) override { std::memcpy(bufs.at(b).map, src, n); }
  void download(int b, void* dst, size_t n) override { std::memcpy(dst, bufs.at(b).map, n); }

  // SPIR-V of `k` from <cache root>/spirv/<hash>.spv (runtime/disk_cache.h: RLX_CACHE_DIR, LRU cap
  // RLX_CACHE_MAX_MB shared with the cpu JIT and NVRTC), compiled by glslc on a miss. Key: glslc's
  // command line + source (SPIR-V is portable, so a glslc upgrade does not invalidate entries).
  std::vector<uint32_t> spirv(const codegen::RenderedKernel& k) {
    const std::string& kFlags = flavor.flags;
    const std::string hex = hex64(fnv1a64(glslc + " " + kFlags + "|" + k.source));
    const std::string spv = cache_dir("spirv") + "/" + hex + ".spv";
    std::ifstream in(spv, std::ios::binary);
    if (in) {
      cache_touch(spv);  // a hit: most recently used
    } else {
      const std::string tmp = temp_path_for(spv), src = tmp + flavor.ext;
      RLX_CHECK(write_file_atomic(src, k.source), "[vulkan] cannot write ", src);
      std::string tool = find_on_path(glslc);  // posix_spawn takes a path, not a name
      std::vector<std::string> argv{tool.empty() ? glslc : tool};
      std::stringstream flags(kFlags);
      for (std::string f; flags >> f;) argv.push_back(f);
      argv.insert(argv.end(), {"-o", tmp, src});
      std::string log;
      int rc = run_tool(argv, log);
      RLX_CHECK(rc >= 0 || !log.empty(), "[vulkan] cannot run ", glslc);
      std::remove(src.c_str());
      if (rc != 0) {
        std::remove(tmp.c_str());
        fail("[", flavor.device, "] ", glslc, " failed for ", k.name, ":\n", log, "\n--- source ---\n", k.source);
      }
      // rename(2): concurrent processes never see half a file; the last writer wins, both whole
      if (std::rename(tmp.c_str(), spv.c_str()) != 0) {
        std::remove(tmp.c_str());
        fail("[vulkan] glslc produced no SPIR-V for ", k.name, " (", log, ")");
      }
      cache_inserted(spv);  // evicts least recently used entries over RLX_CACHE_MAX_MB
      in.open(spv, std::ios::binary);
      RLX_CHECK(in.good(), "[vulkan] cannot read back ", spv);
    }
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<uint32_t> words(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), words.size() * 4);
    return words;
  }

  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    auto code = spirv(k);
    VkShaderModuleCreateInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    si.codeSize = code.size() * 4;
    si.pCode = code.data();
    VkShaderModule mod;
    vk_check(vkCreateShaderModule(dev, &si, nullptr, &mod), "vkCreateShaderModule");
    Pipeline p{};
    p.nbind = static_cast<int>(k.args.size());
    std::vector<VkDescriptorSetLayoutBinding> b(k.args.size());
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = {static_cast<uint32_t>(i), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo dl{};
    dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dl.bindingCount = static_cast<uint32_t>(b.size());
    dl.pBindings = b.data();
    vk_check(vkCreateDescriptorSetLayout(dev, &dl, nullptr, &p.dsl), "vkCreateDescriptorSetLayout");
    VkPipelineLayoutCreateInfo pl{};
    pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p.dsl;
    vk_check(vkCreatePipelineLayout(dev, &pl, nullptr, &p.layout), "vkCreatePipelineLayout");
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_COMPUTE_BIT, mod, "main", nullptr};
    ci.layout = p.layout;
    vk_check(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipe), "vkCreateComputePipelines");
    vkDestroyShaderModule(dev, mod, nullptr);
    pipes.push_back(p);
    return prog_cache[h] = static_cast<int>(pipes.size() - 1);
  }

  int record(const std::vector<Launch>& ls) override {
    Rec rc;
    uint32_t nbind = 0;
    for (auto& l : ls) nbind += static_cast<uint32_t>(l.bufs.size());
    if (!ls.empty()) {
      VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(nbind, 1u)};
      VkDescriptorPoolCreateInfo pi{};
      pi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      pi.maxSets = static_cast<uint32_t>(ls.size());
      pi.poolSizeCount = 1;
      pi.pPoolSizes = &ps;
      vk_check(vkCreateDescriptorPool(dev, &pi, nullptr, &rc.pool), "vkCreateDescriptorPool");
    }
    VkCommandBufferAllocateInfo ca{};
    ca.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ca.commandPool = cmd_pool;
    ca.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ca.commandBufferCount = 1;
    vk_check(vkAllocateCommandBuffers(dev, &ca, &rc.cmd), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    vk_check(vkBeginCommandBuffer(rc.cmd, &bi), "vkBeginCommandBuffer");
    for (auto& l : ls) {
      const Pipeline& p = pipes.at(static_cast<size_t>(l.prog));
      VkDescriptorSetAllocateInfo da{};
      da.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
      da.descriptorPool = rc.pool;
      da.descriptorSetCount = 1;
      da.pSetLayouts = &p.dsl;
      VkDescriptorSet set;
      vk_check(vkAllocateDescriptorSets(dev, &da, &set), "vkAllocateDescriptorSets");
      std::vector<VkDescriptorBufferInfo> infos(l.bufs.size());
      std::vector<VkWriteDescriptorSet> w(l.bufs.size());
      for (size_t i = 0; i < l.bufs.size(); ++i) {
        infos[i] = {bufs.at(l.bufs[i]).buf, 0, VK_WHOLE_SIZE};
        w[i] = {};
        w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        w[i].dstSet = set;
        w[i].dstBinding = static_cast<uint32_t>(i);
        w[i].descriptorCount = 1;
        w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w[i].pBufferInfo = &infos[i];
      }
      vkUpdateDescriptorSets(dev, static_cast<uint32_t>(w.size()), w.data(), 0, nullptr);
      vkCmdBindPipeline(rc.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipe);
      vkCmdBindDescriptorSets(rc.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
      uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(l.groups, 65535));
      uint32_t gy = static_cast<uint32_t>((l.groups + gx - 1) / gx);
      vkCmdDispatch(rc.cmd, gx, gy, 1);
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                         VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT};
      vkCmdPipelineBarrier(rc.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0,
                           nullptr);
    }
    vk_check(vkEndCommandBuffer(rc.cmd), "vkEndCommandBuffer");
    recs[next_rec] = rc;
    return next_rec++;
  }
  void free_recording(int id) override {
    auto it = recs.find(id);
    if (it == recs.end()) return;
    vkFreeCommandBuffers(dev, cmd_pool, 1, &it->second.cmd);
    if (it->second.pool) vkDestroyDescriptorPool(dev, it->second.pool, nullptr);
    recs.erase(it);
  }
  void submit(int id) override {
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &recs.at(id).cmd;
    vk_check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
    vk_check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vk_check(vkResetFences(dev, 1, &fence), "vkResetFences");
  }
};

bool tool_works(const std::string& cmd) { return std::system((cmd + " --version >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

std::unique_ptr<Api> make_vulkan_api(std::string* why) {
  VulkanFlavor f;
  f.device = "vulkan";
  f.renderer = [] { return codegen::make_glsl_renderer(); };
  f.compiler_env = "RLX_GLSLC";
  f.compiler = "glslc";
  f.flags = "-fshader-stage=compute -O";
  f.ext = ".comp";
  return make_vulkan_api_with(f, why);
}

std::unique_ptr<Api> make_vulkan_api_with(const VulkanFlavor& flavor, std::string* why) {
  // The Mesa loader complains on stderr without a runtime dir; give it a private one.
  if (!std::getenv("XDG_RUNTIME_DIR")) {
    std::string d = "/tmp/rlx-xdg-" + std::to_string(getuid());
    mkdir(d.c_str(), 0700);
    setenv("XDG_RUNTIME_DIR", d.c_str(), 0);
  }
  void* h = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = "no driver: Vulkan loader libvulkan.so.1 not found (apt install libvulkan1 mesa-vulkan-drivers)";
    return nullptr;
  }
  auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(h, "vkGetInstanceProcAddr"));
  if (!gipa) {
    *why = "no driver: libvulkan.so.1 lacks vkGetInstanceProcAddr";
    return nullptr;
  }
  auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "rlx";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ii{};
  ii.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ii.pApplicationInfo = &app;
  auto a = std::make_unique<VulkanApi>();
  a->flavor = flavor;
  a->r = flavor.renderer();
  if (!create_instance || create_instance(&ii, nullptr, &a->inst) != VK_SUCCESS) {
    *why = "no driver: vkCreateInstance failed (no Vulkan ICD installed? apt install mesa-vulkan-drivers)";
    return nullptr;
  }
#define RLX_VKI(n) auto n = reinterpret_cast<PFN_##n>(gipa(a->inst, #n));
  RLX_VKI(vkEnumeratePhysicalDevices) RLX_VKI(vkGetPhysicalDeviceProperties)
  RLX_VKI(vkGetPhysicalDeviceQueueFamilyProperties) RLX_VKI(vkGetPhysicalDeviceMemoryProperties)
  RLX_VKI(vkCreateDevice) RLX_VKI(vkGetDeviceProcAddr)
  RLX_VKI(vkGetPhysicalDeviceFeatures2) RLX_VKI(vkGetPhysicalDeviceProperties2)
#undef RLX_VKI
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(a->inst, &n, nullptr);
  if (n == 0) {
    *why = "no hardware: the Vulkan loader found no physical device (install mesa-vulkan-drivers for lavapipe)";
    return nullptr;
  }
  std::vector<VkPhysicalDevice> devs(n);
  vkEnumeratePhysicalDevices(a->inst, &n, devs.data());
  const char* pick = std::getenv("RLX_VULKAN_DEVICE");  // index into the loader's list
  a->phys = devs[pick ? std::min<uint32_t>(static_cast<uint32_t>(std::atoi(pick)), n - 1) : 0];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(a->phys, &props);
  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(a->phys, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(a->phys, &nq, qf.data());
  uint32_t fam = UINT32_MAX;
  for (uint32_t i = 0; i < nq; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      fam = i;
      break;
    }
  if (fam == UINT32_MAX) {
    *why = std::string("no hardware: ") + props.deviceName + " has no compute queue";
    return nullptr;
  }
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(a->phys, &mp);
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  a->mem_type = UINT32_MAX;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((mp.memoryTypes[i].propertyFlags & want) == want) {
      a->mem_type = i;
      break;
    }
  if (a->mem_type == UINT32_MAX) {
    *why = "no hardware: no host-visible coherent memory type";
    return nullptr;
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = fam;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  if (vkCreateDevice(a->phys, &di, nullptr, &a->dev) != VK_SUCCESS) {
    *why = std::string("no hardware: vkCreateDevice failed on ") + props.deviceName;
    return nullptr;
  }
#define RLX_VKF(n) a->n = reinterpret_cast<PFN_##n>(vkGetDeviceProcAddr(a->dev, #n));
  RLX_VK_DEV(RLX_VKF)
#undef RLX_VKF
  a->vkGetDeviceQueue(a->dev, fam, 0, &a->queue);
  VkCommandPoolCreateInfo cp{};
  cp.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cp.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cp.queueFamilyIndex = fam;
  vk_check(a->vkCreateCommandPool(a->dev, &cp, nullptr, &a->cmd_pool), "vkCreateCommandPool");
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  vk_check(a->vkCreateFence(a->dev, &fi, nullptr, &a->fence), "vkCreateFence");
  const char* env = std::getenv(flavor.compiler_env.c_str());
  a->glslc = env && *env ? env : flavor.compiler;
  if (!tool_works(a->glslc)) {
    *why = "no driver: found " + std::string(props.deviceName) + " but no SPIR-V compiler ('" + a->glslc +
           "' did not run; apt install " + (flavor.compiler == "glslc" ? "glslc" : "glslang-tools") + ", or set " +
           flavor.compiler_env + ")";
    return nullptr;
  }
  // Device features (reported; the GLSL kernels need none of them). Vulkan 1.1 core queries; the
  // fp16/int8 struct is Vulkan 1.2 core, chained only when the device reports 1.2.
  if (vkGetPhysicalDeviceFeatures2 && vkGetPhysicalDeviceProperties2) {
    VkPhysicalDeviceShaderFloat16Int8Features f16{};
    f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    if (props.apiVersion >= VK_API_VERSION_1_2) f2.pNext = &f16;
    vkGetPhysicalDeviceFeatures2(a->phys, &f2);
    VkPhysicalDeviceSubgroupProperties sg{};
    sg.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sg;
    vkGetPhysicalDeviceProperties2(a->phys, &p2);
    a->features.fp64 = f2.features.shaderFloat64;
    a->features.int64 = f2.features.shaderInt64;
    a->features.fp16 = f16.shaderFloat16;
    a->features.int8 = f16.shaderInt8;
    bool compute = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    a->features.subgroup_size = compute ? static_cast<int>(sg.subgroupSize) : 0;
  }
  char ver[64];
  std::snprintf(ver, sizeof ver, "%u.%u.%u", VK_VERSION_MAJOR(props.apiVersion), VK_VERSION_MINOR(props.apiVersion),
                VK_VERSION_PATCH(props.apiVersion));
  a->desc = flavor.note + std::string(props.deviceName) + ", Vulkan " + ver;
  choose_gemm(*a->r, props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);
  return a;
}

}  // namespace rlx::gpu
