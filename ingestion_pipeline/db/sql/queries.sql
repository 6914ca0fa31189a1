-- Named queries used by the Python layer. Each query starts with a `-- name:` line;
-- ingestion_pipeline/db/queries.py loads them. Parameters are server-side bound.

-- name: migration_lock
-- Session-level: two migrators never interleave, even across hosts.
select pg_advisory_lock(%(key)s);

-- name: migration_unlock
select pg_advisory_unlock(%(key)s);

-- name: ledger_exists
select to_regclass('public.ingest_schema_migrations') is not null as present;

-- name: ledger_rows
select version, name, checksum, transactional, applied_at, duration_ms
from public.ingest_schema_migrations
order by version;

-- name: ledger_record
insert into public.ingest_schema_migrations (version, name, checksum, transactional, duration_ms)
values (%(version)s, %(name)s, %(checksum)s, %(transactional)s, %(duration_ms)s);

-- name: server_version
select current_setting('server_version') as version, current_database() as database;
