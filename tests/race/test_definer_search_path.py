"""SECURITY DEFINER functions must not resolve anything in `public` (…_lease_tokens.sql).

Before the migration every RPC ran with `search_path = pg_catalog, public, pg_temp`: a
role allowed to create in `public` could define `public.make_interval(secs integer)`,
which beats the built-in (an exact type match wins over pg_catalog's double precision
`secs`), and have it run as the owner of the RPCs. At head they run with
`search_path = pg_catalog, pg_temp` and name our own objects `public.<name>`.

The test plants look-alikes of every built-in the RPCs call, from a role that may only
create in `public`. Every trap counts itself in a sequence (not transactional, so a call
is seen even when its transaction rolls back) and raises SQLSTATE IFTRP naming itself and
the role it ran as.
"""

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from tests.any_schema_rpc import AnySchemaRpc
from tests.helpers import batch, document, job, seed_document, write_artifacts

TRAP_SQLSTATE = "IFTRP"
TRAP_VARIANT_TYPES = ["integer", "text", "uuid", "bigint", "jsonb", "timestamp with time zone"]
TRAP_OPERATORS = {
    **{
        op: [
            ("uuid", "uuid"),
            ("text", "text"),
            ("integer", "integer"),
            ("bigint", "bigint"),
            ("bigint", "integer"),
            ("integer", "bigint"),
            ("timestamp with time zone", "timestamp with time zone"),
            ("jsonb", "jsonb"),
        ]
        for op in ("=", "<>", "<", "<=", ">", ">=")
    },
    "||": [("text", "text"), ("jsonb", "jsonb")],
    "->>": [("jsonb", "text")],
    "+": [
        ("integer", "integer"),
        ("bigint", "bigint"),
        ("bigint", "integer"),
        ("timestamp with time zone", "interval"),
    ],
    "-": [
        ("integer", "integer"),
        ("bigint", "bigint"),
        ("timestamp with time zone", "interval"),
        ("timestamp with time zone", "timestamp with time zone"),
    ],
}

# Names of pg_catalog functions that appear called (`name(`) in the bodies of our
# SECURITY DEFINER functions.
CALLED_BUILTINS = """
    select distinct c.name
      from (select lower(m[1]) as name
              from pg_proc p, regexp_matches(p.prosrc, '([A-Za-z_][A-Za-z0-9_]*)\\s*\\(', 'g') as m
             where p.pronamespace = 'public'::regnamespace and p.prosecdef) c
     where exists (select 1 from pg_proc b
                    where b.pronamespace = 'pg_catalog'::regnamespace and b.proname = c.name)
     order by 1
"""

# Each pg_catalog signature of a name, whether it takes a pseudo-type, and its result.
BUILTIN_SIGNATURES = """
    select pg_get_function_arguments(p.oid) as arguments,
           pg_get_function_result(p.oid) as result,
           exists (select 1 from unnest(p.proargtypes::oid[]) t join pg_type ty on ty.oid = t
                    where ty.typtype = 'p') as pseudo,
           ty.typtype = 'p' as polymorphic_result,
           ty.typcategory = 'A' or ty.typname like '%%array' as array_result
      from pg_proc p join pg_type ty on ty.oid = p.prorettype
     where p.pronamespace = 'pg_catalog'::regnamespace and p.proname = %s
     order by p.oid
"""


class Traps:
    """Plants the look-alikes as `role` (which may create in public, nothing more)."""

    def __init__(self, conn: psycopg.Connection, role: str):
        self.conn, self.role = conn, role
        self.planted: list[str] = []
        self.skipped: list[str] = []
        self.count = 0

    def _body(self, label: str) -> sql.Composable:
        return sql.SQL(
            "language plpgsql as $trap$ begin "
            "perform nextval('public.search_path_trap_hits'); "
            "raise exception 'search_path trap: public.% ran as %', {label}, current_user "
            "using errcode = '{code}'; "
            "end $trap$"
        ).format(label=sql.Literal(label), code=sql.SQL(TRAP_SQLSTATE))

    def _try(self, label: str, *statements: sql.Composable) -> None:
        try:
            with self.conn.transaction():
                for statement in statements:
                    self.conn.execute(statement)
            self.planted.append(label)
        except psycopg.Error:
            self.skipped.append(label)  # a signature that cannot be created (or exists already)

    def function(self, name: str, arguments: str, result: str) -> None:
        label = f"{name}({arguments})"
        self._try(
            label,
            sql.SQL("create function public.{name}({arguments}) returns {result} ").format(
                name=sql.Identifier(name), arguments=sql.SQL(arguments), result=sql.SQL(result)
            )
            + self._body(label),
        )

    def operator(self, op: str, left: str, right: str) -> None:
        self.count += 1
        function = sql.Identifier(f"search_path_trap_op_{self.count}")
        result = self.conn.execute(
            "select oprresult::regtype::text as t from pg_operator where oprname = %s and oprleft = %s::regtype "
            "and oprright = %s::regtype and oprnamespace = 'pg_catalog'::regnamespace",
            (op, left, right),
        ).fetchone()
        label = f"operator {op}({left}, {right})"
        self._try(
            label,
            sql.SQL("create function public.{f}(l {left}, r {right}) returns {result} ").format(
                f=function,
                left=sql.SQL(left),
                right=sql.SQL(right),
                result=sql.SQL(result["t"] if result else "boolean"),
            )
            + self._body(label),
            sql.SQL("create operator public.{op} (leftarg = {left}, rightarg = {right}, function = public.{f})").format(
                op=sql.SQL(op), left=sql.SQL(left), right=sql.SQL(right), f=function
            ),
        )

    def plant(self) -> None:
        builtins = [r["name"] for r in self.conn.execute(CALLED_BUILTINS).fetchall()]
        assert "make_interval" in builtins and len(builtins) >= 10, builtins
        self.conn.execute(sql.SQL("set role {}").format(sql.Identifier(self.role)))
        try:
            self.conn.execute("create sequence public.search_path_trap_hits")
            self.conn.execute("grant usage on sequence public.search_path_trap_hits to public")
            # First of all the one that matters: an exact-type make_interval(secs integer).
            self.function("make_interval", "secs integer", "interval")
            assert self.planted == ["make_interval(secs integer)"], self.skipped
            for name in builtins:
                signatures = self.conn.execute(BUILTIN_SIGNATURES, (name,)).fetchall()
                for signature in signatures:
                    if not signature["pseudo"]:
                        self.function(name, signature["arguments"], signature["result"])
                first = signatures[0]
                for variant in TRAP_VARIANT_TYPES:
                    if first["array_result"] and first["polymorphic_result"]:
                        result = f"{variant}[]"
                    elif first["polymorphic_result"]:
                        result = variant
                    else:
                        result = first["result"]
                    self.function(name, f"x {variant}", result)
            for op, pairs in TRAP_OPERATORS.items():
                for left, right in pairs:
                    self.operator(op, left, right)
        finally:
            self.conn.execute("reset role")

    def hits(self) -> int:
        row = self.conn.execute("select last_value, is_called from public.search_path_trap_hits").fetchone()
        return row["last_value"] if row["is_called"] else 0


@pytest.fixture
def traps(token_schema, new_conn):
    """A role that may create in `public` (and nothing else) plants the traps."""
    conn = new_conn(token_schema.url)
    role = f"ingest_test_planter_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} nologin").format(sql.Identifier(role)))
    conn.execute(sql.SQL("grant usage, create on schema public to {}").format(sql.Identifier(role)))
    planted = Traps(conn, role)
    try:
        planted.plant()
        yield planted
    finally:
        conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def expire_lease(conn, job_id, deadline_on_row: bool) -> None:
    """The lease has run out (written without make_interval, which is trapped here)."""
    conn.execute("update ingestion_jobs set locked_at = now() - interval '1 hour' where id = %s", (job_id,))
    if deadline_on_row:
        conn.execute(
            "update ingestion_jobs set lease_expires_at = now() - interval '1 second' where id = %s", (job_id,)
        )


def run_lifecycle(conn, rpc: AnySchemaRpc, deadline_on_row: bool, steps: list[str]) -> dict:
    """Every RPC the pipeline calls, through the worker's client; `steps` says how far it got."""

    def step(name, call):
        steps.append(name)
        return call()

    now = datetime.now(UTC)
    batch_id = step("create_batch", lambda: rpc.create_batch("trapped")).batch_id
    good_document, bad_document = seed_document(conn, batch_id), seed_document(conn, batch_id)
    good_job = step("enqueue", lambda: rpc.enqueue(good_document, batch_id=batch_id)).job_id
    bad_job = step("enqueue", lambda: rpc.enqueue(bad_document, batch_id=batch_id, max_attempts=1)).job_id
    assert step("enqueue_again", lambda: rpc.enqueue(good_document, batch_id=batch_id)).reason == "already_queued"

    [a] = step("claim", lambda: rpc.claim("worker-a"))
    assert a.job_id == good_job
    abandoned = step(
        "begin", lambda: rpc.begin_generation(a.job_id, good_document, "worker-a", lease_token=a.lease_token)
    ).generation_id
    write_artifacts(conn, good_document, abandoned, chunks=1)
    expire_lease(conn, good_job, deadline_on_row)
    [b] = step("reclaim", lambda: rpc.claim("worker-b"))  # the stale-lease branch of the claim
    assert b.job_id == good_job
    token = b.lease_token
    assert step("heartbeat", lambda: rpc.heartbeat(good_job, "worker-b", lease_token=token, progress=10)).ok
    assert step(
        "record_stage",
        lambda: rpc.record_stage(good_job, "worker-b", "parse", started_at=now, finished_at=now, lease_token=token),
    ).ok
    generation_id = step(
        "begin", lambda: rpc.begin_generation(good_job, good_document, "worker-b", lease_token=token)
    ).generation_id
    write_artifacts(conn, good_document, generation_id, chunks=2)
    assert step(
        "commit_and_complete",
        lambda: rpc.commit_and_complete(
            good_job, good_document, generation_id, worker_id="worker-b", lease_token=token, batch_id=batch_id
        ),
    ).ok

    [c] = step("claim", lambda: rpc.claim("worker-c"))
    assert c.job_id == bad_job
    failed = step(
        "fail_or_retry",
        lambda: rpc.fail_or_retry(
            bad_job,
            bad_document,
            worker_id="worker-c",
            lease_token=c.lease_token,
            retry=True,
            error_message="parse error",
            batch_id=batch_id,
        ),
    )
    assert failed.ok and failed.attempts_exhausted
    assert step("retry", lambda: rpc.retry(bad_job)).ok
    [c] = step("claim", lambda: rpc.claim("worker-c"))
    expire_lease(conn, bad_job, deadline_on_row)
    assert step("expire_stale", lambda: rpc.expire_stale()).job_ids == [bad_job]

    dry = step("cleanup_dry_run", lambda: rpc.cleanup_generations(dry_run=True))
    real = step("cleanup", lambda: rpc.cleanup_generations(dry_run=False))
    health = step("queue_health", lambda: rpc.queue_health())
    sensor = step("sensor_state", lambda: rpc.sensor_state())
    stuck = step("refresh_stuck_batches", lambda: rpc.refresh_stuck_batches())
    report = step("batch_report", lambda: rpc.batch_report(batch_id=batch_id))
    refreshed = step("refresh_batch", lambda: rpc.refresh_batch(batch_id))
    return {
        "batch_id": batch_id,
        "good_job": good_job,
        "bad_job": bad_job,
        "good_document": good_document,
        "generation_id": generation_id,
        "abandoned": abandoned,
        "dry": dry,
        "real": real,
        "health": health,
        "sensor": sensor,
        "stuck": stuck,
        "report": report,
        "refreshed": refreshed,
    }


def rpc_owner(conn) -> str:
    return conn.execute(
        "select proowner::regrole::text as owner from pg_proc where proname = 'claim_ingestion_jobs'"
    ).fetchone()["owner"]


def test_look_alikes_in_public_never_run_inside_the_rpcs(token_schema, traps, new_conn):
    """Before: the stale-lease reclaim calls the planted public.make_interval(integer),
    which runs as the owner of the RPCs. After: the whole lifecycle runs, no trap ever."""
    conn = new_conn(token_schema.url)
    rpc = AnySchemaRpc(conn)
    assert "make_interval(secs integer)" in traps.planted
    assert len(traps.planted) > 50 and any(p.startswith("operator") for p in traps.planted)
    steps: list[str] = []

    if not token_schema.hardened:
        with pytest.raises(psycopg.DatabaseError) as trapped:
            run_lifecycle(conn, rpc, deadline_on_row=False, steps=steps)
        assert trapped.value.sqlstate == TRAP_SQLSTATE
        assert "public.make_interval(secs integer)" in str(trapped.value)
        assert f"ran as {rpc_owner(conn)}" in str(trapped.value)
        assert steps[-1] == "reclaim"
        assert traps.hits() >= 1
        # The janitor's and health's stale checks call it too.
        with pytest.raises(psycopg.DatabaseError, match=r"public\.make_interval\(secs integer\)"):
            rpc.queue_health()
        return

    done = run_lifecycle(conn, rpc, deadline_on_row=True, steps=steps)
    assert traps.hits() == 0
    assert job(conn, done["good_job"])["status"] == "completed"
    assert job(conn, done["bad_job"])["stage"] == "dead_letter"
    assert document(conn, done["good_document"])["index_generation_id"] == done["generation_id"]
    assert (done["dry"].generations, done["real"].generations, done["real"].chunks) == (1, 1, 1)
    assert done["refreshed"].status == batch(conn, done["batch_id"])["status"] == "completed_with_errors"
    assert done["report"].batches[0].failed == 1
    assert done["health"].ok and done["sensor"].ok and done["stuck"].ok


def definer_search_paths(conn) -> dict[str, str | None]:
    rows = conn.execute(
        """select p.oid::regprocedure::text as signature,
                  (select c from unnest(p.proconfig) c where c like 'search_path=%%') as search_path
             from pg_proc p
            where p.pronamespace = 'public'::regnamespace and p.prosecdef
            order by 1"""
    ).fetchall()
    assert len(rows) >= 20
    return {r["signature"]: r["search_path"] for r in rows}


def test_no_definer_function_searches_public(token_schema, new_conn):
    """Before: every SECURITY DEFINER function in public searches public. After: each
    pins search_path, and none names public (or $user)."""
    paths = definer_search_paths(new_conn(token_schema.url))

    if not token_schema.hardened:
        assert all(p == "search_path=pg_catalog, public, pg_temp" for p in paths.values()), paths
        return

    assert all(p is not None for p in paths.values()), paths
    searching_public = {s: p for s, p in paths.items() if "public" in p or "$user" in p}
    assert searching_public == {}
    assert set(paths.values()) == {"search_path=pg_catalog, pg_temp"}
