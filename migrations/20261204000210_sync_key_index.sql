-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- (collection, source_key) in byte order for …_sync_deletes_under_the_listing_and_lease.sql:
-- a source's keys (a prefix) are one index range whatever the database's collation. Built
-- without blocking writers.
create index concurrently if not exists documents_collection_key_c
    on documents (collection, source_key collate "C") include (deleted_at);
