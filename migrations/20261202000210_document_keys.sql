-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- The keys of …_document_versions.sql, built without blocking writers: one live document per
-- (collection, source key) (what enqueue_document_version's insert meets on), the jobs of a
-- document by version (`ingest show`), and the checks added NOT VALID there, validated here
-- (a scan under SHARE UPDATE EXCLUSIVE: writers go on).
create unique index concurrently if not exists documents_live_source_key
    on documents (collection, source_key) where deleted_at is null and source_key is not null;
alter table documents validate constraint documents_collection_check;
alter table documents validate constraint documents_source_key_check;
alter table documents validate constraint documents_key_versions_check;
