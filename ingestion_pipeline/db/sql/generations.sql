-- Index generations: begin, commit, stage log, guarded cleanup (db/rpc/generations.py).
-- Named notation (`p_x => value`) so a call resolves to exactly one signature; fenced RPCs
-- pass the claim's lease token. Parameters are server-side bound.

-- name: rpc_begin_generation
select begin_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_worker_id => %(worker_id)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_commit_generation
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_worker_id => %(worker_id)s,
    p_metadata => %(metadata)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_commit_generation_embedder
-- The generation records its embedder (migration …_generations_record_their_embedder.sql).
select commit_document_index_generation(p_job_id => %(job_id)s, p_document_id => %(document_id)s,
    p_generation_id => %(generation_id)s, p_worker_id => %(worker_id)s,
    p_metadata => %(metadata)s, p_lease_token => %(lease_token)s, p_embedder => %(embedder)s) as result;

-- name: rpc_record_stage
select record_ingestion_job_stage(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_stage => %(stage)s, p_started_at => %(started_at)s, p_finished_at => %(finished_at)s,
    p_detail => %(detail)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_cleanup
select cleanup_abandoned_document_index_generations(p_document_id => %(document_id)s,
    p_limit => %(limit)s, p_dry_run => %(dry_run)s) as result;

-- name: rpc_cleanup_kept_bytes
select cleanup_kept_version_bytes(p_keep_versions => %(keep_versions)s, p_limit => %(limit)s,
    p_dry_run => %(dry_run)s) as result;

-- name: rpc_has_search_term_counts
select jsonb_build_object('ok', true, 'present',
    to_regprocedure('public.compact_search_term_counts(integer)') is not null) as result;

-- name: rpc_compact_search_terms
select compact_search_term_counts(p_limit => %(limit)s) as result;
