// runtime/subprocess.h: tools run without a shell, their output and exit status come back.
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/subprocess.h"

namespace rlx {

TEST(Subprocess, FindsToolsOnPathAndRejectsMissingOnes) {
  std::string sh = find_on_path("sh");
  ASSERT_FALSE(sh.empty());
  EXPECT_EQ(sh.front(), '/');
  EXPECT_EQ(find_on_path(sh), sh);  // a path is returned as is when executable
  EXPECT_EQ(find_on_path("rlx-no-such-tool-here"), "");
  EXPECT_EQ(find_on_path("/nonexistent/dir/sh"), "");
}

TEST(Subprocess, RunToolCapturesBothStreamsAndTheExitStatus) {
  std::string out;
  // argv reaches the tool unchanged: the quote and the space are not interpreted by any shell
  int rc = run_tool({find_on_path("sh"), "-c", "printf '%s|' \"$0\"; echo err >&2; exit 3", "a 'b' c"}, out);
  EXPECT_EQ(rc, 3);
  EXPECT_NE(out.find("a 'b' c|"), std::string::npos) << out;
  EXPECT_NE(out.find("err"), std::string::npos) << out;
  std::string none;
  EXPECT_EQ(run_tool({"/nonexistent/tool"}, none), -1);
}

TEST(Subprocess, WriteAllAndReadAllMoveEveryByte) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  std::string msg(3000, 'x');
  msg[1234] = 'y';
  ASSERT_TRUE(write_all(p[1], msg.data(), msg.size()));
  ::close(p[1]);
  std::string back(msg.size(), '\0');
  ASSERT_TRUE(read_all(p[0], back.data(), back.size()));
  EXPECT_EQ(back, msg);
  char extra;
  EXPECT_FALSE(read_all(p[0], &extra, 1));  // EOF
  ::close(p[0]);
}

TEST(Subprocess, PythonPackageDirFindsAnInstalledPackageOnly) {
  ASSERT_FALSE(find_on_path("python3").empty()) << "python3 is part of the build requirements";
  std::string d = python_package_dir("json");  // in the standard library everywhere
  EXPECT_NE(d.find("json"), std::string::npos) << d;
  EXPECT_EQ(python_package_dir("rlx_no_such_package_xyz"), "");
}

}  // namespace rlx
