"""Which documents a user means, as the commands take them: a document id, a source key
(`file:///…`, `s3://…`, a key an app named), or a local path (made into its `file:` key).
Keys are looked up among the live documents of one collection."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote_to_bytes, urlsplit
from uuid import UUID

if TYPE_CHECKING:
    from ingestion_pipeline.db.rpc import IngestionRpc


def parse_ref(text: str) -> UUID | str:
    """A document id, or the key `text` names: as given when it has a scheme (a `file:` key
    as `shown_key` prints it, decoded, is encoded again), else the key of the local path."""
    # Imported here: `shown_key`, which `ingest search` prints every hit with, needs none of
    # the enqueueing (the RPC client, the file selection).
    from ingestion_pipeline.operations.enqueue import source_key_of

    try:
        return UUID(text.strip())
    except ValueError:
        pass
    if text.startswith("file:") and _NOT_ENCODED.search(text):  # as `shown_key` prints it
        return source_key_of(Path(os.fsdecode(unquote_to_bytes(urlsplit(text).path))))
    if "://" in text or text.startswith("file:"):
        return text
    return source_key_of(Path(text))


# What a percent-encoded `file:` key never holds: white space, a letter beyond ASCII, a `%`
# that starts no escape.
_NOT_ENCODED = re.compile(r"[\s\u0080-\U0010ffff]|%(?![0-9A-Fa-f]{2})")


def shown_key(key: str | None) -> str | None:
    r"""A source key as the commands print it: a `file:` key with its percent-escapes undone
    (`file:///srv/docs/a b/café.md`, not `a%20b/caf%C3%A9.md`; bytes that are not UTF-8 as
    `\xNN`), other keys as they are. Display only: `parse_ref` takes it back to the stored key."""
    if key is None or not key.startswith("file:") or "%" not in key:
        return key
    parts = urlsplit(key)
    path = unquote_to_bytes(parts.path).decode("utf-8", "backslashreplace")
    return f"file://{parts.netloc}{path}"


@dataclass
class Resolved:
    document_ids: list[UUID] = field(default_factory=list)  # ids as given, then the keys' documents
    missing_keys: list[str] = field(default_factory=list)  # keys no live document of the collection has
    keys: dict[UUID, str] = field(default_factory=dict)  # the key of each document found by key


def resolve_refs(rpc: IngestionRpc, refs: Iterable[str], collection: str) -> Resolved:
    """Ids as given (unchecked: the RPCs answer `not_found`), keys and paths looked up in
    `collection`. Each document once, in the order asked."""
    parsed = [parse_ref(ref) for ref in refs]
    keys = list(dict.fromkeys(ref for ref in parsed if isinstance(ref, str)))
    found = {d.source_key: d.id for d in rpc.live_documents_by_key(keys, collection)} if keys else {}
    resolved = Resolved(keys={document_id: key for key, document_id in found.items() if key is not None})
    for ref in parsed:
        document_id = ref if isinstance(ref, UUID) else found.get(ref)
        if document_id is None:
            if ref not in resolved.missing_keys:
                resolved.missing_keys.append(str(ref))
        elif document_id not in resolved.document_ids:
            resolved.document_ids.append(document_id)
    return resolved
