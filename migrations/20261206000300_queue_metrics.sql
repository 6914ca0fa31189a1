-- The queue as an operator's metrics (issue 49, `ingest metrics`: Prometheus text format).
--
-- ingestion_queue_metrics() reads, in one call at scrape time, what every worker did, so a
-- scrape counts the work of all of them (the database is the only place that sees it all):
--   jobs_by_status        queue depth: jobs by status (pending, processing, completed, failed,
--                         cancelled);
--   retry_waiting         pending jobs waiting out a retry delay (next_run_at in the future);
--   claims                the sum of the jobs' lease tokens: every claim adds 1 to its job's
--                         token and nothing else changes it, and job rows are never deleted,
--                         so it only grows (a counter: rate() gives claims per second);
--   completed             jobs completed: a terminal state, so it only grows;
--   failed_by_format      jobs failed for good, by their version's MIME type ('' when none);
--                         falls when `ingest retry` puts failed jobs back to pending;
--   dead_lettered         jobs failed because their lease expired on the final attempt
--                         (stage 'dead_letter', set by expire_stale_ingestion_jobs);
--   stale_leases          jobs in processing whose lease deadline has passed: a worker died or
--                         stalls, and the job waits for a reclaim (or the dead letter);
--   oldest_pending_seconds  age of the oldest pending job (since it was enqueued), 0 when none;
--   completed_last_minute jobs completed in the last 60 seconds: the drain's documents/s × 60.
-- One pass over ingestion_jobs (as ingestion_index_totals: a read per scrape, not per job), and
-- the failed jobs joined to their versions. A reclaim of a stale lease is not recorded (the
-- claim overwrites the row): the stale leases now and the dead letters are what is.
create function public.ingestion_queue_metrics()
returns jsonb
language sql stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select jsonb_build_object(
        'ok', true,
        'jobs_by_status', (select coalesce(jsonb_object_agg(status, n), '{}')
                             from (select status, count(*) as n from public.ingestion_jobs group by status) s),
        'retry_waiting', j.retry_waiting,
        'claims', j.claims,
        'completed', j.completed,
        'dead_lettered', j.dead_lettered,
        'stale_leases', j.stale_leases,
        'oldest_pending_seconds', coalesce(extract(epoch from now() - j.oldest_pending), 0),
        'completed_last_minute', j.completed_last_minute,
        'failed_by_format', (select coalesce(jsonb_object_agg(format, n), '{}')
                               from (select coalesce(v.mime_type, d.mime_type, '') as format, count(*) as n
                                       from public.ingestion_jobs f
                                       join public.documents d on d.id = f.document_id
                                       left join public.document_versions v
                                              on v.document_id = f.document_id and v.version = f.document_version
                                      where f.status = 'failed'
                                      group by 1) s)
    )
      from (select count(*) filter (where status = 'pending' and next_run_at > now()) as retry_waiting,
                   coalesce(sum(lease_token), 0) as claims,
                   count(*) filter (where status = 'completed') as completed,
                   count(*) filter (where status = 'failed' and stage = 'dead_letter') as dead_lettered,
                   count(*) filter (where status = 'processing' and lease_expires_at < now()) as stale_leases,
                   min(created_at) filter (where status = 'pending') as oldest_pending,
                   count(*) filter (where status = 'completed'
                                      and completed_at >= now() - interval '60 seconds') as completed_last_minute
              from public.ingestion_jobs) j;
$$;

select public.secure_rpc('public.ingestion_queue_metrics()');
