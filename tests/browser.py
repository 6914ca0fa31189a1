"""A tiny headless-Chromium driver for UI tests (Debian `chromium`; .ci/run installs it).

It speaks the Chrome DevTools Protocol over `--remote-debugging-pipe`: the browser reads
commands on its fd 3 and writes answers and events on its fd 4, each a JSON message ended
by a NUL byte. A pipe needs no port, no websocket library and no extra package, and it
closes when the browser dies, so a crash shows up as an error rather than a hang."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.tools import find_tool

# localStorage keys that keep Dagster 1.13's UI free of first-visit pop-ups, so that a
# screenshot shows the page and not a dialog (values as the UI itself writes them: JSON).
DAGSTER_DISMISSED_POPUPS: dict[str, str] = {
    # The "Join the Dagster community" dialog (email sign-up, "Skip" button) opens one
    # second after the first page load when the origin is http://127.0.0.1 or
    # http://localhost, unless this key is set or the webserver answers the UI's
    # ShouldShowNux query with false: when its instance's dagster.yaml says `nux: enabled:
    # false` (ours does: `ingest ui` serves a UI without it, test_ui_first_visit.py), or once
    # $DAGSTER_HOME/.nux/nux.yaml exists (~/.dagster without DAGSTER_HOME; written when a
    # user dismisses the dialog). The other UI tests set the key all the same: their screenshots
    # then do not depend on the instance's configuration.
    "communityNux": '"1"',
}


def chromium_path() -> str | None:
    """The Debian launcher (it adds the distribution's flags), else chromium-browser."""
    return find_tool("chromium") or find_tool("chromium-browser")


class Browser:
    """One headless Chromium with one page; a context manager that always stops it."""

    def __init__(self, *, call_timeout: float = 30):
        self.call_timeout = call_timeout
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []

    def __enter__(self) -> Browser:
        binary = chromium_path()
        if binary is None:
            raise RuntimeError("chromium is not installed (apt-get install chromium)")
        self._profile = tempfile.mkdtemp(prefix="ingest-chromium-")
        self._stderr = open(Path(self._profile) / "stderr.log", "w+b")  # a file cannot fill up and block it
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def on_fds_3_and_4() -> None:
            # In the child, before exec (close_fds then closes all but 3 and 4): copy both ends
            # above 4 first, so that putting one on fd 3 or 4 cannot overwrite the other.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_read, answers_write)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self._process = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}",
                "--window-size=1400,1000",
                "--no-first-run",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._stderr,
            stderr=self._stderr,
            pass_fds=(3, 4),
            preexec_fn=on_fds_3_and_4,
            start_new_session=True,
        )
        os.close(commands_read)
        os.close(answers_write)  # only the browser holds the write end: EOF means it died
        try:  # a page of our own: the one for about:blank may not be listed yet
            target = self._call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self._call("Page.enable", session=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._process.poll() is None:
                self._call("Browser.close", timeout=5)
                self._process.wait(timeout=5)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, 9)  # helpers that outlive the browser too
            self._process.wait()
            os.close(self._commands)
            os.close(self._answers)
            self._stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def open(self, url: str, *, local_storage: dict[str, str] | None = None) -> None:
        """Navigate to `url` and wait for its load event. With `local_storage`, visit the
        origin first and set the keys there, so that the app finds them when it starts."""
        if local_storage:
            parts = urlsplit(url)
            self._navigate(f"{parts.scheme}://{parts.netloc}/")
            for key, value in local_storage.items():
                self._evaluate(f"localStorage.setItem({json.dumps(key)}, {json.dumps(value)})")
        self._navigate(url)

    def wait_for_text(self, *needles: str, timeout: float = 60) -> str:
        """Poll the page's visible text until it holds every needle (the UI renders after
        its queries answer, so there is no single event to wait for)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self._evaluate("document.body ? document.body.innerText : ''") or ""
            missing = [needle for needle in needles if needle not in text]
            if not missing:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"not on the page after {timeout}s: {missing}; its text ends with:\n{text[-2000:]}"
                )
            time.sleep(0.25)

    def record_network(self) -> None:
        """Have the page's network events reported (they persist across navigations), for
        wait_for_answer."""
        self._call("Network.enable", session=True)

    def wait_for_answer(self, needle: str, timeout: float = 60) -> None:
        """Until the page has received the answer to a request whose URL or body holds
        `needle` (the UI's GraphQL queries name their operation in the body), made since the
        last navigation. Needs record_network() before that navigation."""
        deadline = time.monotonic() + timeout
        requests: set[str] = set()
        seen = 0
        while True:
            for event in self._events[seen:]:
                params = event.get("params", {})
                if event.get("method") == "Network.requestWillBeSent":
                    request = params.get("request", {})
                    if needle in request.get("url", "") or needle in request.get("postData", ""):
                        requests.add(params["requestId"])
                elif event.get("method") == "Network.loadingFinished" and params.get("requestId") in requests:
                    return
            seen = len(self._events)
            self._events.append(self._receive(deadline, f"the answer to {needle!r}"))

    def wait_page_milliseconds(self, milliseconds: int) -> None:
        """Let the page's own timers run for this long: a timer it set before now with a
        shorter delay fires first (the clock a UI's delayed dialog waits on)."""
        self._evaluate(f"new Promise(done => setTimeout(done, {int(milliseconds)}))", await_promise=True)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page."""
        return self._evaluate(expression)

    def dom(self) -> str:
        return self._evaluate("document.documentElement.outerHTML")

    def table_rows(self) -> list[list[str]]:
        """The text of each table row's cells, for rows that have cells (a metadata table's
        key, timestamp and value)."""
        return self._evaluate("""[...document.querySelectorAll('tr')]
            .map(row => [...row.querySelectorAll('td')].map(cell => cell.innerText.trim()))
            .filter(cells => cells.length > 0)""")

    def click_text(self, text: str) -> bool:
        """Click the first button or link whose text is `text` (to dismiss a dialog)."""
        return self._evaluate(f"""(() => {{
            const found = [...document.querySelectorAll('button, a')]
                .find(e => e.innerText.trim() === {json.dumps(text)});
            if (found) found.click();
            return Boolean(found);
        }})()""")

    def screenshot(self, path: Path) -> Path:
        data = self._call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def _navigate(self, url: str) -> None:
        self._events.clear()
        answer = self._call("Page.navigate", session=True, url=url)
        if answer.get("errorText"):
            raise RuntimeError(f"could not open {url}: {answer['errorText']}")
        self._wait_for_event("Page.loadEventFired")

    def _evaluate(self, expression: str, *, await_promise: bool = False):
        answer = self._call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=await_promise
        )
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression!r} failed in the page: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def _call(self, method: str, *, session: bool = False, timeout: float | None = None, **params) -> dict:
        """Send one command and read messages until its answer; events read meanwhile are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        try:
            os.write(self._commands, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(f"chromium is gone (during {method}){self._stderr_tail()}") from None
        deadline = time.monotonic() + (timeout or self.call_timeout)
        while True:
            received = self._receive(deadline, method)
            if received.get("id") == self._next_id:
                if "error" in received:
                    raise RuntimeError(f"{method} failed: {received['error']}")
                return received["result"]
            if "method" in received:
                self._events.append(received)

    def _wait_for_event(self, method: str) -> None:
        deadline = time.monotonic() + self.call_timeout
        while not any(event.get("method") == method for event in self._events):
            self._events.append(self._receive(deadline, method))

    def _receive(self, deadline: float, waiting_for: str) -> dict:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._answers], [], [], remaining)[0]:
                raise RuntimeError(f"chromium did not answer {waiting_for} in time{self._stderr_tail()}")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium died (waiting for {waiting_for}){self._stderr_tail()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _stderr_tail(self) -> str:
        self._stderr.flush()
        tail = (Path(self._profile) / "stderr.log").read_bytes()[-3000:].decode(errors="replace")
        return f"; exit status {self._process.poll()}; chromium's stderr ends with:\n{tail}"
