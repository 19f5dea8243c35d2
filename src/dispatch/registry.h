// The device registry. Every target registers one entry: a backend folder from its backend.cpp
// (RLX_REGISTER_BACKEND, runtime/backend.h), the code-generation-only targets from devices.cpp.
// `rlx devices`, device_info and device_caps read only this; the core names no device.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "rlx/device.h"

namespace rlx {

// What dispatch needs of a target: its name, its place in the listing and its entry.
// runtime::Backend extends it with the LIR schedule and the compile step.
class DeviceEntry {
 public:
  virtual ~DeviceEntry() = default;
  virtual std::string name() const = 0;
  // Position in `rlx devices` and device_names() (ascending).
  virtual int rank() const = 0;
  // false: registered and usable by name, but not one of the listed targets (the `null` template).
  virtual bool listed() const { return true; }
  // probing=true: loads the driver once and says whether the device executes here.
  // probing=false: the capability set from static tables, status not probed, no library loaded.
  virtual DeviceInfo info(bool probing) const = 0;
  // Dtypes the static set claims but a driver may lack (device_caps' driver_decides).
  virtual DTypeSet driver_dtypes() const { return {}; }
};

// Adds an entry; a second entry of one name fails.
void register_device(std::unique_ptr<DeviceEntry> e);
// The entry of `name` (the built-in ones registered on first use); nullptr when unknown.
const DeviceEntry* find_device(const std::string& name);
// Every registered name, listed or not, by rank.
std::vector<std::string> registered_devices();

// Helpers for capability sets.
// Every MIR primitive for the dtypes it accepts, restricted to `dtypes` (sparse, linear-algebra
// and collective primitives excluded: claimed per device); storage = `dtypes`.
CapabilitySet mir_capabilities(DTypeSet dtypes);
void add_ops(CapabilitySet& c, std::initializer_list<OpKind> ops, DTypeSet s);

}  // namespace rlx
