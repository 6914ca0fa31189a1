-- ingest:no-transaction
-- squawk-ignore-file ban-concurrent-index-creation-in-transaction
-- The indexes of …_idle_janitor_passes_and_upgrade_window.sql, built without blocking writers
-- (until they exist its functions give the same answers, reading more):
--   * the term-count rows not folded yet: the compaction's keys (a writer's delta row enters,
--     the compaction's folded row never does);
--   * live documents with kept bytes by how far their oldest kept version is behind their
--     latest, and deleted (or keyless) documents with kept bytes: the kept-bytes cleanup's
--     candidates (a document enters only while it has kept bytes);
--   * versions by their bytes' hash: the previous release's keyless insert finds the keyed
--     document it would duplicate, and health finds the copies made before the guard.
create index concurrently if not exists search_term_counts_unfolded
    on search_term_counts (collection, lexeme) where not folded;
create index concurrently if not exists documents_kept_versions_behind
    on documents ((version - oldest_kept_version))
    where oldest_kept_version is not null and deleted_at is null and version is not null;
create index concurrently if not exists documents_kept_bytes_owed
    on documents (id) where oldest_kept_version is not null and (deleted_at is not null or version is null);
create index concurrently if not exists document_versions_content_sha256
    on document_versions (content_sha256);
