"""Collections and their members: a collection added or made public or private, the list, a
user (the uuid Supabase's auth.uid() returns) made a reader or writer of one, a membership
revoked. Who may read what follows from these rows (row-level security; docs/search.md).
Operator calls, not the worker's: nothing here is fenced. They need this release's schema
(db/schema_level.py)."""

from __future__ import annotations

from uuid import UUID

from ingestion_pipeline.db import schema_level
from ingestion_pipeline.db.models import (
    CollectionAdded,
    CollectionGranted,
    CollectionRevoked,
    CollectionRole,
    CollectionSummary,
)
from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.base import RpcBase

WHAT = "managing collections"  # what needs this release's schema, in SchemaTooOld's message


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
            rows = conn.execute(query("rpc_list_collections")).fetchall()
        return [CollectionSummary.model_validate(row) for row in rows]

    def grant_collection(self, collection: str, user_id: UUID, role: CollectionRole = "reader") -> CollectionGranted:
        """Make the user a reader or writer of the collection (a member's role is replaced;
        `previous_role` says which it had); `unknown_collection` when there is no such
        collection. A role other than reader or writer raises (SQLSTATE 22023)."""
        schema_level.require_current(self.schema_level, WHAT)
        params = {"collection": collection, "user_id": user_id, "role": role}
        return self._result(CollectionGranted, "rpc_grant_collection", params)

    def revoke_collection(self, collection: str, user_id: UUID) -> CollectionRevoked:
        """Remove the user's membership; `revoked` false when it had none."""
        schema_level.require_current(self.schema_level, WHAT)
        return self._result(CollectionRevoked, "rpc_revoke_collection", {"collection": collection, "user_id": user_id})
