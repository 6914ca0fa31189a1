-- The migration ledger: one row per applied migration file. Created by the migrator
-- itself (before any migration can run), idempotently.
create table if not exists public.ingest_schema_migrations (
    version       text primary key check (version ~ '^[0-9]{14}$'),
    name          text not null,
    checksum      text not null check (checksum ~ '^[0-9a-f]{64}$'),
    transactional boolean not null default true,
    applied_at    timestamptz not null default now(),
    duration_ms   integer not null check (duration_ms >= 0)
);
