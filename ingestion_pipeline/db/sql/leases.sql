-- Leases: claim, heartbeats, expiry of final-attempt leases (db/rpc/leases.py).
-- Named notation (`p_x => value`) so a call resolves to exactly one signature; fenced RPCs
-- pass the claim's lease token. Parameters are server-side bound.

-- name: rpc_claim
select * from claim_ingestion_jobs(p_worker_id => %(worker_id)s, p_claim_limit => %(limit)s,
    p_stale_after_seconds => %(stale_after_seconds)s);

-- name: rpc_heartbeat
select heartbeat_ingestion_job(p_job_id => %(job_id)s, p_worker_id => %(worker_id)s,
    p_progress => %(progress)s, p_stage => %(stage)s, p_lease_token => %(lease_token)s) as result;

-- name: rpc_heartbeat_many
-- One statement renews many leases, each by its own token (lost ones are listed).
select heartbeat_ingestion_jobs(p_job_ids => %(job_ids)s::uuid[], p_lease_tokens => %(lease_tokens)s::bigint[],
    p_stages => %(stages)s::text[], p_progress => %(progress)s::integer[]) as result;

-- name: rpc_expire_stale
select expire_stale_ingestion_jobs(p_stale_after_seconds => %(stale_after_seconds)s) as result;
