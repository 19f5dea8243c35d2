// The disk cache's size cap (src/runtime/disk_cache.h): least recently used entries go first, a
// hit (cache_touch) makes an entry recent, the cap is respected across the cpu, cuda and spirv
// sub-caches, the entry just inserted, writes in progress and files that are not cache entries are
// kept, and several evicting at once never double-count or fail on a file another one removed.
// Vulkan's SPIR-V goes through the same cache (RLX_CACHE_DIR, RLX_CACHE_MAX_MB).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/session.h"
#include "runtime/disk_cache.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace rlx;
using rlx_test::ScopedEnv;

namespace {

// A fresh, empty folder for one test.
std::string fresh_root(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("rlx_cache_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Writes `bytes` bytes at root/rel and sets its mtime to `age_s` seconds ago.
std::string put_file(const std::string& root, const std::string& rel, size_t bytes, double age_s) {
  fs::path p = fs::path(root) / rel;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  struct timespec ts[2];
  ts[0] = ts[1] = {now.tv_sec - static_cast<time_t>(age_s), now.tv_nsec};
  EXPECT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0) << p;
  return p.string();
}

// A cache entry: root/sub/<hex64(key)><suffix> (suffix ".so", ".cubin", ".so.tmp123.0", ...).
std::string put(const std::string& root, const std::string& sub, uint64_t key, const std::string& suffix,
                size_t bytes, double age_s) {
  return put_file(root, sub + "/" + hex64(key) + suffix, bytes, age_s);
}

bool exists(const std::string& p) { return fs::exists(p); }

}  // namespace

TEST(DiskCache, EvictsLeastRecentlyUsedFirstAndTouchMakesRecent) {
  std::string root = fresh_root("lru");
  std::string a = put(root, "cpu", 1, ".so", 100, 400), b = put(root, "cuda", 2, ".cubin", 100, 300),
              c = put(root, "spirv", 3, ".spv", 100, 200), d = put(root, "cuda", 4, ".cubin", 100, 100);
  cache_touch(a);  // a disk hit on the oldest: now the most recently used
  EvictStats st = cache_evict(root, 250);
  EXPECT_EQ(st.removed, 2);
  EXPECT_EQ(st.bytes_before, 400u);
  EXPECT_EQ(st.bytes_after, 200u);
  EXPECT_TRUE(exists(a));
  EXPECT_FALSE(exists(b));  // the two least recently used, across the sub-caches
  EXPECT_FALSE(exists(c));
  EXPECT_TRUE(exists(d));
  st = cache_evict(root, 250);  // within the cap: nothing to do
  EXPECT_EQ(st.removed, 0);
  EXPECT_EQ(st.bytes_after, 200u);
  cache_touch(b);  // a vanished entry: no error, nothing created
  EXPECT_FALSE(exists(b));
  fs::remove_all(root);
}

TEST(DiskCache, CapRespectedKeepsNewEntryWritesInProgressAndOtherFiles) {
  std::string root = fresh_root("cap");
  std::vector<std::string> old;
  for (int i = 0; i < 10; ++i) old.push_back(put(root, "cpu", 100 + i, ".so", 1000, 1000 + i));
  std::string writing = put(root, "cpu", 7, ".so.tmp123.0", 1000, 5);      // another process's write, now
  std::string stale = put(root, "cpu", 8, ".tmp99.3.cpp", 1000, 3 * 3600);  // left by a crash hours ago
  std::string big = put(root, "cuda", 9, ".cubin", 5000, 0);                // just inserted, alone over the cap
  // Not cache entries (RLX_CACHE_DIR may be a folder with other things): never counted or removed.
  std::string mine = put_file(root, "cpu/notes.txt", 1000, 9000), top = put_file(root, "old.bin", 1000, 9000),
              other = put(root, "pocl", 10, ".spv", 1000, 9000);  // a sub-folder that is no cache of ours
  EvictStats st = cache_evict(root, 4000, big);
  EXPECT_TRUE(exists(big));
  EXPECT_TRUE(exists(writing));
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(mine) && exists(top) && exists(other));
  for (auto& p : old) EXPECT_FALSE(exists(p)) << p;
  EXPECT_EQ(st.removed, 11);
  EXPECT_EQ(st.bytes_before, 17000u);
  EXPECT_EQ(st.bytes_after, 6000u);  // the kept two: over the cap, but nothing else may go

  // Over a cap that holds some: the newest old entries survive, the total is within the cap.
  std::string root2 = fresh_root("cap2");
  std::vector<std::string> e;
  for (int i = 0; i < 10; ++i) e.push_back(put(root2, "cpu", i, ".so", 1000, 100 - i));  // e[9] newest
  st = cache_evict(root2, 3500);
  EXPECT_EQ(st.bytes_after, 3000u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(exists(e[i]), i >= 7) << i;
  fs::remove_all(root);
  fs::remove_all(root2);
}

// A cache root whose path itself contains ".tmp" (RLX_CACHE_DIR=~/.tmp/rlx): only a file's own name
// marks a write in progress, so old entries under such a root are still evicted.
TEST(DiskCache, TmpInCacheRootPathDoesNotBlockEviction) {
  std::string base = fresh_root("tmproot");
  std::string root = base + "/.tmp/rlx";
  std::vector<std::string> old;
  for (int i = 0; i < 4; ++i) old.push_back(put(root, "cpu", 200 + i, ".so", 1000, 1000 + i));
  std::string writing = put(root, "cpu", 9, ".so.tmp5.0", 1000, 5);  // a real write in progress
  EvictStats st = cache_evict(root, 1500);
  EXPECT_EQ(st.removed, 4);
  EXPECT_EQ(st.bytes_before, 5000u);
  EXPECT_EQ(st.bytes_after, 1000u);
  for (auto& p : old) EXPECT_FALSE(exists(p)) << p;
  EXPECT_TRUE(exists(writing));
  fs::remove_all(base);
}

TEST(DiskCache, ConcurrentEvictionsToleratesVanishedFiles) {
  std::string root = fresh_root("race");
  const int n = 300;
  std::vector<std::string> files;
  for (int i = 0; i < n; ++i) files.push_back(put(root, i % 2 ? "cpu" : "cuda", i, ".so", 100, 1000 - i));
  std::atomic<int> removed{0}, saw_all{0}, ready{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      ++ready;
      while (ready.load() < 4) std::this_thread::yield();  // start together
      EvictStats st = cache_evict(root, 5000);  // scans see files the others then remove
      EXPECT_LE(st.bytes_after, 5000u);
      removed += st.removed;
      saw_all += st.bytes_before == 100u * n;
    });
  for (auto& t : ts) t.join();
  std::printf("%d of 4 concurrent evictions listed all %d files (the rest started after some removals)\n",
              saw_all.load(), n);
  int left = 0;
  for (auto& f : files) left += exists(f);
  EXPECT_EQ(left, 50);
  EXPECT_EQ(removed.load(), n - left);  // each file counted once, by the one that removed it
  for (int i = n - 50; i < n; ++i) EXPECT_TRUE(exists(files[i])) << i;  // the newest 50 are left
  // A root that does not exist (another process removed the whole cache): nothing, no error.
  fs::remove_all(root);
  EvictStats st = cache_evict(root, 0);
  EXPECT_EQ(st.removed, 0);
  EXPECT_EQ(st.bytes_before, 0u);
}

TEST(DiskCache, MaxMbFromEnvironmentAndInsertEvictsCacheRoot) {
  {
    ScopedEnv e("RLX_CACHE_MAX_MB", nullptr);
    EXPECT_EQ(cache_max_bytes(), kDefaultCacheMaxMb << 20);
  }
  {
    ScopedEnv e("RLX_CACHE_MAX_MB", "3");
    EXPECT_EQ(cache_max_bytes(), 3u << 20);
  }
  {
    ScopedEnv e("RLX_CACHE_MAX_MB", "lots");
    EXPECT_EQ(cache_max_bytes(), kDefaultCacheMaxMb << 20);
  }
  std::string root = fresh_root("insert");
  ScopedEnv dir("RLX_CACHE_DIR", (root + "/").c_str());  // a trailing slash: paths still compare equal
  std::string a = put(root, "cpu", 1, ".so", 600 << 10, 50), b = put(root, "cuda", 2, ".cubin", 600 << 10, 40);
  std::string fresh = cache_dir("cpu") + "/" + hex64(3) + ".so";  // as the JIT names it: <root>//cpu/...
  put(root, "cpu", 3, ".so", 600 << 10, 60);                        // the oldest mtime, but just inserted
  {
    ScopedEnv cap("RLX_CACHE_MAX_MB", "0");  // 0: no cap
    cache_inserted(fresh);
    EXPECT_TRUE(exists(a) && exists(b) && exists(fresh));
  }
  ScopedEnv cap("RLX_CACHE_MAX_MB", "1");
  cache_inserted(fresh);
  EXPECT_FALSE(exists(a));
  EXPECT_FALSE(exists(b));
  EXPECT_TRUE(exists(fresh));
  fs::remove_all(root);
}

// vulkan's glslc output is a shared-cache entry: written under $RLX_CACHE_DIR/spirv as
// <16 hex digits>.spv, and its insert applies RLX_CACHE_MAX_MB to the whole cache root.
TEST(DiskCache, VulkanSpirvGoesToCacheDirUnderTheCap) {
  const DeviceInfo& vk = device_info("vulkan");
  if (!vk.can_execute()) GTEST_SKIP() << "vulkan cannot run here: " << vk.reason;
  std::string root = fresh_root("spirv");
  ScopedEnv dir("RLX_CACHE_DIR", root.c_str());
  ScopedEnv cap("RLX_CACHE_MAX_MB", "1");
  std::string old = put(root, "cpu", 1, ".so", 2 << 20, 600);  // least recently used, alone over the cap
  Graph g;
  Builder b(g);
  auto x = b.input("x", DType::f32, {5, 41});  // a shape no other test uses: kernels new to this process
  b.output(b.add(b.mul(x, x), x));
  CompileOptions o;
  o.device = "vulkan";
  CompiledModel m(g, o);
  Tensor in = rlx_test::sine_tensor(DType::f32, {5, 41}, 0.37, 0.1, 2.0);
  Tensor out = m.run(std::vector<Tensor>{in}).at(0);
  for (int64_t i = 0; i < in.numel(); ++i) {
    double v = in.get(i);
    ASSERT_NEAR(out.get(i), v * v + v, 1e-5) << i;
  }
  int spv = 0;
  for (auto& e : fs::directory_iterator(root + "/spirv")) {
    std::string n = e.path().filename().string();
    EXPECT_EQ(n.find(".tmp"), std::string::npos) << "temporary left behind: " << n;
    spv += n.size() == 20 && n.substr(16) == ".spv" && e.file_size() > 0;
  }
  EXPECT_GE(spv, 1) << "no SPIR-V written under " << root << "/spirv";
  EXPECT_FALSE(exists(old)) << "the vulkan insert did not apply RLX_CACHE_MAX_MB";
  fs::remove_all(root);
}
