"""Searching the committed index: lexical (full text), vector (embeddings) and hybrid."""

from .model import MODES, Hit, Mode

__all__ = ["MODES", "Hit", "Mode"]
