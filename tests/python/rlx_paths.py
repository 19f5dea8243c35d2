"""Where the tests find the `rlx` binary: RLX_BIN, else BUILD/bin next to the staged BUILD/python/rlx, else PATH."""
import os
import shutil


def rlx_bin():
    if os.environ.get("RLX_BIN"):
        return os.environ["RLX_BIN"]
    try:
        import rlx  # the staged package lives in BUILD/python/rlx; the binary in BUILD/bin
        p = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(rlx.__file__))), "bin", "rlx")
        if os.path.exists(p):
            return p
    except ImportError:
        pass
    return shutil.which("rlx")
