"""tests/browser.py drives a real headless Chromium: local storage set before the page
starts, waiting for text, clicking a dialog away and a screenshot, on a local page that
behaves like Dagster's first-visit pop-up (a modal unless a localStorage key is set)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.browser import Browser

PAGE = """<!doctype html><html><body>
<main>Harness page</main>
<div id="modal" hidden><p>Welcome modal</p><button>Close</button></div>
<script>
  const modal = document.getElementById('modal');
  if (!localStorage.getItem('k')) modal.hidden = false;
  modal.querySelector('button').onclick = () => {
    modal.remove(); document.querySelector('main').append(' (modal closed)');
  };
</script>
</body></html>"""


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def page_url(tmp_path) -> Iterator[str]:
    (tmp_path / "page.html").write_text(PAGE)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page.html"
    finally:
        server.shutdown()
        server.server_close()


def test_harness_sets_local_storage_waits_clicks_and_screenshots(chromium, page_url, tmp_path):
    with Browser() as browser:
        browser.open(page_url)
        browser.wait_for_text("Harness page", "Welcome modal")
        assert browser.click_text("Close") is True
        assert "Welcome modal" not in browser.wait_for_text("(modal closed)")
        assert browser.click_text("No such button") is False

        browser.open(page_url, local_storage={"k": "1"})
        assert "Welcome modal" not in browser.wait_for_text("Harness page")
        assert 'id="modal"' in browser.dom()

        with pytest.raises(AssertionError, match="never there"):
            browser.wait_for_text("never there", timeout=0.5)

        shot = browser.screenshot(tmp_path / "page.png")
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and shot.stat().st_size > 1000
