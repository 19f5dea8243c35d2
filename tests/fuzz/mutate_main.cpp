// A small mutation fuzzer that drives the same LLVMFuzzerTestOneInput targets as libFuzzer, built with the
// normal compiler (no clang, no coverage feedback), so CI can afford a short randomized run on every push.
// It replays every seed, then mutates seeds (bit flips, interesting bytes, truncation, chunk copies,
// insertions, splices) until the time budget is spent. A crash or an escaped exception kills the process;
// the input that did it is written first to $RLX_FUZZ_CRASH_DIR (default: the working directory).
//   usage: fuzz_quick_<format> SECONDS SEED_DIR... [--seed N]
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<uint8_t> g_current;  // the input being run, saved by the crash handler
char g_crash_path[4096] = "fuzz-crash.bin";

void save_current_and_die(int sig) {
  int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t off = 0;
    while (off < g_current.size()) {
      ssize_t w = ::write(fd, g_current.data() + off, g_current.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    ::close(fd);
  }
  const char msg[] = "fuzz: crash; input saved (see RLX_FUZZ_CRASH_DIR)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run_one(const std::vector<uint8_t>& in) {
  g_current = in;
  LLVMFuzzerTestOneInput(g_current.data(), g_current.size());
}

std::vector<uint8_t> mutate(std::vector<uint8_t> d, const std::vector<std::vector<uint8_t>>& seeds, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x10, 0x40};
  int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 6) {
      case 0:  // flip one bit
        if (!d.empty()) d[pick(d.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // an interesting byte
        if (!d.empty()) d[pick(d.size())] = interesting[rng() % sizeof interesting];
        break;
      case 2:  // truncate
        if (!d.empty()) d.resize(pick(d.size()));
        break;
      case 3: {  // copy a chunk over another place
        if (d.size() < 2) break;
        size_t a = pick(d.size()), b = pick(d.size()), n = 1 + pick(std::min<size_t>(64, d.size() - std::max(a, b)));
        std::memmove(d.data() + b, d.data() + a, std::min(n, d.size() - std::max(a, b)));
        break;
      }
      case 4: {  // insert random bytes
        size_t at = pick(d.size() + 1), n = 1 + pick(16);
        std::vector<uint8_t> r(n);
        for (auto& x : r) x = static_cast<uint8_t>(rng());
        d.insert(d.begin() + static_cast<std::ptrdiff_t>(at), r.begin(), r.end());
        break;
      }
      default: {  // splice: our prefix + another seed's suffix
        const auto& o = seeds[pick(seeds.size())];
        if (o.empty()) break;
        size_t cut = pick(d.size() + 1), from = pick(o.size());
        d.resize(cut);
        d.insert(d.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
        break;
      }
    }
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SECONDS SEED_DIR... [--seed N]\n", argv[0]);
    return 2;
  }
  double seconds = std::atof(argv[1]);
  uint64_t seed = 1;
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
      continue;
    }
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(a, ec)) {
      if (!e.is_regular_file()) continue;
      std::ifstream f(e.path(), std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
  }
  if (seeds.empty()) seeds.emplace_back();  // start from the empty input
  if (const char* dir = std::getenv("RLX_FUZZ_CRASH_DIR"))
    std::snprintf(g_crash_path, sizeof g_crash_path, "%s/fuzz-crash.bin", dir);
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, save_current_and_die);
  // Cap the address space (RLX_FUZZ_MEM_MB, default 4096) so an input that makes a parser allocate what a
  // header claims fails fast as a crash here instead of exhausting the machine.
  {
    const char* mb = std::getenv("RLX_FUZZ_MEM_MB");
    rlim_t cap = static_cast<rlim_t>(mb ? std::atoll(mb) : 4096) << 20;
    struct rlimit rl{cap, cap};
    setrlimit(RLIMIT_AS, &rl);
  }

  for (const auto& s : seeds) run_one(s);
  std::mt19937_64 rng(seed);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t runs = seeds.size();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    run_one(mutate(seeds[rng() % seeds.size()], seeds, rng));
    ++runs;
  }
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %llu inputs (%zu seeds) in %.1f s, %.0f/s, seed %llu, no crash\n", argv[0],
              static_cast<unsigned long long>(runs), seeds.size(), el, runs / std::max(el, 1e-9),
              static_cast<unsigned long long>(seed));
  return 0;
}
