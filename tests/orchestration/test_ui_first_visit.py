"""The Dagster UI that `ingest ui` serves opens without the first-visit dialog ("Join the
Dagster community"): the checkout's dagster.yaml, which `ingest ui` copies into Dagster's
home, says `nux: enabled: false`, so the webserver answers the UI's ShouldShowNux query
with false. The browser here has no communityNux key in its local storage (the other UI
tests set it: tests/browser.py), so only that answer keeps the dialog away. The screenshot
is kept (the `artifacts` fixture: test-artifacts/ at the checkout's root)."""

from __future__ import annotations

import signal

from ingestion_pipeline.db import embedded
from tests.browser import Browser
from tests.orchestration.live_dagster import BIN, LiveDagster, clean_env

DIALOG_TITLE = "Join the Dagster community"
# CommunityNux.tsx (dagster-webserver's UI): once the answer says to show it, the dialog opens
# 1 s later. Three times that on the page's own clock, after the answer arrived, covers it.
DIALOG_DELAY_MS = 1000
DIALOGS = "document.querySelectorAll('[role=dialog], .bp5-dialog, .bp4-dialog').length"


def test_the_ui_of_ingest_ui_opens_without_the_community_dialog(chromium, artifacts, tmp_path):
    data = tmp_path / "data"
    live = LiveDagster.start([str(BIN / "ingest"), "ui"], env=clean_env(data), log_path=tmp_path / "ui.log")
    try:
        assert live.graphql("{ shouldShowNux }") == {"shouldShowNux": False}
        with Browser() as browser:
            browser.record_network()
            browser.open(f"http://127.0.0.1:{live.port}/assets")  # no local storage set
            browser.wait_for_answer("ShouldShowNux")  # the UI asked, and has its answer
            browser.wait_for_text("document_index", timeout=90)
            browser.wait_page_milliseconds(3 * DIALOG_DELAY_MS)
            shot = browser.screenshot(artifacts / "ui-first-visit.png")
            text = browser.wait_for_text("document_index")
            assert DIALOG_TITLE not in text and DIALOG_TITLE not in browser.dom()
            assert browser.evaluate(DIALOGS) == 0
        assert shot.stat().st_size > 10_000
    finally:
        live.proc.send_signal(signal.SIGINT)
        try:
            live.proc.wait(timeout=30)
        finally:
            if live.proc.poll() is None:
                live.kill_everything()
            embedded.stop(data)
