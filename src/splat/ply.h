// The standard 3DGS .ply layout: binary little-endian vertices with x y z nx ny nz f_dc_0..2
// f_rest_0..(3(K-1)-1) opacity scale_0..2 rot_0..3 (opacity a logit, scales logs, rot w,x,y,z;
// f_rest channel-major: f_rest_{c*(K-1)+k} is coefficient k+1 of channel c).
#pragma once
#include <string>

#include "splat/pipeline.h"

namespace rlx::splat {

Scene read_ply(const std::string& path);  // f32 tensors; "[ply] path: ..." on bad input
void write_ply(const std::string& path, const Scene& s);  // atomic
Scene parse_ply(const std::string& bytes, const std::string& label);

}  // namespace rlx::splat
