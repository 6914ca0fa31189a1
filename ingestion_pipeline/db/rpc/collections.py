"""Collections and their members: a collection added or made public or private, the list, a
user (the uuid Supabase's auth.uid() returns) made a reader or writer of one, a membership
revoked. Who may read what follows from these rows (row-level security; docs/search.md).
Operator calls, not the worker's: nothing here is fenced. They need this release's schema
(db/schema_level.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg

from ingestion_pipeline.db import schema_level
from ingestion_pipeline.db.connection import execute_as_dicts
from ingestion_pipeline.db.models import (
    CollectionAdded,
    CollectionGranted,
    CollectionRemoved,
    CollectionRevoked,
    CollectionRole,
    CollectionSummary,
)
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase
from ingestion_pipeline.errors import NearCollection, UnknownCollection, typo_of

WHAT = "managing collections"  # what needs this release's schema, in SchemaTooOld's message


def missing_collections(conn: psycopg.Connection[Any], names: Sequence[str]) -> list[str]:
    """The names among `names` that are no collection, in their order (the caller reads the
    table `collections`: the owner, ingestion_worker; an app's roles may not)."""
    rows = execute_as_dicts(conn, query("rpc_known_collections"), {"names": list(names)}).fetchall()
    known = {row["name"] for row in rows}
    return [name for name in dict.fromkeys(names) if name not in known]


def collection_names(conn: psycopg.Connection[Any]) -> list[str]:
    """Every collection's name (the caller reads the table: the owner, ingestion_worker)."""
    return [row["name"] for row in execute_as_dicts(conn, query("collection_names")).fetchall()]


class CollectionRpc(RpcBase):
    def add_collection(self, name: str, *, public: bool | None = None) -> CollectionAdded:
        """Create the collection (private unless `public`), or make it public or private;
        `public` None keeps an existing one's flag. Outcome `created`, `updated` or
        `unchanged`. An empty name raises (SQLSTATE 22023)."""
        schema_level.require_current(self.schema_level, WHAT)
        return self._result(CollectionAdded, "rpc_add_collection", {"name": name, "public": public})

    def list_collections(self) -> list[CollectionSummary]:
        """Every collection by name, with its live documents and its members."""
        schema_level.require_current(self.schema_level, WHAT)
        with self._connection() as conn:
            rows = execute_as_dicts(conn, query("rpc_list_collections")).fetchall()
        return [CollectionSummary.model_validate(row) for row in rows]

    def missing_collections(self, names: Sequence[str]) -> list[str]:
        """The names among `names` that are no collection, in their order."""
        schema_level.require_current(self.schema_level, WHAT)
        with self._connection() as conn:
            return missing_collections(conn, names)

    def require_collections(self, names: Sequence[str | None]) -> None:
        """UnknownCollection for the first of `names` (None: not named) that is no collection,
        naming the closest existing ones."""
        named = [name for name in names if name is not None]
        missing = self.missing_collections(named) if named else []
        if missing:
            raise self.unknown_collection(missing[0])

    def unknown_collection(self, name: str) -> UnknownCollection:
        """The error for `name`, which is no collection: the closest existing ones named."""
        with self._connection() as conn:
            return UnknownCollection.among(name, collection_names(conn))

    def check_new_collection(self, name: str, *, confirmed: bool = False) -> None:
        """Before a write that creates collection `name` when it does not exist: NearCollection
        when it does not and its name is a likely typo of an existing one's (`kitchn` beside
        `kitchen`), unless `confirmed`. An existing name, or a new one far from the others,
        passes."""
        if confirmed or not self.missing_collections([name]):
            return
        with self._connection() as conn:
            near = typo_of(name, collection_names(conn))
        if near:
            raise NearCollection(name, near)

    def grant_collection(self, collection: str, user_id: UUID, role: CollectionRole = "reader") -> CollectionGranted:
        """Make the user a reader or writer of the collection (a member's role is replaced;
        `previous_role` says which it had); `unknown_collection` when there is no such
        collection. A role other than reader or writer raises (SQLSTATE 22023)."""
        schema_level.require_current(self.schema_level, WHAT)
        params = {"collection": collection, "user_id": user_id, "role": role}
        return self._result(CollectionGranted, "rpc_grant_collection", params)

    def remove_collection(self, name: str) -> CollectionRemoved:
        """Remove an empty collection and its memberships; refused (nothing changed)
        `unknown_collection`, `has_sources` or `not_empty` (its live documents: delete them
        first)."""
        schema_level.require_current(self.schema_level, WHAT)
        return self._result(CollectionRemoved, "rpc_remove_collection", {"name": name})

    def live_document_ids(self, collection: str, *, after: UUID | None = None, limit: int = 1000) -> list[UUID]:
        """A page of the ids of the collection's live documents, in id order, after `after`."""
        params = {"collection": collection, "after": after or UUID(int=0), "limit": limit}
        with self._connection() as conn:
            return [row["id"] for row in execute_as_dicts(conn, query("live_documents_of_collection"), params)]

    def revoke_collection(self, collection: str, user_id: UUID) -> CollectionRevoked:
        """Remove the user's membership; `revoked` false when it had none."""
        schema_level.require_current(self.schema_level, WHAT)
        return self._result(CollectionRevoked, "rpc_revoke_collection", {"collection": collection, "user_id": user_id})
