"""Collections and their members (db/rpc/collections.py): a collection added or changed, one
row of the list, a user granted a role, a membership revoked."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from ingestion_pipeline.db.models.refusals import RpcResult

# The roles a member of a collection may be granted (collection_members.role). The results
# keep a role or outcome as text: a newer schema may add one.
CollectionRole = Literal["reader", "writer"]

# -- collections and members (db/rpc/collections.py) --------------------------------------


class CollectionAdded(RpcResult):
    """`created`, `updated` (made public or private) or `unchanged` (it was so already)."""

    outcome: str | None = None
    name: str | None = None
    is_public: bool = False


class CollectionSummary(BaseModel):
    """A collection, its live documents and its members (list_collections)."""

    model_config = ConfigDict(frozen=True)

    name: str
    is_public: bool = False
    documents: int = 0  # not deleted
    members: int = 0
    created_at: datetime


class CollectionGranted(RpcResult):
    """A user made a reader or writer of a collection (its role before, when it was a member),
    or `unknown_collection`."""

    collection: str | None = None
    user_id: UUID | None = None
    role: str | None = None
    previous_role: str | None = None


class CollectionRevoked(RpcResult):
    """`revoked` false: the user was not a member; `role`: the one it had."""

    collection: str | None = None
    user_id: UUID | None = None
    revoked: bool = False
    role: str | None = None


class CollectionRemoved(RpcResult):
    """A collection removed with its `members` (their count), or refused: `unknown_collection`,
    `has_sources` (`sources` sync into it) or `not_empty` (`documents` live ones)."""

    collection: str | None = None
    members: int = 0
    sources: list[str] = []
    documents: int = 0
