-- The call forms of the schema generations before the production client's support window
-- (ingestion_pipeline/db/schema_level.py), for tests/any_schema_rpc.py: the race tests drive
-- the schema before each fix with these, to observe the bug it fixes. Named like the
-- package's queries; `*_worker_id`: the worker-id fence of the hardening migration;
-- `*_legacy`: the pre-hardening (unfenced) call; `*_lease_token`: before the server-side
-- retry delay.

-- name: rpc_fence_level
-- Which generation of fenced signatures this database has (as the client of those releases
-- resolved it): 0 pre-hardening … 7 this release.
select case
    when to_regprocedure('enqueue_document_version(text,text,text,text,bigint,text,uuid,integer,boolean,'
                         'timestamptz,text)') is not null then 7
    when to_regprocedure('max_ack_items()') is not null then 6
    when to_regprocedure('insert_ingestion_job_stages(uuid,uuid,text,jsonb)') is not null then 5
    when to_regprocedure('complete_ingestion_jobs(jsonb)') is not null then 4
    when to_regprocedure('fail_or_retry_ingestion_job(uuid,uuid,uuid,boolean,text,text,text,timestamptz,text,bigint,'
                         'double precision)') is not null then 3
    when to_regprocedure('commit_and_complete_ingestion_job(uuid,uuid,uuid,bigint,jsonb,uuid,text)') is not null then 2
    when to_regprocedure('heartbeat_ingestion_job(uuid,text,integer,text)') is not null then 1
    else 0
end as level;

-- name: rpc_complete_worker_id
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s, p_worker_id => %(worker_id)s) as result;

-- name: rpc_complete_legacy
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s) as result;

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

-- name: rpc_begin_generation_worker_id
select begin_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_worker_id => %(worker_id)s) as result;

-- name: rpc_commit_generation_worker_id
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_worker_id => %(worker_id)s,
    p_metadata => %(metadata)s) as result;

-- name: rpc_commit_generation_legacy
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_metadata => %(metadata)s) as result;

-- name: rpc_record_stage_worker_id
select record_ingestion_job_stage(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_stage => %(stage)s, p_started_at => %(started_at)s, p_finished_at => %(finished_at)s,
    p_detail => %(detail)s) as result;

-- name: rpc_heartbeat_worker_id
select heartbeat_ingestion_job(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_progress => %(progress)s, p_stage => %(stage)s) as result;

-- The enqueue of the releases before keys (content-addressed documents), for
-- tests/old_enqueue.py.

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
