"""Writes a seeded [2, 8] float32 input for the demo MLP (examples/mlp.rlx)."""
import sys

import numpy as np

rng = np.random.default_rng(0)
np.save(sys.argv[1], rng.standard_normal((2, 8)).astype(np.float32))
