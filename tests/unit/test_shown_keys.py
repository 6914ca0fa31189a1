"""The printed form of a `file:` key (operations.lookup.shown_key, issue 48 item 6) and its
way back to the stored, percent-encoded key (parse_ref)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion_pipeline.operations.lookup import parse_ref, shown_key


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/srv/my notes/café.md", "file:///srv/my notes/café.md"),
        ("/srv/100%.md", "file:///srv/100%.md"),
        ("/srv/日本語 ファイル.txt", "file:///srv/日本語 ファイル.txt"),
        ("/srv/plain.md", "file:///srv/plain.md"),
    ],
)
def test_a_file_key_prints_decoded_and_is_taken_back(path, shown):
    key = Path(path).as_uri()
    assert shown_key(key) == shown
    assert parse_ref(shown) == key  # the printed form names the stored key
    assert parse_ref(key) == key  # and so does the stored one


def test_other_keys_print_as_stored():
    for key in ("s3://bucket/a%20b.md", "app://invoices/42", None):
        assert shown_key(key) == key


def test_bytes_that_are_not_utf8_print_escaped():
    assert shown_key("file:///srv/caf%E9.txt") == "file:///srv/caf\\xe9.txt"
