-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- Indexes the guarded cleanup needs to cost the same with 10k or 1M documents present
-- (bench/cleanup.py), built without blocking writers:
--   * documents.index_generation_id is a foreign key with no index: every index_generations
--     row the cleanup deletes made PostgreSQL scan all of `documents` for referencing rows
--     (ON DELETE SET NULL). tests/migration/test_foreign_key_indexes.py keeps every foreign
--     key covered from now on;
--   * the cleanup looks for generations that are not committed: a partial index walks only
--     those, in document order, instead of every committed generation.
create index concurrently if not exists documents_index_generation_id
    on documents (index_generation_id);
create index concurrently if not exists index_generations_uncommitted
    on index_generations (document_id) where status <> 'committed';
