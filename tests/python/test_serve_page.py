"""The web page `rlx serve` answers at /, driven in headless Chromium (Debian `chromium`) over the
DevTools protocol on a pipe (--remote-debugging-pipe: fd 3 in, fd 4 out, NUL-separated JSON; no
extra package): type sentences, press Compare, read the similarity matrix; send a chat message and
read the streamed answer."""
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from serve_helpers import Server, minilm_dir, smollm2_gguf


def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but Debian chromium is not installed (scripts/bootstrap.sh installs it)")
    pytest.skip("chromium not installed")


class DevTools:
    def __init__(self, exe):
        self.dir = tempfile.mkdtemp(prefix="rlx-chromium-")
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4.
        def fds():
            a, b = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.dir}", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._id, self.session = b"", 0, None

    def call(self, method, session=True, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._r, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def open(self, url):
        target = self.call("Target.createTarget", session=False, url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", session=False, targetId=target, flatten=True)["sessionId"]
        self.call("Page.navigate", url=url)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, timeout=40):
        end = time.time() + timeout
        while time.time() < end:
            if self.eval(expr):
                return True
            time.sleep(0.1)
        return False

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self._w)
        os.close(self._r)
        shutil.rmtree(self.dir, ignore_errors=True)


def test_page_similarity_matrix_and_streaming_chat():
    exe = chromium()
    s = Server([f"minilm={minilm_dir()}", f"smollm2={smollm2_gguf()}"], "--quiet")
    b = DevTools(exe)
    try:
        b.open(s.url + "/")
        assert b.wait("document.body && document.body.dataset.ready === '1'")
        assert b.eval("document.getElementById('embed-model').value") == "minilm"
        # Type three sentences (the input event a keyboard would fire), press Compare.
        b.call("Runtime.evaluate", expression="document.getElementById('sentences').focus()")
        b.call("Input.insertText", text="A man is playing a guitar.\nSomeone plays an instrument.\nThe stock market fell today.")
        b.eval("document.getElementById('embed-btn').click()")
        assert b.wait("document.body.dataset.embedDone === '1'")
        m = b.eval("[...document.querySelectorAll('#matrix td')].map(c => [+c.dataset.i, +c.dataset.j, +c.textContent])")
        cell = {(i, j): v for i, j, v in m}
        assert len(cell) == 9
        assert all(abs(cell[(i, i)] - 1) < 1e-3 for i in range(3))
        assert cell[(0, 1)] == cell[(1, 0)]
        assert cell[(0, 1)] > cell[(0, 2)] + 0.2  # guitar ~ instrument, not ~ stock market
        # Chat: type a question, press Enter-equivalent Send; the answer streams in.
        b.call("Runtime.evaluate", expression="document.getElementById('chat-input').focus()")
        b.call("Input.insertText", text="What is the capital of France?")
        b.eval("document.getElementById('chat-send').click()")
        assert b.wait("document.body.dataset.chatDone === '1'", timeout=60)
        answer = b.eval("document.querySelector('#chat-log .assistant').textContent")
        assert "Paris" in answer
        assert int(b.eval("document.body.dataset.chatPieces")) > 1
    finally:
        b.close()
        rc = s.terminate()
        s.close()
    assert rc == 0
