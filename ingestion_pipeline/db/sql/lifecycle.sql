-- The document lifecycle: delete a document, cancel an import batch, retry failed jobs
-- (db/rpc/lifecycle.py). Operator calls, not the worker's: none is fenced by a lease; each
-- cancels the jobs it ends, so the workers building them are refused from then on.
-- Named notation (`p_x => value`); parameters are server-side bound.

-- name: rpc_delete_document
select delete_document(p_document_id => %(document_id)s) as result;

-- name: rpc_delete_vanished_document
-- A sync's delete: refused when the document has another version than `version` (the one its
-- listing saw) or, with `source`, when the sync's lease `token` is lost (…_sync_deletes_under_
-- the_listing_and_lease.sql).
select delete_vanished_document(p_document_id => %(document_id)s, p_version => %(version)s,
    p_source => %(source)s, p_sync_token => %(token)s, p_lease_seconds => %(lease_seconds)s) as result;

-- name: rpc_cancel_batch
select cancel_import_batch(p_batch_id => %(batch_id)s) as result;

-- name: rpc_retry_failed
select retry_failed_ingestion_jobs(p_job_ids => %(job_ids)s, p_batch_id => %(batch_id)s) as result;

-- name: live_documents_by_source
-- Documents (not queue state: read directly) not deleted, by source name (in one collection,
-- or in any when it is null), oldest first.
select id, collection, source_key, source_name, status, batch_id, created_at
  from documents
 where source_name = any (%(names)s) and deleted_at is null
   and (%(collection)s::text is null or collection = %(collection)s::text)
 order by source_name, created_at, id;

-- name: live_documents_by_key
-- The live documents of these keys in one collection (documents_live_source_key).
select id, collection, source_key, source_name, status, batch_id, created_at
  from documents
 where collection = %(collection)s and source_key = any (%(keys)s) and deleted_at is null
 order by source_key;
