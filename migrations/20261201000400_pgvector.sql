-- Chunk vectors in pgvector's `vector` type where the server has the extension, so that
-- vector search can use an HNSW index (docs/vector-search.md). Everywhere else this file
-- changes nothing: vectors stay in `embedding real[]` and vector search is exact in SQL.
--
-- Skipped, with a NOTICE, when
--   - the session sets ingest.pgvector = off (`ingest db manifest` replays the schema both
--     ways; an operator may use it to keep a server on the exact path),
--   - the server does not ship the extension (pg_available_extensions), or
--   - it may not be created here (no privilege: a non-superuser on a server that has not
--     installed it; or its library is missing).
--
-- Where it runs:
--   - `embedding_vector vector`, untyped: the dimension is the embedder's, not the schema's.
--     HNSW indexes need a fixed one, so each is a partial expression index for one
--     dimension, built concurrently by `ingest db migrate` for the configured embedder
--     (ingestion_pipeline/db/vector_index.py), not here: a build inside this transaction
--     would block the workers' inserts for as long as it takes.
--   - The vector is MOVED out of `embedding` on insert (a trigger): writers of this release
--     and of the one before keep COPYing `embedding real[]`, and each vector is stored once
--     (a 1536-dimension vector is 6 KiB, more than a chunk's text; nothing reads the real[]
--     copy on a server that searches the vector column).
--   - Rows embedded before this migration move in the same transaction. Embeddings were
--     `none` or the test-only hash until this release, so there are few or none; the
--     UPDATE takes row locks only, never blocking the workers' inserts.
--   - committed_document_chunks lists the new column (the view froze `c.*` when created).
--
-- The extension is looked up where it is installed (Supabase puts it in `extensions`):
-- the column's type is qualified with its schema, and the trigger relies on pgvector's
-- assignment cast from real[], which is found by type, not by name.
do $$
declare
    v_schema text;
begin
    if current_setting('ingest.pgvector', true) = 'off' then
        raise notice 'pgvector: skipped (ingest.pgvector = off); vector search stays exact over real[]';
        return;
    end if;
    if not exists (select from pg_catalog.pg_available_extensions where name = 'vector') then
        raise notice 'pgvector: the server has no vector extension; vector search stays exact over real[]';
        return;
    end if;
    begin
        create extension if not exists vector;
    exception when insufficient_privilege or undefined_file or feature_not_supported then
        raise notice 'pgvector: extension not created (%); vector search stays exact over real[]', sqlerrm;
        return;
    end;
    select n.nspname into strict v_schema
    from pg_catalog.pg_extension e
    join pg_catalog.pg_namespace n on n.oid = e.extnamespace
    where e.extname = 'vector';

    execute format('alter table public.document_chunks add column embedding_vector %I.vector', v_schema);

    create function public.document_chunks_embedding_vector() returns trigger
    language plpgsql
    set search_path = pg_catalog, pg_temp
    as $body$
    begin
        -- A row that arrives with its vector already in embedding_vector keeps it.
        if new.embedding is not null then
            new.embedding_vector := new.embedding;  -- pgvector's assignment cast real[] -> vector
            new.embedding := null;
        end if;
        return new;
    end
    $body$;

    perform public.secure_rpc('public.document_chunks_embedding_vector()', false);

    -- WHEN: rows without a vector (no embedder, the default) never enter plpgsql.
    create trigger document_chunks_embedding_vector
        before insert or update of embedding on public.document_chunks
        for each row when (new.embedding is not null)
        execute function public.document_chunks_embedding_vector();

    update public.document_chunks
    set embedding_vector = embedding, embedding = null
    where embedding is not null;

    create or replace view public.committed_document_chunks with (security_invoker = true) as
    select c.*
    from public.document_chunks c
    join public.documents d on d.id = c.document_id and d.index_generation_id = c.index_generation_id
    where d.deleted_at is null;
end
$$;
