#!/bin/bash
# The splatting training demo on cuda, on the lent H200 (the `device` tool; docs/splatting.md):
# `rlx splat synth` renders VIEWS views of a seeded COUNT-Gaussian scene, `rlx splat train
# --device cuda` re-fits it from a random init (densification on) and reports PSNR on the held-out
# views. Carry build-cuda/devcarry.tar.xz. $OUT gets log.txt.
set -u
source "$(dirname "$0")/common.sh"
device_begin
device_build rlx || exit 1
S=/tmp/rlx-splat-scene
rm -rf "$S"
stamp "synth: ${COUNT:-3000} Gaussians, ${VIEWS:-24} views of ${SIZE:-256} px"
$B/bin/rlx splat synth --out-dir "$S" --count "${COUNT:-3000}" --views "${VIEWS:-24}" --size "${SIZE:-256}" || exit 1
stamp "train on cuda: ${STEPS:-2000} steps from ${INIT:-3000} Gaussians"
$B/bin/rlx splat train --images "$S" --cameras "$S/cameras.json" --steps "${STEPS:-2000}" --init-count "${INIT:-3000}" \
  --device cuda --out /tmp/rlx-splat-fit.ply
stamp "done (rc $?)"
