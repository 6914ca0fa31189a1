"""The suite's opt-out of the resident search process (tests/conftest.py sets it for the
session), for the tests that start `ingest` without the caller's INGEST_* variables: without
it an `ingest search` they run would start a resident process in the user's runtime folder and
leave it running."""

SEARCH_SERVER_OFF = {"INGEST_SEARCH_SERVER": "off"}
