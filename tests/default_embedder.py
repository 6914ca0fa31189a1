"""The embedder users get by default, for the tests of what they search.

The suite indexes without vectors (tests/conftest.py sets INGEST_EMBEDDER=none: vectors made
the corpus-heavy tests slower). The search and sync tests take this module's fixture instead,
so they search as users do (hybrid, WordLlama): a ranking change that surfaces filler fails
one of them (issue 60). A test there that needs no vectors sets INGEST_EMBEDDER itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def default_embedder() -> Iterator[None]:
    """INGEST_EMBEDDER unset for the whole module: its module-scoped corpora index with the
    default model too (an autouse fixture runs before the others of its scope)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("INGEST_EMBEDDER", raising=False)
        yield
