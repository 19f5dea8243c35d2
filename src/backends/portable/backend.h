// The Backend of a device that runs on the portable GPU executor (executable.cpp) over one of the
// APIs in api.h: its entry is portable_gpu_device_info's (device_info.cpp), its executable the
// shared one over api_for(name). Each such device's folder registers one in its backend.cpp.
#pragma once
#include <string>
#include <utility>

#include "backends/portable/api.h"
#include "rlx/device.h"
#include "runtime/backend.h"

namespace rlx::gpu {

class PortableBackend : public Backend {
 public:
  PortableBackend(std::string name, int rank) : name_(std::move(name)), rank_(rank) {}
  std::string name() const override { return name_; }
  int rank() const override { return rank_; }
  DeviceInfo info(bool probing) const override { return portable_gpu_device_info(name_, probing); }
  DTypeSet driver_dtypes() const override { return portable_gpu_driver_dtypes(name_); }
  std::unique_ptr<Executable> compile(const LirProgram& p) const override;  // executable.cpp

 private:
  std::string name_;
  int rank_;
};

}  // namespace rlx::gpu
