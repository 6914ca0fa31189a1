-- Reading documents as an app's reader reads them: the readers' functions of the search
-- migrations (docs/search.md), which scope themselves to the collections the calling role may
-- read. Loaded by name through ingestion_pipeline.db.queries.query().

-- name: readable_collections
-- The collections the caller may read; null: every one (an owner, a superuser, the worker role).
select public.readable_collections() as names;

-- name: readable_sections
-- The committed build's sections of one document, in order; none for a document the caller may
-- not read, or one without a committed build.
select ordinal, heading, level, page, content from public.readable_document_sections(%(document_id)s);
