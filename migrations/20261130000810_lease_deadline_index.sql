-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- Reclaim and expiry now read the lease deadline on the row (20261130000800); index it
-- the way the claim walks it, without blocking the queue's writers while it builds. The
-- old index on locked_at served only the stale-window predicate, which nothing uses now.
create index concurrently if not exists ingestion_jobs_lease_expiry
    on ingestion_jobs (lease_expires_at) where status = 'processing';
drop index concurrently if exists ingestion_jobs_leased;
