-- Named queries used by the Python layer. Each query starts with a `-- name:` line;
-- ingestion_pipeline/db/queries.py loads them. Parameters are server-side bound.

-- name: migration_lock
-- Two migrators never interleave, even across hosts. Transaction-scoped (held by an open
-- transaction of its own connection): safe through a transaction-mode pooler, and released
-- by the server however the migrator ends. Tried, never waited for: a statement waiting
-- for the lock holds a snapshot, and CREATE INDEX CONCURRENTLY in the running migrator
-- waits for every older snapshot, so a waiting migrator would hang the running one. The
-- key is formatted in as a literal: with no parameters no portal keeps a snapshot open
-- after the statement, and the holder must hold none.
select pg_try_advisory_xact_lock({key}) as locked;

-- name: migration_lock_timeout
-- Transaction-local: set inside each migration's transaction, never on the session.
select set_config('lock_timeout', %(timeout)s, true);

-- name: ledger_exists
select to_regclass('public.ingest_schema_migrations') is not null as present;

-- name: ledger_rows
select version, name, checksum, transactional, applied_at, duration_ms
from public.ingest_schema_migrations
order by version;

-- name: ledger_record
insert into public.ingest_schema_migrations (version, name, checksum, transactional, duration_ms)
values (%(version)s, %(name)s, %(checksum)s, %(transactional)s, %(duration_ms)s);

-- name: connection_budget
-- What a new client may still open: max_connections less the slots reserved for superusers
-- (and, from PostgreSQL 16, for roles with pg_use_reserved_connections) less those in use.
select current_setting('max_connections')::int as max_connections,
       current_setting('superuser_reserved_connections')::int
         + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0) as reserved,
       (select count(*) from pg_catalog.pg_stat_activity where backend_type = 'client backend')::int as in_use;

-- name: server_version
select current_setting('server_version') as version, current_database() as database;

-- name: commit_asynchronously
-- This transaction's commit does not wait for its WAL to reach the disk (a sync's files:
-- operations/sync.py says why that loses nothing the sync reported).
select set_config('synchronous_commit', 'off', true);

-- name: flush_commits
-- A transaction with an id whose commit waits for the WAL flush, and so for every commit
-- before it, asynchronous ones included.
select pg_current_xact_id();

-- ---------------------------------------------------------------------------------
-- The schema level the RPC client talks to (db/schema_level.py); the RPCs themselves are
-- named in leases.sql, generations.sql, acks.sql and batches.sql.

-- name: chunk_columns
-- What document_chunks takes (db/chunk_table.py): title and heading (migration weighted_search),
-- and pgvector's embedding_vector (migration pgvector).
select exists (select 1 from pg_catalog.pg_attribute
               where attrelid = to_regclass('document_chunks') and attname = 'heading' and not attisdropped
) as headings,
       exists (select 1 from pg_catalog.pg_attribute
               where attrelid = to_regclass('document_chunks') and attname = 'embedding_vector'
                 and not attisdropped
) as embedding_vector;

-- name: rpc_schema_level
-- 6: this release (document versions); 5: the previous release (stage rows in acks); 0: older.
select case
    when to_regprocedure('enqueue_document_version(text,text,text,text,bigint,text,uuid,integer,boolean,'
                         'timestamptz,text)') is not null then 6
    when to_regprocedure('insert_ingestion_job_stages(uuid,uuid,text,jsonb)') is not null then 5
    else 0
end as level;

-- ---------------------------------------------------------------------------------
-- Documents, sources and artifacts (not queue state: written directly).

-- name: store_document_source
-- The bytes of a document's latest version. Those of the version it replaces are replaced,
-- or first kept as that version's when `replaced_version` is given (INGEST_KEEP_VERSIONS > 1):
-- one statement, so both parts read the row as it was before it.
with kept as (
    insert into document_version_sources (document_id, version, content)
    select s.document_id, %(replaced_version)s, s.content
      from document_sources s
     where s.document_id = %(document_id)s and %(replaced_version)s::integer is not null
    on conflict (document_id, version) do nothing
)
insert into document_sources (document_id, content) values (%(document_id)s, %(content)s)
on conflict (document_id) do update set content = excluded.content;

-- name: document_notes
-- What the reader should know about how the indexed version was read (OCR stopped early,
-- attachments not indexed): written by each build into the document's metadata.
select coalesce(metadata -> 'notes', '[]'::jsonb) as notes
  from documents
 where id = %(document_id)s;

-- name: deleted_document_of_key
-- The latest deleted document of a key in a collection (`ingest show` of a key no live
-- document has), by documents_collection_key_c.
select id as document_id, deleted_at
  from documents
 where collection = %(collection)s and source_key collate "C" = %(source_key)s and deleted_at is not null
 order by deleted_at desc, id
 limit 1;

-- name: kept_versions
-- The versions of a document whose bytes are at hand: the latest (document_sources) and
-- those kept (document_version_sources).
select d.version
  from documents d
 where d.id = %(document_id)s and d.version is not null
   and exists (select 1 from document_sources s where s.document_id = d.id)
union
select k.version from document_version_sources k where k.document_id = %(document_id)s
order by 1;

-- name: version_bytes
-- A version's bytes: the latest's from document_sources, an older one's if kept.
select s.content
  from documents d join document_sources s on s.document_id = d.id
 where d.id = %(document_id)s and coalesce(d.version, 1) = %(version)s
union all
select k.content from document_version_sources k where k.document_id = %(document_id)s and k.version = %(version)s
limit 1;

-- name: load_document_source
select content from document_sources where document_id = %(document_id)s;

-- name: copy_pages
copy document_pages (document_id, index_generation_id, ordinal, content) from stdin;

-- name: copy_sections
copy document_sections (document_id, index_generation_id, ordinal, heading, level, page_ordinal, content)
from stdin;

-- name: copy_chunks
-- Binary (worker/copy_rows.py), the vector last: a real[] that the trigger of migration pgvector
-- moves to embedding_vector where that column is.
copy document_chunks (document_id, index_generation_id, ordinal, section_ordinal, page_ordinal, content,
                      token_count, title, heading, embedding)
from stdin (format binary);

-- name: copy_chunk_vectors
-- Binary, the vector straight into pgvector's column (no trigger, no real[] on the way).
copy document_chunks (document_id, index_generation_id, ordinal, section_ordinal, page_ordinal, content,
                      token_count, title, heading, embedding_vector)
from stdin (format binary);

-- name: copy_chunks_without_headings
-- A database older than migration weighted_search (no title or heading column). Binary.
copy document_chunks (document_id, index_generation_id, ordinal, section_ordinal, page_ordinal, content,
                      token_count, embedding)
from stdin (format binary);

-- name: index_validity
-- The index `index` on table `table` (resolved as the migration resolved it): is it valid.
select i.indisvalid as valid, n.nspname as schema
from pg_catalog.pg_index i
join pg_catalog.pg_class c on c.oid = i.indexrelid
join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where c.relname = %(index)s and i.indrelid = pg_catalog.to_regclass(%(table)s);

-- name: indexed_document_ids
-- Documents with a committed index (of one collection, or of all when it is null), in id
-- order from after `after` (keyset pages): what `ingest reindex --all` rebuilds.
select id
from documents
where index_generation_id is not null and deleted_at is null and id > %(after)s
  and (%(collection)s::text is null or collection = %(collection)s::text)
order by id
limit %(limit)s;

-- name: documents_to_reembed
-- Live indexed documents (of one collection, or of all when it is null) whose committed
-- generation was not made by the embedder given: another name, dimensions (when given) or
-- version, or nothing recorded (committed before migration …_generations_record_their_embedder).
-- Keyset pages in id order: what `ingest reindex --embeddings` rebuilds.
select d.id
from documents d
join index_generations g on g.id = d.index_generation_id
where d.deleted_at is null and d.id > %(after)s
  and (%(collection)s::text is null or d.collection = %(collection)s::text)
  and (g.embedder is null
       or g.embedder is distinct from %(name)s::text
       or (%(dimensions)s::integer is not null and g.embedder_dimensions is distinct from %(dimensions)s::integer)
       or g.embedder_version is distinct from %(version)s::text)
order by d.id
limit %(limit)s;

-- name: installed_extensions
-- Which variant of the schema the database should match (drift-manifest.json "variants").
select extname as name from pg_extension order by 1;

-- name: failed_documents
-- Live documents whose latest version failed to index (a job of that version failed for good;
-- a later success settles it): `ingest health`'s warning. `searchable`: those of them that
-- keep an older version indexed, which search still returns.
select count(*) as documents, count(*) filter (where d.index_generation_id is not null) as searchable
from documents d
where d.deleted_at is null
  and exists (select 1 from ingestion_jobs j
              where j.document_id = d.id and j.status = 'failed'
                and j.document_version is not distinct from d.version);
