"""What the commands share: the database URL option, argument types, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import DictRow
    from psycopg_pool import ConnectionPool

    from ingestion_pipeline.operations.selection import Selection

    # What `parser.add_subparsers()` returns, which each command module adds its commands to
    # (typeshed's name; the class is not subscriptable at runtime).
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def _whole_number(value: str, minimum: int) -> int:
    """argparse type: reports a bad value as a usage error, not a traceback."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {number}")
    return number


def positive_int(value: str) -> int:
    return _whole_number(value, 1)


def non_negative_int(value: str) -> int:
    return _whole_number(value, 0)


def user_id(value: str) -> UUID:
    """argparse type: an app user's id, the uuid Supabase's auth.uid() returns."""
    try:
        return UUID(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a user id (a uuid, as auth.uid() returns): {value!r}") from None


def add_database_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", metavar="URL", help="overrides DATABASE_URL")


def add_collection(parser: argparse.ArgumentParser, *, creates: bool = False) -> None:
    """`--collection NAME`; `creates`: a command that creates it when missing, with
    `--new-collection`, which confirms a new name close to an existing one's."""
    from ingestion_pipeline.db.rpc.documents import DEFAULT_COLLECTION  # with the commands that write

    parser.add_argument(
        "--collection", metavar="NAME", default=DEFAULT_COLLECTION, help=f"collection (default {DEFAULT_COLLECTION!r})"
    )
    if creates:
        parser.add_argument(
            "--new-collection",
            action="store_true",
            help="create --collection even when its name is close to an existing one's (refused as a likely typo)",
        )


def add_selection(parser: argparse.ArgumentParser) -> None:
    """`--include GLOB`, `--exclude GLOB`: which files of a folder are taken (selection.py)."""
    parser.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="take the files of a folder that match GLOB (by name, or by path below the folder when it has a /), "
        "whatever they are, instead of its documents; repeatable",
    )
    parser.add_argument(
        "--exclude", action="append", metavar="GLOB", help="pass over the files that match GLOB; repeatable"
    )


def selection_of(args: argparse.Namespace) -> Selection:
    from ingestion_pipeline.operations.selection import Selection  # the parsers' suffixes: not for every command

    return Selection.of(args.include, args.exclude)


def add_collection_scope(parser: argparse.ArgumentParser, scope: str) -> None:
    """`--collection NAME`, optional: unset means every collection (`scope` says what of)."""
    parser.add_argument("--collection", metavar="NAME", default=None, help=f"only this collection (default: {scope})")


def add_document_refs(parser: argparse.ArgumentParser, collection_help: str) -> None:
    """Documents named by key, local path or id, and the collection keys are looked up in."""
    parser.add_argument(
        "documents", nargs="*", metavar="KEY|PATH|ID", help="source keys (file:///…, s3://…), local paths, or ids"
    )
    parser.add_argument("--collection", metavar="NAME", default=None, help=collection_help)


@contextmanager
def announce_new_collection(
    pool: ConnectionPool[psycopg.Connection[DictRow]], name: str, *, confirmed: bool = True
) -> Iterator[None]:
    """Around a command that writes documents into collection `name` (enqueue, sync): a new
    name close to an existing one's is refused first (NearCollection) unless `confirmed`;
    when its writes created the collection, say so on stderr, one line."""
    from ingestion_pipeline.db.rpc import IngestionRpc

    rpc = IngestionRpc(pool)
    rpc.check_new_collection(name, confirmed=confirmed)
    existed = not rpc.missing_collections([name])
    try:
        yield
    finally:
        if not existed and not rpc.missing_collections([name]):
            print(f"ingest: created collection {name!r}", file=sys.stderr)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# Exit statuses of the operator's commands (delete, cancel, retry, reindex).
EXIT_NOTHING_DONE = 1  # nothing matched: unknown ids, nothing open, nothing indexed
EXIT_USAGE = 2  # a missing or doubled form, an id that is not a UUID


def usage_error(command: str, message: str) -> int:
    print(f"ingest: error: {message} (ingest {command} -h)", file=sys.stderr)
    return EXIT_USAGE
