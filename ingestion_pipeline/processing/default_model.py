"""Imported by the worker's fork server when the embedder is the default model (wordllama,
static_embedder.StaticEmbedder.child_modules): loads it once, so that every parsing child
forked after has it (copy-on-write) instead of loading it again.

A model that does not load here is left alone: each child then tries, and a job whose
child cannot load it fails with the reason (the fork server must never fail to start).
"""

from __future__ import annotations

import contextlib

from ingestion_pipeline.processing.static_embedder import StaticEmbedder, wordllama_model

with contextlib.suppress(Exception):
    StaticEmbedder(wordllama_model()).warm()
