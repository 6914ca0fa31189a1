"""Shared fixtures: a real PostgreSQL server per session, migrated template databases,
and a fresh database per test cloned from a template (fast and isolated).

The suite always runs on the embedded server (the users' default). When
TEST_DATABASE_URL is set (CI points it at the machine's PostgreSQL 15), every
database-backed test runs on that server too: the `pg_server` fixture is parametrized.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg import sql

from ingestion_pipeline.db import embedded
from ingestion_pipeline.db import migrate as migrator
from ingestion_pipeline.db.connection import connect
from ingestion_pipeline.settings import default_data_dir
from tests.run_databases import Run, drop_abandoned
from tests.spare_databases import SpareDatabases

# Each session's temporary folders (the embedded servers' data among them) are its own; a
# missing system tool skips the tests that need it, named at the end of the run (tests/tools.py).
pytest_plugins = ("tests.session_temp", "tests.tools")

# pytest rewrites the asserts of test modules only: these helper modules hold test bodies and
# assertions moved out of test modules (tests/README.md), so they keep pytest's failure messages.
pytest.register_assert_rewrite(
    "tests.helpers",
    "tests.faults.mutation_run",
    "tests.race.artifact_fence_cases",
    "tests.race.lease_token_cases",
)

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL") or None

# The suite indexes without vectors unless a test asks for an embedder: 256 numbers per chunk
# made the corpus-heavy tests two to four times slower. The default embedder (wordllama) has
# tests of its own, end to end included (tests/embedding/test_static_embedder.py, whose
# clean_env fixture drops this variable), and so do the others (tests/embedding, tests/vector);
# the search and sync tests search as users do, with the default (tests/default_embedder.py).
os.environ.setdefault("INGEST_EMBEDDER", "none")
# `ingest search` asks the user's resident search process and starts one when none answers
# (cli/search_client.py): not in the suite, which would leave them behind (user_data_home stops
# any a test's own environment let start, and fails). tests/integration/test_search_server.py
# turns it on for its own, in a runtime folder of its own.
os.environ["INGEST_SEARCH_SERVER"] = "off"
HARDENING_NAME = "harden_state_rpcs"
LEASE_TOKENS_NAME = "lease_tokens"
RETRY_DELAY_NAME = "server_retry_delay"
BULK_ACK_NAME = "batch_counters_and_bulk_acks"
LIFECYCLE_NAME = "document_lifecycle"
STAGE_ROWS_NAME = "stage_rows_in_acks"
CANCELLED_BATCH_NAME = "cancelled_batches_take_no_files"
LOCK_ORDER_NAME = "one_lock_order"
VERSIONS_NAME = "document_versions"
BM25_NAME = "bm25_search"
SCOPED_SEARCH_NAME = "scoped_search"
SYNC_DELETES_NAME = "sync_deletes_under_the_listing_and_lease"
UPGRADE_WINDOW_NAME = "idle_janitor_passes_and_upgrade_window"
RELEASE_NAME = "release_worker_faults"
SEARCH_WORDS_NAME = "identifiers_options_and_stable_order"
VECTOR_SCOPE_NAME = "vector_search_in_scope_and_model"
LEXEME_CAP_NAME = "query_lexeme_cap"
COLLECTION_LOCK_NAME = "remove_collection_locks_its_name"


def version_before(name: str) -> str:
    """The version just before the migration called `name`: where its race tests must
    observe the bug that migration fixes."""
    files = migrator.discover(migrator.default_migrations_dir())
    index = next(i for i, f in enumerate(files) if f.name == name)
    return files[index - 1].version


def pre_hardening_version() -> str:
    return version_before(HARDENING_NAME)


def pre_tokens_version() -> str:
    return version_before(LEASE_TOKENS_NAME)


def pre_retry_delay_version() -> str:
    return version_before(RETRY_DELAY_NAME)


@pytest.fixture(scope="session", autouse=True)
def user_data_home(tmp_path_factory) -> Iterator[Path]:
    """The suite never touches the real user's data folder, where a command with nothing set
    starts the embedded server (settings.default_data_dir): XDG_DATA_HOME, which platformdirs
    reads on Linux, points this process and every process a test starts at a folder of the
    session's. A server a test left running there is stopped at the end."""
    home = tmp_path_factory.mktemp("xdg-data-home")
    previous = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(home)
    if not default_data_dir().is_relative_to(home):
        raise pytest.UsageError(f"XDG_DATA_HOME does not move the user's data folder here ({default_data_dir()})")
    yield home
    left = _stop_resident_searches(home)
    if embedded.pgdata_path(default_data_dir()).exists():
        embedded.stop(default_data_dir())
    if previous is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = previous
    assert not left, f"resident search processes of this session were left running (stopped now): {left}"


def _stop_resident_searches(home: Path) -> list[list[str]]:
    """Stop the resident search processes started by this session's commands (their
    XDG_DATA_HOME is its `home`, as every process a test starts has): their command lines."""
    found = []
    for process in psutil.process_iter(attrs=["cmdline"]):
        if "ingestion_pipeline.cli.search_server" not in (process.info["cmdline"] or []):
            continue
        with contextlib.suppress(psutil.Error):
            if Path(process.environ().get("XDG_DATA_HOME", "/")).is_relative_to(home):
                process.terminate()
                found.append(process)
    psutil.wait_procs(found, timeout=10)
    return [process.info["cmdline"] for process in found]


ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


@pytest.fixture
def artifacts(request, tmp_path) -> Iterator[Path]:
    """A folder for what a test keeps for people to look at (a browser test's screenshots):
    under the test's tmp path, and copied when the test ends, passed or failed, to
    test-artifacts/<test id> at the checkout's root (ignored by git; docs/testing.md)."""
    folder = tmp_path / "artifacts"
    folder.mkdir()
    yield folder
    if any(folder.iterdir()):
        target = ARTIFACTS / re.sub(r"[^\w.-]+", "_", request.node.nodeid)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)


# Databases this process made on each server and has not dropped yet: at the end of the
# session none may be left on a server that outlives the suite (TEST_DATABASE_URL's).
_UNDROPPED: dict[str, set[str]] = {}
_SPARES: dict[str, SpareDatabases] = {}  # per server (admin URL)
_RUNS: dict[str, Run] = {}  # servers that outlive the suite: this run's mark (tests/run_databases.py)


@dataclass(frozen=True)
class PgServer:
    name: str
    admin_url: str

    def url(self, dbname: str) -> str:
        return psycopg.conninfo.make_conninfo(self.admin_url, dbname=dbname)

    def create_database(self, name: str, template: str | None = None) -> str:
        with connect(self.admin_url) as conn:
            statement = sql.SQL("create database {}").format(sql.Identifier(name))
            if template:
                statement += sql.SQL(" template {}").format(sql.Identifier(template))
            conn.execute(statement)
            # The suite's databases are thrown away: a commit need not wait for its WAL flush
            # (on TEST_DATABASE_URL's server, fsync on, half a small test's time was such
            # waits). Durable still on a server crash, which no test causes; the server's own
            # settings are not touched.
            conn.execute(sql.SQL("alter database {} set synchronous_commit = off").format(sql.Identifier(name)))
            if self.admin_url in _RUNS:
                _RUNS[self.admin_url].mark(conn, name)
        _UNDROPPED.setdefault(self.admin_url, set()).add(name)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        if self.admin_url in _SPARES:  # a template: its clone made ahead goes first
            _SPARES[self.admin_url].forget(name)
        self._drop_now(name)

    def _drop_now(self, name: str) -> None:
        with connect(self.admin_url) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        _UNDROPPED.get(self.admin_url, set()).discard(name)

    def clone(self, template: str) -> str:
        """A new database cloned from `template`: its name."""
        name = f"ingest_t_{uuid.uuid4().hex[:12]}"
        self.create_database(name, template=template)
        return name

    def spares(self) -> SpareDatabases:
        """Clones made ahead of the tests that take them, drops behind (tests/spare_databases.py)."""
        if self.admin_url not in _SPARES:
            _SPARES[self.admin_url] = SpareDatabases(self.clone, self._drop_now)
        return _SPARES[self.admin_url]

    def close_spares(self) -> None:
        spares = _SPARES.pop(self.admin_url, None)
        if spares is not None:
            spares.close()

    def left_behind(self) -> list[str]:
        """Databases this process made here that still exist."""
        names = sorted(_UNDROPPED.get(self.admin_url, set()))
        with connect(self.admin_url) as conn:
            rows = conn.execute("select datname from pg_database where datname = any(%s)", (names,)).fetchall()
        return sorted(row["datname"] for row in rows)


def _server_params() -> list[str]:
    return ["embedded", "external"] if TEST_DATABASE_URL else ["embedded"]


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `pooler` exercise PgBouncer and the client behind it, not the server, and
    tests marked `one_server` the worker processes under faults (their SQL runs on both
    servers in the race tests): they run once, on TEST_DATABASE_URL's server when it is set
    (a TCP server, as in production), else on the embedded one."""
    if not TEST_DATABASE_URL:
        return
    keep, dropped = [], []
    for item in items:
        server = getattr(item, "callspec", None) and item.callspec.params.get("pg_server")
        once = item.get_closest_marker("pooler") or item.get_closest_marker("one_server")
        (dropped if once and server == "embedded" else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# Roles belong to the cluster, not to a database: on a fresh server, pytest-xdist's workers
# migrating their templates at once would race to create them (a unique violation in the
# migration's `if not exists ... create role`). Created once, under a lock, before any migration.
CLUSTER_ROLES = {"ingestion_worker": "nologin", "anon": "nologin noinherit", "authenticated": "nologin noinherit"}


def _ensure_cluster_roles(admin_url: str) -> None:
    with connect(admin_url) as conn, conn.transaction():
        conn.execute("select pg_advisory_xact_lock(hashtext('ingestion-pipeline tests: cluster roles'))")
        for role, options in CLUSTER_ROLES.items():
            if not conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone():
                conn.execute(sql.SQL("create role {} " + options).format(sql.Identifier(role)))


@pytest.fixture(scope="session", params=_server_params())
def pg_server(request, tmp_path_factory) -> Iterator[PgServer]:
    if request.param == "external":
        server = PgServer("external", TEST_DATABASE_URL)
        _ensure_cluster_roles(server.admin_url)
        drop_abandoned(server.admin_url)  # of runs killed before their end
        _RUNS[server.admin_url] = Run(server.admin_url)
        try:
            yield server
            server.close_spares()
        finally:
            left = server.left_behind()
            for name in left:  # clean up, then say so: a fixture's drop did not happen
                server.drop_database(name)
            _RUNS.pop(server.admin_url).close()
            drop_abandoned(server.admin_url)  # an xdist worker that died before this one ended
        assert left == [], f"the suite left {len(left)} database(s) behind on TEST_DATABASE_URL's server: {left}"
        return
    data_dir = tmp_path_factory.mktemp("embedded-pg")
    server = PgServer("embedded", embedded.start(data_dir))
    # This server is the suite's own and thrown away with it: no fsync (a killed server
    # still recovers from the WAL in the page cache; only a machine crash would lose data).
    # Cloning and dropping a database take half the time.
    with connect(server.admin_url) as conn:
        conn.execute("alter system set fsync = off")
        conn.execute("select pg_reload_conf()")
    yield server
    server.close_spares()
    embedded.stop(data_dir)


@dataclass(frozen=True)
class Templates:
    head: str
    pre_hardening: str
    pre_tokens: str
    pre_retry_delay: str


@pytest.fixture(scope="session")
def templates(pg_server: PgServer) -> Iterator[Templates]:
    suffix = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
    made = Templates(
        head=f"ingest_tpl_head_{suffix}",
        pre_hardening=f"ingest_tpl_pre_{suffix}",
        pre_tokens=f"ingest_tpl_pretok_{suffix}",
        pre_retry_delay=f"ingest_tpl_predelay_{suffix}",
    )
    migrator.migrate(pg_server.create_database(made.head))
    migrator.migrate(pg_server.create_database(made.pre_hardening), target=pre_hardening_version())
    migrator.migrate(pg_server.create_database(made.pre_tokens), target=pre_tokens_version())
    migrator.migrate(pg_server.create_database(made.pre_retry_delay), target=pre_retry_delay_version())
    yield made
    for name in (made.head, made.pre_hardening, made.pre_tokens, made.pre_retry_delay):
        pg_server.drop_database(name)


def _fresh_database(pg_server: PgServer, template: str) -> Iterator[str]:
    """A fresh clone of `template` (its URL), dropped after. Also when it is never resumed:
    `for url in _fresh_database(…)` in a fixture or test whose body skips or fails before
    the loop ends closes this generator, as the exception leaves the loop."""
    name = pg_server.spares().take(template)
    try:
        yield pg_server.url(name)
    finally:
        pg_server.spares().drop_later(name)


@pytest.fixture
def db_url(pg_server: PgServer, templates: Templates) -> Iterator[str]:
    """A fresh database at the head migration."""
    yield from _fresh_database(pg_server, templates.head)


@pytest.fixture
def pre_hardening_db_url(pg_server: PgServer, templates: Templates) -> Iterator[str]:
    """A fresh database migrated to just before the hardening migration."""
    yield from _fresh_database(pg_server, templates.pre_hardening)


@pytest.fixture
def pre_tokens_db_url(pg_server: PgServer, templates: Templates) -> Iterator[str]:
    """A fresh database migrated to just before the lease-token migration."""
    yield from _fresh_database(pg_server, templates.pre_tokens)


@pytest.fixture
def empty_db_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database (no migrations)."""
    yield from _fresh_database(pg_server, "template0")


@pytest.fixture
def dagster_database(pg_server: PgServer) -> Iterator[str]:
    """For a test whose Dagster storage is the `dagster` database that the storage creates
    on the pipeline's server on first use (no DAGSTER_PG_URL): its name. The test that found
    none drops it after, so the suite leaves none behind on TEST_DATABASE_URL's server; such
    tests hold a lock on the server while they run, so that one's drop never pulls the
    database from under another's (pytest-xdist's processes share that server)."""
    from ingestion_pipeline.orchestration.instance import DAGSTER_DATABASE

    query = "select 1 from pg_database where datname = %s"
    with connect(pg_server.admin_url) as lock:
        lock.execute("select pg_advisory_lock(hashtext('ingestion-pipeline tests: the dagster database'))")
        there = lock.execute(query, (DAGSTER_DATABASE,)).fetchone() is not None
        yield DAGSTER_DATABASE
        if not there and lock.execute(query, (DAGSTER_DATABASE,)).fetchone() is not None:
            pg_server.drop_database(DAGSTER_DATABASE)


@dataclass(frozen=True)
class Schema:
    url: str
    hardened: bool
    # The server itself when `url` goes through a pooler (tests/race/test_fences_through_pooler.py):
    # for connections that need a session or a backend of their own (lock barriers, observers
    # of pg_blocking_pids). None when `url` is the server.
    server_url: str | None = None

    @property
    def direct_url(self) -> str:
        return self.server_url or self.url


@pytest.fixture(params=["pre_hardening", "head"])
def schema(request, pg_server: PgServer, templates: Templates) -> Iterator[Schema]:
    """For race tests: each runs on the pre-hardening schema (where it must observe the
    bug) and at head (where it must pass)."""
    template = templates.head if request.param == "head" else templates.pre_hardening
    for url in _fresh_database(pg_server, template):
        yield Schema(url=url, hardened=request.param == "head")


@pytest.fixture(params=["pre_tokens", "head"])
def token_schema(request, pg_server: PgServer, templates: Templates) -> Iterator[Schema]:
    """For the lease-token race tests: each runs just before the lease-token migration
    (where it must observe the bug) and at head (where it must pass)."""
    template = templates.head if request.param == "head" else templates.pre_tokens
    for url in _fresh_database(pg_server, template):
        yield Schema(url=url, hardened=request.param == "head")


@pytest.fixture(params=["pre_retry_delay", "head"])
def retry_delay_schema(request, pg_server: PgServer, templates: Templates) -> Iterator[Schema]:
    """For the tests of the server-retry-delay migration: each runs just before it (where
    it must observe the bug) and at head (where it must pass)."""
    template = templates.head if request.param == "head" else templates.pre_retry_delay
    for url in _fresh_database(pg_server, template):
        yield Schema(url=url, hardened=request.param == "head")


@pytest.fixture(scope="session")
def template_before(pg_server: PgServer) -> Iterator:
    """template_before(name): a template database migrated to just before the migration
    called `name`, built on first use (few tests need one) and kept for the session."""
    made: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in made:
            made[name] = f"ingest_tpl_before_{name[:20]}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
            migrator.migrate(pg_server.create_database(made[name]), target=version_before(name))
        return made[name]

    yield get
    for template in made.values():
        pg_server.drop_database(template)


def before_and_head(migration: str, before: str, doc: str):
    """A fixture that runs a test twice: on a fresh database migrated to just before the
    migration called `migration` (param `before`) and on one at head. `hardened` says
    which; the templates are built on first use."""

    @pytest.fixture(params=[before, "head"])
    def fixture(request, pg_server: PgServer, templates: Templates, template_before) -> Iterator[Schema]:
        template = templates.head if request.param == "head" else template_before(migration)
        for url in _fresh_database(pg_server, template):
            yield Schema(url=url, hardened=request.param == "head")

    fixture.__doc__ = doc
    return fixture


bulk_schema = before_and_head(
    BULK_ACK_NAME,
    "pre_bulk",
    "The batch-counter and bulk-acknowledgement migration: before it (the client's "
    "one-call-per-item fallback) and at head.",
)
lifecycle_schema = before_and_head(
    LIFECYCLE_NAME,
    "pre_lifecycle",
    "The race tests of the document-lifecycle migration (delete a document, "
    "cancel a batch): before it, where they observe the bug with what an operator could do there instead, and "
    "at head, where they must pass.",
)
stage_rows_schema = before_and_head(
    STAGE_ROWS_NAME,
    "pre_stage_rows",
    "Before stage rows rode the acknowledgement (one call per stage row), and at head.",
)
cancelled_batch_schema = before_and_head(
    CANCELLED_BATCH_NAME,
    "pre_fix",
    "The race tests of enqueues into a cancelled batch: before the migration, where they observe the bug, and at head.",
)
versions_schema = before_and_head(
    VERSIONS_NAME,
    "pre_versions",
    "The race tests of document versions (migration …_document_versions.sql): before it, where a changed file "
    "is a second document, and at head, where the latest version always wins.",
)
bm25_schema = before_and_head(
    BM25_NAME,
    "pre_bm25",
    "Lexical search before the BM25 migration (term weights from the planner's row estimate, every matching "
    "chunk scored), where each test observes its defect, and at head, where it must pass.",
)
scoped_search_schema = before_and_head(
    SCOPED_SEARCH_NAME,
    "pre_scoped",
    "The fourth review's search defects (migration …_scoped_search.sql: other tenants' chunks spending a "
    "reader's budget, unbounded queries, app roles' table privilege, readable_documents reading every tenant): "
    "before it, where each test observes its defect, and at head, where it must pass.",
)
upgrade_window_schema = before_and_head(
    UPGRADE_WINDOW_NAME,
    "pre_upgrade_window",
    "Issue 44's janitor passes and upgrade-window holes (migration …_idle_janitor_passes_and_upgrade_window.sql): "
    "before it, where each test observes its defect, and at head, where it must pass.",
)
release_schema = before_and_head(
    RELEASE_NAME,
    "pre_release",
    "Before release_ingestion_job (a worker fault is retried at the cost of an attempt: the client's fallback), "
    "and at head (the attempt is refunded).",
)
search_words_schema = before_and_head(
    SEARCH_WORDS_NAME,
    "pre_search_words",
    "Issue 46's query defects (migration …_identifiers_options_and_stable_order.sql: a bare name missing the page "
    "that writes it qualified, an option read as an exclusion, the first results changing with p_limit): before "
    "it, where each test observes its defect, and at head, where it must pass.",
)
lock_order_schema = before_and_head(
    LOCK_ORDER_NAME,
    "pre_lock_order",
    "The third review's deadlocks and fence holes (migration "
    "…_one_lock_order.sql): before it, where each test observes its defect, and at head, where it must pass.",
)

vector_scope_schema = before_and_head(
    VECTOR_SCOPE_NAME,
    "pre_vector_scope",
    "The fifth review's vector defects (migration …_vector_search_in_scope_and_model.sql: the HNSW scan's "
    "budget spent on other tenants' means, a query compared with another model's vectors): before it, where "
    "each test observes its defect, and at head, where it must pass.",
)
lexeme_cap_schema = before_and_head(
    LEXEME_CAP_NAME,
    "pre_lexeme_cap",
    "The query cap before it counted lexemes (migration …_query_lexeme_cap.sql), and at head.",
)
collection_lock_schema = before_and_head(
    COLLECTION_LOCK_NAME,
    "pre_collection_lock",
    "remove_collection before it locked only its name (migration …_remove_collection_locks_its_name.sql: a SHARE "
    "lock on documents), and at head.",
)
sync_deletes_schema = before_and_head(
    SYNC_DELETES_NAME,
    "pre_sync_deletes",
    "A sync's deletes and its reads of a source's keys (migration …_sync_deletes_under_the_listing_and_lease.sql): "
    "before it, where each test observes its defect, and at head, where it must pass.",
)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    with connect(db_url) as connection:
        yield connection


@pytest.fixture
def open_connections() -> Iterator[list[psycopg.Connection]]:
    """Connections a test opens in addition to its main one; closed at teardown."""
    made: list[psycopg.Connection] = []
    yield made
    for connection in made:
        connection.close()


@pytest.fixture
def new_conn(open_connections):
    def make(url: str, autocommit: bool = True, **kwargs) -> psycopg.Connection:
        connection = connect(url, autocommit=autocommit, **kwargs)
        open_connections.append(connection)
        return connection

    return make


@pytest.fixture
def settings(db_url: str):
    """Settings for the head database; retries run at once (no backoff wait in tests)."""
    from ingestion_pipeline.settings import load_settings

    return load_settings(database_url=db_url, retry_backoff_seconds=0)


@pytest.fixture
def pool(db_url: str, settings):
    from ingestion_pipeline.db.connection import make_pool

    with make_pool(db_url, settings) as connection_pool:
        yield connection_pool


@pytest.fixture
def migrations_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    return folder
