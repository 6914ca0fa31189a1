-- Named queries used by the Python layer. Each query starts with a `-- name:` line;
-- ingestion_pipeline/db/queries.py loads them. Parameters are server-side bound.

-- name: migration_lock
-- Session-level: two migrators never interleave, even across hosts.
select pg_advisory_lock(%(key)s);

-- name: migration_lock_timeout
-- Set after the advisory lock is held (that wait must not time out).
select set_config('lock_timeout', %(timeout)s, false);

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

-- ---------------------------------------------------------------------------------
-- The state-machine RPCs. Named notation (`p_x => value`) so a call resolves to
-- exactly one signature. Fenced RPCs come in one form per schema generation
-- (db/fences.py): the newest passes the lease token, `*_worker_id` the worker-id fence
-- of the hardening migration, `*_legacy` the pre-hardening (unfenced) call.

-- name: rpc_fence_level
-- Which generation of fenced signatures this database has (resolved like the calls are).
select case
    when to_regprocedure('fail_or_retry_ingestion_job(uuid,uuid,uuid,boolean,text,text,text,timestamptz,text,bigint,'
                         'double precision)') is not null then 3
    when to_regprocedure('commit_and_complete_ingestion_job(uuid,uuid,uuid,bigint,jsonb,uuid,text)') is not null then 2
    when to_regprocedure('heartbeat_ingestion_job(uuid,text,integer,text)') is not null then 1
    else 0
end as level;

-- name: rpc_create_batch
select create_import_batch(p_name => %(name)s, p_metadata => %(metadata)s) as result;

-- name: rpc_enqueue
select enqueue_ingestion_job(p_document_id => %(document_id)s, p_batch_id => %(batch_id)s,
    p_kind => %(kind)s, p_max_attempts => %(max_attempts)s) as result;

-- name: rpc_claim
select * from claim_ingestion_jobs(p_worker_id => %(worker_id)s, p_claim_limit => %(limit)s,
    p_stale_after_seconds => %(stale_after_seconds)s);

-- name: rpc_heartbeat
select heartbeat_ingestion_job(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_progress => %(progress)s, p_stage => %(stage)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_heartbeat_worker_id
select heartbeat_ingestion_job(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_progress => %(progress)s, p_stage => %(stage)s) as result;

-- name: rpc_begin_generation
select begin_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_worker_id => %(worker_id)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_begin_generation_worker_id
select begin_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_worker_id => %(worker_id)s) as result;

-- name: rpc_commit_generation
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_worker_id => %(worker_id)s,
    p_metadata => %(metadata)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_commit_generation_worker_id
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_worker_id => %(worker_id)s,
    p_metadata => %(metadata)s) as result;

-- name: rpc_commit_generation_legacy
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_metadata => %(metadata)s) as result;

-- name: rpc_complete
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s, p_worker_id => %(worker_id)s,
    p_lease_token => %(lease_token)s) as result;

-- name: rpc_complete_worker_id
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s, p_worker_id => %(worker_id)s) as result;

-- name: rpc_complete_legacy
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s) as result;

-- name: rpc_commit_and_complete
select commit_and_complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_lease_token => %(lease_token)s, p_metadata => %(metadata)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s) as result;

-- name: rpc_fail_or_retry
-- The server computes next_run_at = now() + p_retry_delay_seconds (its own clock).
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s,
    p_worker_id => %(worker_id)s, p_lease_token => %(lease_token)s,
    p_retry_delay_seconds => %(retry_delay_seconds)s) as result;

-- name: rpc_fail_or_retry_lease_token
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s,
    p_worker_id => %(worker_id)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_fail_or_retry_worker_id
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s,
    p_worker_id => %(worker_id)s) as result;

-- name: rpc_fail_or_retry_legacy
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s) as result;

-- name: rpc_refresh_batch
select refresh_import_batch_status(p_batch_id => %(batch_id)s) as result;

-- name: rpc_retry
select retry_ingestion_job(p_job_id => %(job_id)s) as result;

-- name: rpc_expire_stale
select expire_stale_ingestion_jobs(p_stale_after_seconds => %(stale_after_seconds)s) as result;

-- name: rpc_cleanup
select cleanup_abandoned_document_index_generations(p_document_id => %(document_id)s,
    p_limit => %(limit)s, p_dry_run => %(dry_run)s) as result;

-- name: rpc_queue_health
select ingestion_queue_health(p_stale_after_seconds => %(stale_after_seconds)s) as result;

-- name: rpc_record_stage
select record_ingestion_job_stage(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_stage => %(stage)s, p_started_at => %(started_at)s, p_finished_at => %(finished_at)s,
    p_detail => %(detail)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_record_stage_worker_id
select record_ingestion_job_stage(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_stage => %(stage)s, p_started_at => %(started_at)s, p_finished_at => %(finished_at)s,
    p_detail => %(detail)s) as result;

-- name: rpc_sensor_state
select ingestion_sensor_state(p_stale_after_seconds => %(stale_after_seconds)s, p_limit => %(limit)s) as result;

-- name: rpc_refresh_stuck_batches
select refresh_stuck_import_batches(p_limit => %(limit)s) as result;

-- name: rpc_batch_report
select ingestion_batch_report(p_batch_id => %(batch_id)s, p_limit => %(limit)s) as result;

-- ---------------------------------------------------------------------------------
-- Documents, sources and artifacts (not queue state: written directly).

-- name: insert_document
-- Identical live bytes map to the existing document (no row returned then).
insert into documents (batch_id, source_name, mime_type, content_sha256, byte_size)
values (%(batch_id)s, %(source_name)s, %(mime_type)s, %(content_sha256)s, %(byte_size)s)
on conflict (content_sha256) where deleted_at is null do nothing
returning id;

-- name: insert_document_source
insert into document_sources (document_id, content) values (%(document_id)s, %(content)s);

-- name: find_live_document
select id, status, index_generation_id from documents
where content_sha256 = %(content_sha256)s and deleted_at is null;

-- name: load_document_source
select content from document_sources where document_id = %(document_id)s;

-- name: copy_pages
copy document_pages (document_id, index_generation_id, ordinal, content) from stdin;

-- name: copy_sections
copy document_sections (document_id, index_generation_id, ordinal, heading, level, page_ordinal, content)
from stdin;

-- name: copy_chunks
copy document_chunks (document_id, index_generation_id, ordinal, section_ordinal, page_ordinal, content,
                      token_count, embedding)
from stdin;

-- name: search_chunks
-- Committed generations only (the view), best first.
select c.document_id,
       coalesce(d.title, d.source_name) as title,
       d.source_name,
       s.heading,
       c.ordinal as chunk_ordinal,
       ts_rank_cd(c.content_tsv, q.query) as rank,
       ts_headline('english', c.content, q.query,
                   'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]') as snippet
from websearch_to_tsquery('english', %(query)s) as q(query)
join committed_document_chunks c on c.content_tsv @@ q.query
join documents d on d.id = c.document_id
left join document_sections s
       on s.document_id = c.document_id
      and s.index_generation_id = c.index_generation_id
      and s.ordinal = c.section_ordinal
order by rank desc, c.document_id, c.ordinal
limit %(limit)s;

-- name: index_validity
-- The index `index` on table `table` (resolved as the migration resolved it): is it valid.
select i.indisvalid as valid, n.nspname as schema
from pg_catalog.pg_index i
join pg_catalog.pg_class c on c.oid = i.indexrelid
join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where c.relname = %(index)s and i.indrelid = pg_catalog.to_regclass(%(table)s);
