"""Every search test runs with the default embedder (tests/default_embedder.py)."""

from tests.default_embedder import default_embedder

__all__ = ["default_embedder"]
