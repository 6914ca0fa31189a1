"""A fresh head database holding the relevance corpus, indexed by the worker."""

import pytest

from .corpus import index_pages, page_names


@pytest.fixture
def relevance_db(db_url: str) -> str:
    assert index_pages(db_url) == len(page_names())
    return db_url
