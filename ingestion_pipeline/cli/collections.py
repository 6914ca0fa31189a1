"""`ingest collection add|list|grant|revoke|remove`: collections and who may read them.

A collection is private until made public; an app user (the uuid Supabase's auth.uid()
returns) reads the public collections and those it is a member of (row-level security,
docs/search.md). Documents enqueued into a new collection register it, private.

Exit status: 0 when done (an `add` that changed nothing included), 1 when a grant or revoke
names no collection (one line, errors.UnknownCollection), a revoke finds no membership or a
remove is refused (no such collection, a source syncs into it, documents without
--delete-documents), 2 for usage errors (a user id that is not a uuid)."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any, get_args

from ingestion_pipeline.cli.common import EXIT_NOTHING_DONE, add_database_url, print_json, user_id
from ingestion_pipeline.cli.tables import render_table
from ingestion_pipeline.db.models import CollectionAdded, CollectionRemoved, CollectionRole, Refusal
from ingestion_pipeline.db.ready import migrated_pool
from ingestion_pipeline.db.rpc import IngestionRpc
from ingestion_pipeline.errors import IngestError
from ingestion_pipeline.operations import lifecycle
from ingestion_pipeline.settings import Settings

if TYPE_CHECKING:
    from ingestion_pipeline.cli.common import Commands

ROLES: tuple[CollectionRole, ...] = get_args(CollectionRole)


def register(commands: Commands) -> None:
    collection = commands.add_parser("collection", help="collections: public or private, and their members")
    actions = collection.add_subparsers(dest="collection_command", required=True)

    add = actions.add_parser(
        "add",
        help="create a collection, or make one public or private",
        description="Create a collection (private unless --public), or make an existing one public or private. "
        "Without --public or --private an existing collection is left as it is.",
    )
    add.add_argument("name", metavar="NAME", type=collection_name)
    public_or_private = add.add_mutually_exclusive_group()
    public_or_private.add_argument(
        "--public", dest="public", action="store_const", const=True, default=None, help="anyone may read it (anon)"
    )
    public_or_private.add_argument(
        "--private", dest="public", action="store_const", const=False, help="only its members may read it"
    )
    add.set_defaults(handler=cmd_add)

    listing = actions.add_parser("list", help="every collection: public or private, documents, members")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=cmd_list)

    grant = actions.add_parser(
        "grant",
        help="make an app user a reader or writer of a collection",
        description="Make USER_ID (the uuid Supabase's auth.uid() returns) a member of collection NAME, "
        "replacing its role when it was one. Exit 1 when there is no such collection.",
    )
    grant.add_argument("name", metavar="NAME")
    grant.add_argument("user_id", metavar="USER_ID", type=user_id, help="the uuid auth.uid() returns")
    grant.add_argument("--role", choices=ROLES, default="reader", help="default: reader")
    grant.set_defaults(handler=cmd_grant)

    revoke = actions.add_parser(
        "revoke",
        help="remove an app user from a collection",
        description="Remove USER_ID's membership of collection NAME. Exit 1 when it was not a member.",
    )
    revoke.add_argument("name", metavar="NAME")
    revoke.add_argument("user_id", metavar="USER_ID", type=user_id, help="the uuid auth.uid() returns")
    revoke.set_defaults(handler=cmd_revoke)

    remove = actions.add_parser(
        "remove",
        help="remove an empty collection (with --delete-documents: its documents first)",
        description="Remove collection NAME and its memberships. A collection with documents is refused "
        "unless --delete-documents, which deletes them first (as `ingest delete` does); one a registered "
        "source syncs into is refused (`ingest source remove` it first). Exit 1 when refused.",
    )
    remove.add_argument("name", metavar="NAME")
    remove.add_argument(
        "--delete-documents", action="store_true", help="delete the collection's documents, then remove it"
    )
    remove.set_defaults(handler=cmd_remove)

    for sub in (add, listing, grant, revoke, remove):
        add_database_url(sub)


def collection_name(value: str) -> str:
    """argparse type: a collection's name is not blank (add_collection refuses one)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("a collection's name may not be empty")
    return value


def visibility(is_public: bool) -> str:
    return "public" if is_public else "private"


def added_line(result: CollectionAdded) -> str:
    shown = visibility(result.is_public)
    if result.outcome == "created":
        return f"collection {result.name} created ({shown})"
    if result.outcome == "updated":
        return f"collection {result.name} is now {shown}"
    return f"collection {result.name} unchanged ({shown})"


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    with migrated_pool(settings) as pool:
        result = IngestionRpc(pool).add_collection(args.name, public=args.public)
    print(added_line(result))
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    with migrated_pool(settings) as pool:
        collections = IngestionRpc(pool).list_collections()
    if args.json:
        print_json([c.model_dump(mode="json") for c in collections])
        return 0
    if not collections:
        print("no collection (ingest collection add NAME, or enqueue documents with --collection NAME)")
        return 0
    rows = [
        (c.name, visibility(c.is_public), c.documents, c.members, f"{c.created_at:%Y-%m-%d %H:%M}") for c in collections
    ]
    print(render_table(["name", "visibility", "documents", "members", "created"], rows))
    return 0


def cmd_grant(args: argparse.Namespace, settings: Settings) -> int:
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        result = rpc.grant_collection(args.name, args.user_id, args.role)
        if result.reason == Refusal.UNKNOWN_COLLECTION:
            raise rpc.unknown_collection(args.name)
    if not result.ok:
        raise IngestError(f"user {args.user_id} not granted {args.role} of {args.name}: {result.reason}")
    if result.previous_role == result.role:
        print(f"user {args.user_id} is already a {result.role} of {args.name}")
    elif result.previous_role:
        print(f"user {args.user_id} is now a {result.role} of {args.name} (was a {result.previous_role})")
    else:
        print(f"user {args.user_id} is now a {result.role} of {args.name}")
    return 0


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    deleted: list[dict[str, Any]] = []
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        result = rpc.remove_collection(args.name)
        if result.reason == Refusal.NOT_EMPTY and args.delete_documents:
            deleted = lifecycle.delete_collection_documents(rpc, args.name)
            result = rpc.remove_collection(args.name)
        if result.reason == Refusal.UNKNOWN_COLLECTION:
            raise rpc.unknown_collection(args.name)
    if not result.ok:
        raise _not_removed(args.name, result)
    done = [f"{sum(1 for r in deleted if r.get('ok'))} document(s) deleted"] if deleted else []
    done += [f"{result.members} membership(s) removed"] if result.members else []
    print(f"collection {args.name} removed" + (f" ({', '.join(done)})" if done else ""))
    return 0


def _not_removed(name: str, result: CollectionRemoved) -> IngestError:
    if result.reason == Refusal.HAS_SOURCES:
        return IngestError(
            f"collection {name!r} not removed: registered source(s) {', '.join(result.sources)} sync into it "
            f"(`ingest source remove {shlex.quote(result.sources[0])}` first)"
        )
    if result.reason == Refusal.NOT_EMPTY:
        return IngestError(
            f"collection {name!r} not removed: it has {result.documents} document(s) "
            f"(`ingest collection remove {shlex.quote(name)} --delete-documents` deletes them with it)"
        )
    return IngestError(f"collection {name!r} not removed: {result.reason}")


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    with migrated_pool(settings) as pool:
        rpc = IngestionRpc(pool)
        rpc.require_collections([args.name])
        result = rpc.revoke_collection(args.name, args.user_id)
    if result.revoked:
        print(f"user {args.user_id} is no longer a member of {args.name} (was a {result.role})")
        return 0
    print(f"user {args.user_id} was not a member of {args.name}: nothing to revoke")
    return EXIT_NOTHING_DONE
