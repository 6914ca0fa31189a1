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

-- ---------------------------------------------------------------------------------
-- A source's sync (operations/sync.py): documents and versions are not queue state, read
-- and annotated directly; what it enqueues and deletes goes through the RPCs.

-- name: known_source_versions
-- The live documents of these keys in one collection, with what the source held at their
-- latest version (size, modification time, ETag: a listing entry that matches needs no read)
-- and whether that version's build was cancelled with nothing building it; and its bytes' hash
-- (bytes read again under a new time that hash the same are not a change: nothing is queued).
select k.source_key, k.document_id, k.version, k.byte_size, k.source_modified_at, k.source_etag,
       k.build_cancelled, v.content_sha256
  from known_source_versions(p_collection => %(collection)s, p_keys => %(keys)s) k
  join document_versions v on v.document_id = k.document_id and v.version = k.version;

-- name: live_keys_under_prefix
-- The live documents of a collection whose key starts with `prefix` and whose latest version
-- was enqueued before `before` (when the sync began to list: one enqueued since, by anyone,
-- is not the sync's to judge), in key order from after `after` (keyset pages), with that
-- version (what a delete carries). The prefix is a range in byte order (`prefix_end`: the
-- prefix with its last character's successor), which documents_collection_key_c (…_sync_
-- deletes_under_the_listing_and_lease.sql) walks; before it, the same range is a scan.
-- Each listed document's version is looked up by primary key as the walk reaches it (a scalar
-- subquery in the filter, which the planner never turns into a join), so the listing reads
-- about as many rows as the source holds keys, up to `limit`: a join here was planned, with an
-- estimate of a few hundred keys, as a hash join over a scan of every version (issue 58, 7).
select d.id as document_id, d.source_key, d.version
  from documents d
 where d.collection = %(collection)s and d.deleted_at is null
   and d.source_key collate "C" >= %(prefix)s and d.source_key collate "C" < %(prefix_end)s
   and d.source_key collate "C" > %(after)s
   and (select v.enqueued_at
          from document_versions v
         where v.document_id = d.id and v.version = d.version) < %(before)s
 order by d.source_key collate "C"
 limit %(limit)s;

-- name: database_now
select now() as now;

-- name: touch_version_source
-- The latest version's bytes seen again under another modification time or ETag (a touched
-- file, an object uploaded again): recorded, so the next sync reads nothing.
update document_versions v
   set source_modified_at = %(modified_at)s, source_etag = %(etag)s
  from documents d
 where d.id = %(document_id)s and v.document_id = d.id and v.version = d.version
   and v.content_sha256 = %(content_sha256)s;
