"""A real headless Chromium (Debian's ``chromium``, which ``make test`` installs), driven over the Chrome DevTools
protocol with websocket-client: nothing is downloaded, no driver binary is needed.

    with Chromium() as browser:
        browser.open("http://127.0.0.1:8123/")
        browser.press("2")                     # a real key event, as a keyboard sends it
        browser.value("document.title")
        browser.screenshot(path)
"""
from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,900",
         "--remote-debugging-port=0"]
KEYS = {**{str(d): (f"Digit{d}", 48 + d) for d in range(10)}, "s": ("KeyS", 83)}


class Chromium:
    def __init__(self, timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self._ids = itertools.count(1)

    def __enter__(self) -> "Chromium":
        if not Path(CHROMIUM).exists():
            raise RuntimeError("no chromium: install Debian's chromium (`make test` does: apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="kbench-chromium-")
        self.process = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.__exit__(None, None, None)
                raise RuntimeError("chromium did not start (no DevToolsActivePort)")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.loads(answer.read()) if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=self.timeout_s,
                                                  suppress_origin=True)
        self.call("Page.enable")
        return self

    def __exit__(self, *exc) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params) -> dict:
        """Send one command and return its result (events that arrive meanwhile are dropped)."""
        message_id = next(self._ids)
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def value(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float | None = None):
        """The value of ``expression`` once it is truthy (the page loaded, the next pair shown)."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while time.monotonic() < deadline:
            try:
                found = self.value(expression)
            except RuntimeError:  # the page is navigating
                found = None
            if found:
                return found
            time.sleep(0.05)
        raise TimeoutError(f"not true within {timeout_s or self.timeout_s} s: {expression}")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def reload(self) -> None:
        self.call("Page.reload", ignoreCache=True)
        time.sleep(0.2)
        self.wait_for("document.readyState === 'complete'")

    def press(self, key: str) -> None:
        """One key pressed and released, as the keyboard sends it (keydown with its text, keyup)."""
        code, virtual = KEYS[key]
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, text=key,
                  windowsVirtualKeyCode=virtual, nativeVirtualKeyCode=virtual)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=virtual,
                  nativeVirtualKeyCode=virtual)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
