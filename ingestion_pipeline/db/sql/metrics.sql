-- The queue's metrics, read at each scrape of `ingest metrics` (db/rpc/metrics.py).

-- name: rpc_queue_metrics
select ingestion_queue_metrics() as result;
