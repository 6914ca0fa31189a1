-- Documents by source key: enqueue a source's bytes, read a document's versions
-- (db/rpc/documents.py; the RPCs are in migrations/…_document_versions.sql).
-- Named notation (`p_x => value`) so a call resolves to exactly one signature. Parameters are
-- server-side bound.

-- name: rpc_enqueue_version
-- A source's bytes under its key: new document, new version, or nothing (see the migration).
select enqueue_document_version(p_collection => %(collection)s, p_source_key => %(source_key)s,
    p_source_name => %(source_name)s, p_content_sha256 => %(content_sha256)s, p_byte_size => %(byte_size)s,
    p_mime_type => %(mime_type)s, p_batch_id => %(batch_id)s, p_max_attempts => %(max_attempts)s,
    p_reindex => %(reindex)s, p_source_modified_at => %(source_modified_at)s,
    p_source_etag => %(source_etag)s) as result;

-- name: rpc_document_history
select document_history(p_document_id => %(document_id)s, p_collection => %(collection)s,
    p_source_key => %(source_key)s) as result;
