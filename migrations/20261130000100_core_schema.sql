-- Core data model (SPEC §3): batches, documents and their bytes, the job queue, the
-- append-only stage log, index generations and the per-generation artifact tables.

create table import_batches (
    id              uuid primary key default gen_random_uuid(),
    name            text not null,
    status          text not null default 'pending'
                    check (status in ('pending', 'processing', 'completed', 'completed_with_errors')),
    total_files     integer not null default 0 check (total_files >= 0),
    completed_files integer not null default 0 check (completed_files >= 0),
    failed_files    integer not null default 0 check (failed_files >= 0),
    metadata        jsonb not null default '{}',
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    completed_at    timestamptz
);
create index import_batches_open on import_batches (created_at) where status in ('pending', 'processing');

create table documents (
    id                  uuid primary key default gen_random_uuid(),
    batch_id            uuid references import_batches (id) on delete set null,
    title               text,
    source_name         text not null,
    mime_type           text,
    content_sha256      text not null check (content_sha256 ~ '^[0-9a-f]{64}$'),
    byte_size           bigint not null check (byte_size >= 0),
    status              text not null default 'queued'
                        check (status in ('queued', 'processing', 'indexed', 'failed')),
    error_message       text,
    -- The committed generation: the only one readers see. Written only by RPCs.
    index_generation_id uuid,
    page_count          integer not null default 0,
    section_count       integer not null default 0,
    chunk_count         integer not null default 0,
    metadata            jsonb not null default '{}',
    deleted_at          timestamptz,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now()
);
-- Re-uploading identical bytes finds the live document instead of making a second one.
create unique index documents_live_content_sha256 on documents (content_sha256) where deleted_at is null;
create index documents_batch_id on documents (batch_id);

-- The uploaded bytes, written in the same transaction as the document and its job.
create table document_sources (
    document_id uuid primary key references documents (id) on delete cascade,
    content     bytea not null
);

-- Hot, update-heavy rows: a fillfactor below 100 leaves room for HOT updates (heartbeats).
create table ingestion_jobs (
    id            uuid primary key default gen_random_uuid(),
    document_id   uuid not null references documents (id) on delete cascade,
    batch_id      uuid references import_batches (id) on delete set null,
    kind          text not null default 'index' check (kind in ('index', 'reindex')),
    status        text not null default 'pending'
                  check (status in ('pending', 'processing', 'completed', 'failed')),
    stage         text not null default 'queued',
    progress      integer not null default 0 check (progress between 0 and 100),
    attempt_count integer not null default 0 check (attempt_count >= 0),
    max_attempts  integer not null default 3 check (max_attempts >= 1),
    locked_by     text,
    locked_at     timestamptz,
    next_run_at   timestamptz not null default now(),
    started_at    timestamptz,
    completed_at  timestamptz,
    error_message text,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now()
) with (fillfactor = 80);
-- R17: at most one open job per document.
create unique index ingestion_jobs_one_open_per_document
    on ingestion_jobs (document_id) where status in ('pending', 'processing');
-- Claim reads only open rows: its cost does not grow with finished jobs.
create index ingestion_jobs_claimable on ingestion_jobs (next_run_at, created_at) where status = 'pending';
create index ingestion_jobs_leased on ingestion_jobs (locked_at) where status = 'processing';
create index ingestion_jobs_batch_status on ingestion_jobs (batch_id, status);
create index ingestion_jobs_document_id on ingestion_jobs (document_id);

-- Append-only stage log. job_id deliberately has NO foreign key: log rows outlive the
-- jobs they describe (R24e).
create table ingestion_job_stages (
    id          bigint generated always as identity primary key,
    job_id      uuid not null,
    document_id uuid,
    worker_id   text,
    stage       text not null,
    started_at  timestamptz not null default now(),
    finished_at timestamptz,
    detail      jsonb not null default '{}'
);
create index ingestion_job_stages_job_id on ingestion_job_stages (job_id);

create table index_generations (
    id            uuid primary key default gen_random_uuid(),
    document_id   uuid not null references documents (id) on delete cascade,
    job_id        uuid,
    worker_id     text,
    status        text not null default 'building'
                  check (status in ('building', 'committed', 'superseded', 'abandoned')),
    page_count    integer,
    section_count integer,
    chunk_count   integer,
    created_at    timestamptz not null default now(),
    committed_at  timestamptz
);
create index index_generations_document_id on index_generations (document_id);
create unique index index_generations_one_committed
    on index_generations (document_id) where status = 'committed';

alter table documents
    add constraint documents_index_generation_id_fkey
    foreign key (index_generation_id) references index_generations (id) on delete set null;

-- Artifacts are keyed by (document, generation, ordinal) so two builds never collide.
create table document_pages (
    document_id         uuid not null references documents (id) on delete cascade,
    index_generation_id uuid not null references index_generations (id) on delete cascade,
    ordinal             integer not null check (ordinal >= 0),
    content             text not null,
    primary key (document_id, index_generation_id, ordinal)
);
create index document_pages_generation on document_pages (index_generation_id);

create table document_sections (
    document_id         uuid not null references documents (id) on delete cascade,
    index_generation_id uuid not null references index_generations (id) on delete cascade,
    ordinal             integer not null check (ordinal >= 0),
    heading             text,
    level               integer not null default 1,
    page_ordinal        integer,
    content             text not null,
    primary key (document_id, index_generation_id, ordinal)
);
create index document_sections_generation on document_sections (index_generation_id);

create table document_chunks (
    document_id         uuid not null references documents (id) on delete cascade,
    index_generation_id uuid not null references index_generations (id) on delete cascade,
    ordinal             integer not null check (ordinal >= 0),
    section_ordinal     integer,
    page_ordinal        integer,
    content             text not null,
    token_count         integer not null default 0,
    embedding           real[],
    content_tsv         tsvector generated always as (to_tsvector('english', content)) stored,
    primary key (document_id, index_generation_id, ordinal)
);
create index document_chunks_generation on document_chunks (index_generation_id);
create index document_chunks_content_tsv on document_chunks using gin (content_tsv);

-- What readers query: chunks of committed generations only, never a build in progress.
create view committed_document_chunks with (security_invoker = true) as
select c.*
from document_chunks c
join documents d on d.id = c.document_id and d.index_generation_id = c.index_generation_id
where d.deleted_at is null;
