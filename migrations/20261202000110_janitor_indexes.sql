-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- The janitor's passes cost what they find (…_one_lock_order.sql), built without blocking writers:
--   * deleted documents whose bytes are still stored: the cleanup's second source of
--     candidates, instead of every document (a deleted document leaves this index once its
--     bytes are purged);
--   * batches by the time they finished: drift detection looks at open batches (the
--     `import_batches_open` index) and those finished within the last hour. `completed_at`
--     changes only when a batch finishes or reopens, as its status does, so the batch row's
--     counter updates stay HOT.
create index concurrently if not exists documents_awaiting_purge
    on documents (id) where deleted_at is not null and purged_at is null;
create index concurrently if not exists import_batches_completed_at
    on import_batches (completed_at);
