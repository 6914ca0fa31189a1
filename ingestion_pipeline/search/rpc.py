"""The call of the search RPC (`search_documents`), whose refusals of a bad argument
(SQLSTATE 22023) become one-line IngestErrors.

A search may run as an app's reader would (`reader`): as role `anon`, or as
`authenticated` with the claims of a user, set for this transaction only, the way
PostgREST runs a request; row-level security then scopes it as it scopes the app, and the
role's statement_timeout bounds it as PostgREST's requests are bounded (`as_reader`). The
connecting role must be allowed to SET ROLE to it (a superuser, the owner on Supabase, or
a member of the role, like PostgREST's authenticator).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row, tuple_row

from ingestion_pipeline.db.queries import query
from ingestion_pipeline.db.rpc.collections import collection_names, missing_collections
from ingestion_pipeline.db.schema_level import probe, require_current
from ingestion_pipeline.errors import IngestError, SchemaTooOld, UnknownCollection

from .model import Hit, Mode, Passage

_PREFIXES = ("search_documents: ", "search_passages: ")
# The migration that made each RPC this release calls.
_MIGRATIONS = {
    "search_documents": "20261206000500_vector_search_in_scope_and_model",
    "search_passages": "20261206000900_passage_search",
}


@dataclass(frozen=True)
class Reader:
    """An app's reader: a signed-in user (`user_id`, the uuid auth.uid() returns) or, with
    none, an anonymous one (role anon)."""

    user_id: UUID | None = None

    @property
    def role(self) -> str:
        return "anon" if self.user_id is None else "authenticated"

    def claims(self) -> str:
        claims = {"role": self.role} if self.user_id is None else {"sub": str(self.user_id), "role": self.role}
        return json.dumps(claims)


@contextmanager
def as_reader(conn: psycopg.Connection[Any], reader: Reader | None) -> Iterator[None]:
    """A transaction as `reader` (without one: as the connecting role): its role and claims, and
    its role's statement_timeout, for this transaction only (act_as_reader). A statement the
    timeout cancels is an IngestError of one line, as an app's request would be refused."""
    if reader is None:
        with conn.transaction():
            yield
        return
    timeout = "?"
    try:
        with conn.transaction():
            with conn.cursor(row_factory=tuple_row) as cur:
                row = cur.execute(query("act_as_reader"), {"role": reader.role, "claims": reader.claims()}).fetchone()
                timeout = row[0] if row else timeout
            yield
    except psycopg.errors.QueryCanceled as exc:
        message = exc.diag.message_primary or str(exc)
        raise IngestError(f"{message} (as {reader.role}, statement_timeout {timeout})") from None


def search_documents(
    conn: psycopg.Connection[Any],
    text: str | None,
    *,
    mode: Mode = "lexical",
    limit: int = 10,
    embedding: list[float] | None = None,
    embedder: str | None = None,
    collections: list[str] | None = None,
    reader: Reader | None = None,
) -> list[Hit]:
    """The RPC's hits: `embedding` is the query's vector (vector and hybrid modes), and
    `embedder` the name of the model that made it, as generations record it: the search
    compares it only with vectors of that model."""
    params = _params(text, mode, limit, embedding, embedder, collections)
    return _call(conn, "search_documents", Hit, params, collections, reader)


def search_passages(
    conn: psycopg.Connection[Any],
    text: str | None,
    *,
    mode: Mode = "lexical",
    limit: int = 10,
    embedding: list[float] | None = None,
    embedder: str | None = None,
    collections: list[str] | None = None,
    reader: Reader | None = None,
    window: int = 0,
) -> list[Passage]:
    """The passages RPC (`search_passages`): as search_documents, passages instead of
    documents, each with `window` chunks on each side as its context."""
    params = {**_params(text, mode, limit, embedding, embedder, collections), "window": window}
    return _call(conn, "search_passages", Passage, params, collections, reader)


def _params(
    text: str | None,
    mode: Mode,
    limit: int,
    embedding: list[float] | None,
    embedder: str | None,
    collections: list[str] | None,
) -> dict[str, Any]:
    return {
        "query": text,
        "collections": list(collections) if collections else None,
        "mode": mode,
        "limit": limit,
        "embedding": embedding,
        "embedder": embedder,
    }


def _call(
    conn: psycopg.Connection[Any],
    name: str,
    row: type[Hit],
    params: dict[str, Any],
    collections: list[str] | None,
    reader: Reader | None,
) -> list[Any]:
    """One search RPC's rows as `row`s; its refusals of an argument one-line IngestErrors."""
    require_current(probe(conn), "search")
    if reader is None and collections:
        _require_collections(conn, collections)
    try:
        with as_reader(conn, reader), conn.cursor(row_factory=class_row(row)) as cur:
            return cur.execute(query(name), params).fetchall()
    except psycopg.errors.InvalidParameterValue as exc:
        message = exc.diag.message_primary or str(exc)
        for prefix in _PREFIXES:
            message = message.removeprefix(prefix)
        raise IngestError(message) from None
    except psycopg.errors.InsufficientPrivilege as exc:
        if reader is None:
            raise
        raise IngestError(f"cannot search as {reader.role}: {exc.diag.message_primary}") from None
    except psycopg.errors.UndefinedFunction:  # the RPC this release calls is not there yet
        raise SchemaTooOld(f"search needs migration {_MIGRATIONS[name]}: run `ingest db migrate`") from None


def _require_collections(conn: psycopg.Connection[Any], names: list[str]) -> None:
    """UnknownCollection for a named collection that does not exist, when the caller may see
    which exist: the owner or ingestion_worker, who read every collection. An app's reader
    (`reader`, or a connection as anon or authenticated, which may not read the table) is
    not told: to it a collection it may not read and one that does not exist must look the
    same (SPEC §10, non-interference), and both give no hits."""
    try:
        with conn.transaction():
            missing = missing_collections(conn, names)
            known = collection_names(conn) if missing else []
    except psycopg.errors.InsufficientPrivilege:
        return
    if missing:
        raise UnknownCollection.among(missing[0], known)
