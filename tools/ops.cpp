// `rlx ops`: runs the conformance harness on every device that executes here and, with --write,
// regenerates the support matrix (docs/ops.md).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "commands.h"
#include "progress.h"
#include "rlx/conformance.h"

namespace rlx::cli {

int cmd_ops(const Args& a) {
  std::string dev = a.get("device");
  std::vector<ConformanceRow> rows;
  {
    Progress bar("rlx ops " + dev + ": op x dtype cases", a.has("quiet"));
    rows = run_conformance(dev, true, [&](size_t n, size_t total) { bar.update(n, total); });
  }
  int pass = 0, fails = 0, other = 0;
  for (auto& r : rows) {
    if (r.status == "pass") ++pass;
    else if (r.status == "FAIL") ++fails;
    else ++other;
    if (r.status != "pass" && !a.has("quiet"))
      std::printf("%-16s %-5s %-10s %s %s\n", r.op.c_str(), r.dtype.c_str(),
                  std::string(dispatch_path_name(r.path)).c_str(), r.status.c_str(), r.detail.c_str());
  }
  std::printf("conformance on %s: %d passed, %d failed, %d not run/unsupported (of %zu op x dtype cases)\n",
              dev.c_str(), pass, fails, other, rows.size());
  if (a.has("write")) {
    std::string path = a.get("write");
    std::string md = support_matrix_markdown(dev == "cpu" ? rows : run_conformance("cpu", true));
    std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp);
      RLX_CHECK(f.good(), "[cli] cannot write ", tmp);
      f << md;
    }
    RLX_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[cli] cannot rename ", tmp, " to ", path);
    std::printf("wrote %s\n", path.c_str());
  }
  return fails ? 1 : 0;
}

}  // namespace rlx::cli
