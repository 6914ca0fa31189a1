-- Search: one RPC, search_documents (migration …_search_rpc_and_collections.sql; docs/search.md),
-- which apps call too. Loaded by name through ingestion_pipeline.db.queries.query().

-- name: search_documents
-- One hit per document, best first, of `collections` only (null: every one the caller may
-- read). `embedding`: the query's vector (vector and hybrid modes), else null; `embedder`: the
-- name of the model that made it, as generations record it (only its vectors are compared).
select document_id, collection, source_uri, source_name, title, heading, heading_path, page, chunk_ordinal,
       snippet, score
from public.search_documents(%(query)s, %(collections)s::text[], %(mode)s, %(limit)s, %(embedding)s::real[],
                             %(embedder)s::text);

-- name: search_passages
-- The best passages (chunks) of the best documents, best first, several of one document when
-- they are the best; `window`: the chunks on each side given with each as its context (0-3).
select document_id, collection, source_uri, source_name, title, heading, heading_path, page, chunk_ordinal,
       snippet, score, content, context
from public.search_passages(%(query)s, %(collections)s::text[], %(mode)s, %(limit)s, %(embedding)s::real[],
                            %(embedder)s::text, %(window)s);

-- name: act_as_reader
-- For this transaction only, as PostgREST runs a request: the role (anon, authenticated), the
-- JWT claims the database's policies read (request_user_id()), and the role's statement_timeout,
-- which PostgREST applies when it switches to the role (a SET ROLE does not): the role's setting
-- in this database, else its setting everywhere (ALTER ROLE … [IN DATABASE …] SET); a role with
-- none keeps the timeout in force. `statement_timeout`: the timeout the reader now runs under.
-- The setting is read first (pg_db_role_setting, readable by every role), then the role taken.
select pg_catalog.set_config('statement_timeout', coalesce(
           (select pg_catalog.substr(c.setting, pg_catalog.strpos(c.setting, '=') + 1)
              from pg_catalog.pg_db_role_setting s
             cross join lateral pg_catalog.unnest(s.setconfig) as c(setting)
             where s.setrole = (select r.oid from pg_catalog.pg_roles r where r.rolname = %(role)s)
               and s.setdatabase in (0, (select d.oid from pg_catalog.pg_database d
                                          where d.datname = pg_catalog.current_database()))
               and pg_catalog.split_part(c.setting, '=', 1) = 'statement_timeout'
             order by s.setdatabase desc  -- this database's (its oid) before every database's (0)
             limit 1),
           pg_catalog.current_setting('statement_timeout')), true) as statement_timeout,
       pg_catalog.set_config('role', %(role)s, true) as role,
       pg_catalog.set_config('request.jwt.claims', %(claims)s, true) as claims;

-- name: index_has_embedder
-- Whether a live document of `collections` (null: of every one) has a committed generation
-- whose vectors the embedder `name` made with `dimensions`: the common answer of the check
-- before a vector or hybrid search, found at the first such document instead of grouping them all.
select exists (
    select 1
      from documents d
      join index_generations g on g.id = d.index_generation_id
     where d.deleted_at is null
       and (%(collections)s::text[] is null or d.collection = any(%(collections)s::text[]))
       and g.embedder = %(name)s::text and g.embedder_dimensions = %(dimensions)s::integer
) as found;

-- name: index_embedders
-- The embedders of the live documents' committed generations (of `collections`, or of every
-- collection when null), most documents first: what vector and hybrid search compare the
-- query's embedder with, and what `ingest health` and `ingest reindex --embeddings` read
-- (migration …_generations_record_their_embedder.sql). A generation committed before that
-- migration records nothing: `recorded` is false, and the name is the one its document's
-- metadata kept (null if none).
select coalesce(g.embedder, d.metadata ->> 'embedder') as name,
       g.embedder_dimensions as dimensions,
       g.embedder_version as version,
       g.embedder is not null as recorded,
       count(*)::integer as documents
  from documents d
  join index_generations g on g.id = d.index_generation_id
 where d.deleted_at is null
   and (%(collections)s::text[] is null or d.collection = any(%(collections)s::text[]))
 group by 1, 2, 3, 4
 order by documents desc, name nulls last, dimensions nulls last, version nulls last;

-- name: hit_passages
-- The whole text of each hit's best chunk (the pairs of `document_ids` and `ordinals`), as the
-- caller may read it: readable_document_chunks scopes itself, giving no row of a document the
-- caller may not read, and only its committed generation's chunks.
select h.document_id, h.chunk_ordinal, c.content
  from unnest(%(document_ids)s::uuid[], %(ordinals)s::integer[]) as h(document_id, chunk_ordinal)
  cross join lateral public.readable_document_chunks(h.document_id) c
 where c.ordinal = h.chunk_ordinal;

-- name: hit_page_labels
-- The page label of each (document, page) pair the caller may read, where its PDF defines
-- labels ("iv"); pairs without one give no row.
select document_id, page, page_label
  from public.readable_page_labels(%(document_ids)s::uuid[], %(pages)s::integer[]);
