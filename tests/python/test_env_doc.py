"""docs/env.md lists every RLX_* environment switch the tree reads (scripts/check_env_doc.py)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_env_doc_is_complete():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_env_doc.py")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_file_sizes_stay_under_the_limit():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_file_sizes.py"), "--limit", "800"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
