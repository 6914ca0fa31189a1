-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- Built and dropped without blocking writers (…_scoped_search.sql):
--   * live documents by collection, in readable_documents' order: a reader's page of documents
--     reads its own collections' rows, from where the last page ended, not every tenant's;
--   * the public collections: readable_collections reads them, not the private ones.
create index concurrently if not exists documents_live_by_collection
    on documents (collection, (coalesce(source_key, '')), id) where deleted_at is null;
create index concurrently if not exists collections_public
    on collections (name) where is_public;
-- The chunks' own GIN index: the search reads its candidates from searchable_chunks, and every
-- chunk it reads by primary key; dropped so that a commit writes each chunk's words into one
-- GIN index, not two.
drop index concurrently if exists document_chunks_content_tsv;
