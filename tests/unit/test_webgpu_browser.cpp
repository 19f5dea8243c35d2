// The webgpu device's kernels in a real browser: RLX_WEBGPU_PAGE makes the first run of a program
// compiled for webgpu write a page (WGSL kernels, schedule, weights, inputs); headless Chromium
// (Debian `chromium`, WebGPU on its SwiftShader adapter) opens it, and the outputs it prints are
// compared with cpu. The browser runs as a child in its own process group, ended by that id.
#include <gtest/gtest.h>

#include "test_util.h"  // RLX_REQUIRE
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "rlx/session.h"
#include "rlx/text.h"

using namespace rlx;

namespace {

std::string unbase64(const std::string& s) {
  auto v = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (char c : s) {
    int x = v(c);
    if (x < 0) continue;
    acc = (acc << 6) | x, bits += 6;
    if (bits >= 8) bits -= 8, out += static_cast<char>((acc >> bits) & 0xff);
  }
  return out;
}

// Runs Chromium on `url` until the page prints rlx-done or rlx-error (or 90 s pass); returns stderr.
std::string run_browser(const std::string& url) {
  int fd[2];
  if (pipe(fd) != 0) return "";
  std::string profile = "/tmp/rlx-chromium-" + std::to_string(getpid());
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fd[1], 2), dup2(fd[1], 1);
    close(fd[0]);
    execlp("chromium", "chromium", "--headless=new", "--no-sandbox", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic", "--no-default-browser-check",
           "--disable-default-apps", ("--user-data-dir=" + profile).c_str(), "--enable-logging=stderr", "--v=0",
           "--log-level=0", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader", "--disable-gpu-sandbox", url.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char buf[4096];
  auto t0 = std::chrono::steady_clock::now();
  while (out.find("rlx-done") == std::string::npos && out.find("rlx-error") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(90)) {
    ssize_t n = read(fd[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  kill(-pid, SIGKILL);  // the browser's own process group
  waitpid(pid, nullptr, 0);
  close(fd[0]);
  std::system(("rm -rf " + profile).c_str());
  return out;
}

}  // namespace

TEST(WebGpuBrowser, GeneratedPageMatchesCpuInChromium) {
  RLX_REQUIRE(std::system("chromium --version >/dev/null 2>&1") == 0, "chromium (apt install chromium)");
  Graph g = load_graph_file(std::string(RLX_SOURCE_DIR) + "/examples/mlp.rlx");
  Tensor x(DType::f32, {3, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 23) / 23.0f - 0.4f;
  CompileOptions cpu, web;
  cpu.device = "cpu";
  web.device = "webgpu";
  Tensor want = CompiledModel(g, cpu).run({x})[0];
  const std::string page = "/tmp/rlx-webgpu-page-" + std::to_string(getpid()) + ".html";
  setenv("RLX_WEBGPU_PAGE", page.c_str(), 1);
  bool ran = false;
  try {
    CompiledModel m(g, web);
    m.run({x});
    ran = true;
  } catch (const Error& e) {
    unsetenv("RLX_WEBGPU_PAGE");
    FAIL() << e.what();
  }
  unsetenv("RLX_WEBGPU_PAGE");
  ASSERT_TRUE(ran);
  std::string log = run_browser("file://" + page);
  std::remove(page.c_str());
  ASSERT_EQ(log.find("rlx-error"), std::string::npos) << log.substr(0, 4000);
  size_t at = log.find("rlx-output 0 ");
  ASSERT_NE(at, std::string::npos) << log.substr(0, 4000);
  std::string b64 = log.substr(at + 13, log.find('"', at) - at - 13);
  std::string bytes = unbase64(b64);
  ASSERT_EQ(bytes.size(), want.nbytes());
  const float* got = reinterpret_cast<const float*>(bytes.data());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got[i], want.data<float>()[i], 1e-5) << i;
  std::printf("mlp.rlx in headless Chromium (WebGPU, SwiftShader): %lld outputs match cpu\n",
              static_cast<long long>(want.numel()));
}
