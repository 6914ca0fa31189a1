-- Acknowledgements: complete, fail or retry, one job or many (db/rpc/acks.py).
-- Named notation (`p_x => value`) so a call resolves to exactly one signature; fenced RPCs
-- pass the claim's lease token. Parameters are server-side bound.

-- name: rpc_complete
select complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s, p_worker_id => %(worker_id)s,
    p_lease_token => %(lease_token)s) as result;

-- name: rpc_commit_and_complete
select commit_and_complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_lease_token => %(lease_token)s, p_metadata => %(metadata)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s) as result;

-- name: rpc_commit_and_complete_embedder
-- The generation records its embedder (migration …_generations_record_their_embedder.sql).
select commit_and_complete_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_lease_token => %(lease_token)s, p_metadata => %(metadata)s,
    p_batch_id => %(batch_id)s, p_stage => %(stage)s, p_embedder => %(embedder)s) as result;

-- name: rpc_complete_many
-- Bulk acknowledgement: items [{job_id, document_id, lease_token, generation_id, metadata, stage}].
select complete_ingestion_jobs(p_items => %(items)s) as result;

-- name: rpc_fail_or_retry
-- The server computes next_run_at = now() + p_retry_delay_seconds (its own clock).
select fail_or_retry_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_batch_id => %(batch_id)s, p_retry => %(retry)s, p_document_status => %(document_status)s,
    p_stage => %(stage)s, p_error_message => %(error_message)s, p_next_run_at => %(next_run_at)s,
    p_worker_id => %(worker_id)s, p_lease_token => %(lease_token)s,
    p_retry_delay_seconds => %(retry_delay_seconds)s) as result;

-- name: rpc_fail_or_retry_many
select fail_or_retry_ingestion_jobs(p_items => %(items)s) as result;

-- name: rpc_retry
select retry_ingestion_job(p_job_id => %(job_id)s) as result;

-- name: rpc_release
-- A worker fault (migration …_release_worker_faults.sql): the job back to pending, its attempt
-- refunded while the job has had fewer worker faults than attempts; fenced by the token.
select release_ingestion_job(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_lease_token => %(lease_token)s, p_error_message => %(error_message)s,
    p_retry_delay_seconds => %(retry_delay_seconds)s, p_worker_id => %(worker_id)s,
    p_stages => %(stages)s) as result;
