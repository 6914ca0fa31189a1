"""Settings from the environment (and a `.env` file), validated once at start.

Every setting is `INGEST_<NAME>`; the database URL is also read from the conventional
`DATABASE_URL`. A bad value raises ConfigError naming the variable, so the CLI can print
one line instead of a pydantic traceback.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import platformdirs
import psycopg
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ingestion_pipeline.errors import ConfigError

ENV_PREFIX = "INGEST_"
APP_NAME = "ingestion-pipeline"
LEGACY_DATA_DIR_NAME = ".ingest"


def default_data_dir() -> Path:
    """The user's data folder for this application (platformdirs' convention:
    `$XDG_DATA_HOME/ingestion-pipeline`, else `~/.local/share/ingestion-pipeline` on Linux):
    one embedded server per user, whichever folder a command runs in."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def legacy_data_dir(start: Path | None = None) -> Path | None:
    """The nearest `.ingest` holding an embedded server, in the working folder or above it:
    where releases before the per-user default kept a server per folder. No longer used
    unless INGEST_DATA_DIR names it; the commands say so (db/connection.py)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / LEGACY_DATA_DIR_NAME / "pgdata").is_dir():
            return folder / LEGACY_DATA_DIR_NAME
    return None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        extra="ignore",
        validate_default=True,
        populate_by_name=True,
    )

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "INGEST_DATABASE_URL"),
        description="PostgreSQL URL; unset means the embedded server under data_dir.",
    )
    # A direct (session-keeping) URL of the same database, for what a transaction-mode pooler
    # cannot carry: Dagster's own storage sets session parameters. Supabase gives both URLs.
    direct_database_url: str | None = Field(default=None, description="Direct URL when DATABASE_URL is a pooler.")
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Embedded server and local state (default: the user's data folder, shared by every folder).",
    )
    pool_min_size: int = Field(default=1, ge=0)
    # Unset: enough for the jobs in flight (worker_concurrency + 2, at least 10).
    pool_max_size: int | None = Field(default=None, ge=1)
    # Server-side prepared statements: off (None), safe behind a transaction-mode pooler.
    # A number N prepares a statement after N runs: only for direct connections.
    prepare_threshold: int | None = Field(default=None, ge=0)
    connect_timeout_seconds: int = Field(default=10, ge=1)
    # Jobs in flight per worker. Unset: 4 when parsing in the worker's threads, else
    # 4 + 4 per parsing child (at most 64), so that while some jobs wait on the database
    # every child still has a document to parse (bench/README.md, "Parsing in children").
    worker_concurrency: int | None = Field(default=None, ge=1, le=256)
    claim_batch_size: int = Field(default=10, ge=1, le=1000)
    heartbeat_interval_seconds: float = Field(default=30.0, gt=0)
    # Bulk acknowledgement: a finished job waits at most this long for others to finish
    # (they are acknowledged in one statement), and at most this many go in one statement.
    ack_delay_seconds: float = Field(default=0.01, ge=0, le=5)
    ack_max_jobs: int = Field(default=100, ge=1, le=1000)
    claim_retry_attempts: int = Field(default=5, ge=1, le=20)
    stale_after_seconds: int = Field(default=300, ge=1)
    max_attempts: int = Field(default=3, ge=1, le=100)
    retry_backoff_seconds: float = Field(default=5.0, ge=0)
    retry_backoff_max_seconds: float = Field(default=300.0, ge=0)
    # wordllama: the static model inside the wordllama package, offline (docs/embeddings.md)
    embedder: str = Field(default="wordllama", pattern="^(none|hash|wordllama|static|openai)$")
    # INGEST_EMBEDDER=static: a Model2Vec or sentence-transformers StaticEmbedding folder.
    static_model_path: str | None = None
    # INGEST_EMBEDDER=openai: any OpenAI-compatible /embeddings endpoint (docs/embeddings.md).
    openai_base_url: str = Field(default="https://api.openai.com/v1")
    openai_model: str | None = None
    # Sent as `dimensions` only when set (models that shorten their vectors); every vector
    # returned is checked against it.
    openai_dimensions: int | None = Field(default=None, ge=1, le=65_536)
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("INGEST_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    # Chunks per request. 32 fits the smallest common server limit
    # (text-embeddings-inference's --max-client-batch-size); OpenAI takes up to 2048.
    openai_batch_size: int = Field(default=32, ge=1, le=2048)
    openai_timeout_seconds: float = Field(default=60.0, gt=0)
    # The client's own retries of 408/409/429/5xx, timeouts and connection errors, with its
    # backoff (Retry-After honoured); after them the job is retried by the queue.
    openai_max_retries: int = Field(default=2, ge=0, le=10)
    # How vectors travel: base64 (what the official client asks for; ~20x cheaper to decode
    # than JSON floats at 1536 dimensions) or float, for a server that refuses base64.
    openai_encoding_format: str = Field(default="base64", pattern="^(base64|float)$")
    # Parsing (and chunking, embedding) in child processes of the worker (worker/isolation.py):
    # how many (default: one per core; 0 parses in the worker's own threads), and the limits
    # past which a document fails for good with the reason.
    parse_processes: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=0, le=256)
    parse_timeout_seconds: float = Field(default=120.0, gt=0)
    parse_memory_mb: int = Field(default=2048, ge=128)
    parse_tasks_per_child: int = Field(default=200, ge=1)
    # Scans (images, PDF pages without a text layer) through Tesseract: auto reads them when
    # Tesseract is installed; off fails an image and skips such pages. Languages are
    # Tesseract's codes joined by "+" (each needs Debian's tesseract-ocr-LANG).
    ocr: str = Field(default="auto", pattern="^(auto|off)$")
    ocr_languages: str = Field(default="eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
    ocr_max_pages: int = Field(default=200, ge=1)
    # Chunks (processing/chunking.py): at most this many characters each, consecutive ones
    # sharing up to the overlap. 100 is processing's floor (MIN_CHUNK_CHARS: a smaller chunk
    # carries too little context); 10,000 (~2,500 tokens) stays well inside what the embedders
    # take in one input and keeps a search hit a passage, not a chapter. Read when a document
    # is built: a change applies to documents indexed from then on (`ingest reindex --all`).
    chunk_chars: int = Field(default=1200, ge=100, le=10_000)
    chunk_overlap_chars: int = Field(default=150, ge=0)
    # A job still running this long after its claim is failed, and its lease no longer renewed.
    job_timeout_seconds: float = Field(default=1800.0, gt=0)
    # Dagster: drain runs and the janitor. A drain run claims while work is claimable, up to
    # a job and a time budget (then it ends, so the UI shows progress and a deploy can roll).
    drain_jobs_per_run: int = Field(default=10_000, ge=1)
    drain_run_seconds: float = Field(default=300.0, gt=0, le=86_400)
    # The sensor keeps one drain run per this many claimable jobs, at most max_drain_runs
    # (one per core: the runs share the parsing children, cores / runs each, and each run's
    # own process does its database work under its own interpreter lock).
    drain_backlog_per_run: int = Field(default=250, ge=1)
    max_drain_runs: int = Field(default_factory=lambda: min(os.cpu_count() or 1, 64), ge=1, le=64)
    janitor_cron: str = Field(default="*/10 * * * *")
    # The sensors' minimum_interval_seconds. Dagster's daemon passes over its sensors every
    # 5 s and skips one whose last tick began less than the interval ago: at 5 a sensor runs
    # every other pass (10 s), at 1 on every pass, so a new batch waits at most ~5 s for it.
    import_sensor_interval_seconds: int = Field(default=1, ge=1, le=3600)
    batch_sensor_interval_seconds: int = Field(default=60, ge=1, le=3600)
    # sync_source_sensor's: how often registered sources are looked at (their --every is
    # in minutes, so a minute is fine-grained enough).
    source_sensor_interval_seconds: int = Field(default=60, ge=1, le=3600)
    # index_totals_sensor's: how soon the asset shows a drain Dagster did not run (`ingest
    # work`); each tick is one read of the totals (a pass over documents and jobs).
    index_sensor_interval_seconds: int = Field(default=30, ge=1, le=3600)
    # The document_index check `pending_jobs_fresh` fails when a pending job waited longer.
    max_pending_age_seconds: int = Field(default=3600, ge=1)
    janitor_time_budget_seconds: float = Field(default=60.0, gt=0)
    cleanup_batch_size: int = Field(default=100, ge=1)
    # Versions whose bytes are kept per document, the latest included: 1 keeps only what the
    # next build reads. More keeps older versions' bytes (`ingest show KEY --version V --bytes`)
    # when a new version is enqueued; the janitor removes those beyond it.
    keep_versions: int = Field(default=1, ge=1, le=1000)
    max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    # `ingest search`: a resident process of the user answers it (cli/search_client.py), started
    # by a search nothing answered, gone after this long without a search; off: each search runs
    # in its own process and starts nothing. The search reads INGEST_SEARCH_SERVER from the
    # environment itself (no pydantic); the resident process reads both as settings.
    search_server: str = Field(default="auto", pattern="^(auto|off)$")
    search_server_idle_seconds: float = Field(default=600.0, gt=0, le=86_400)

    @field_validator("database_url", "direct_database_url")
    @classmethod
    def _parseable_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            psycopg.conninfo.conninfo_to_dict(value)
        except psycopg.ProgrammingError:
            # libpq's parse message may quote the password: say what is expected instead.
            raise ValueError(
                "not a PostgreSQL connection URL (expected postgresql://user:password@host:port/dbname "
                "or key=value pairs)"
            ) from None
        return value

    @field_validator("openai_model")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("openai_base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "not an http(s) URL (expected e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1)"
            )
        return value.strip()

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if self.embedder == "openai" and not self.openai_model:
            raise ValueError(
                f"{ENV_PREFIX}OPENAI_MODEL must be set when {ENV_PREFIX}EMBEDDER=openai "
                "(the embedding model's name, e.g. text-embedding-3-small)"
            )
        if self.embedder == "static" and not self.static_model_path:
            raise ValueError(
                f"{ENV_PREFIX}STATIC_MODEL_PATH must be set when {ENV_PREFIX}EMBEDDER=static "
                "(a Model2Vec or sentence-transformers StaticEmbedding folder)"
            )
        if self.chunk_overlap_chars * 2 >= self.chunk_chars:
            raise ValueError(
                f"{ENV_PREFIX}CHUNK_OVERLAP_CHARS ({self.chunk_overlap_chars}) must be less than half of "
                f"{ENV_PREFIX}CHUNK_CHARS ({self.chunk_chars}): a larger overlap repeats most of every chunk "
                "in the next one"
            )
        if self.worker_concurrency is None:
            self.worker_concurrency = min(4 + 4 * self.parse_processes, 64)
        if self.pool_max_size is None:
            self.pool_max_size = max(10, self.worker_concurrency + 2)
        if self.pool_min_size > self.pool_max_size:
            raise ValueError(f"{ENV_PREFIX}POOL_MIN_SIZE must not exceed {ENV_PREFIX}POOL_MAX_SIZE")
        # A heartbeat must land several times inside the stale window, or a slow tick
        # lets another worker reclaim a live job (R1).
        if self.heartbeat_interval_seconds * 3 > self.stale_after_seconds:
            raise ValueError(
                f"{ENV_PREFIX}HEARTBEAT_INTERVAL_SECONDS must be at most a third of {ENV_PREFIX}STALE_AFTER_SECONDS"
            )
        return self

    @property
    def data_dir_is_default(self) -> bool:
        """True when nothing set INGEST_DATA_DIR: the per-user folder is in use."""
        return "data_dir" not in self.model_fields_set

    # The two sizes validation fills in when unset (_coherent), typed as the numbers they then are.

    @property
    def resolved_worker_concurrency(self) -> int:
        if self.worker_concurrency is None:
            raise RuntimeError("Settings were not validated: worker_concurrency is unset")
        return self.worker_concurrency

    @property
    def resolved_pool_max_size(self) -> int:
        if self.pool_max_size is None:
            raise RuntimeError("Settings were not validated: pool_max_size is unset")
        return self.pool_max_size


def _env_name(loc: tuple[int | str, ...]) -> str:
    """The variable a user sets. pydantic reports the field name for constructor values
    and the alias (e.g. 'DATABASE_URL') for environment values."""
    if not loc:
        return "settings"
    field = str(loc[0]).lower().removeprefix(ENV_PREFIX.lower())
    if field == "database_url":
        return "DATABASE_URL"
    return f"{ENV_PREFIX}{field.upper()}"


def load_settings(**overrides: Any) -> Settings:
    """Build Settings, turning validation errors into one ConfigError line."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        message = err["msg"].removeprefix("Value error, ")
        name = _env_name(err.get("loc", ()))
        if name == "settings":
            raise ConfigError(f"bad settings: {message}") from None
        shown = err.get("input")
        # Never echo a URL or a key back: a URL may carry a password.
        echo = not name.endswith(("_URL", "_KEY")) and isinstance(shown, (str, int, float))
        got = f" (got {shown!r})" if echo else ""
        raise ConfigError(f"bad setting {name}: {message}{got}") from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
