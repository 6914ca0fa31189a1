-- Search: one RPC, search_documents (migration …_search_rpc_and_collections.sql; docs/search.md),
-- which apps call too. Loaded by name through ingestion_pipeline.db.queries.query().

-- name: search_documents
-- One hit per document, best first, of `collections` only (null: every one the caller may
-- read). `embedding`: the query's vector (vector and hybrid modes), else null.
select document_id, collection, source_uri, source_name, title, heading, heading_path, page, chunk_ordinal,
       snippet, score
from public.search_documents(%(query)s, %(collections)s::text[], %(mode)s, %(limit)s, %(embedding)s::real[]);

-- name: act_as_reader
-- For this transaction only, as PostgREST runs a request: the role (anon, authenticated)
-- and the JWT claims the database's policies read (request_user_id()).
select pg_catalog.set_config('role', %(role)s, true), pg_catalog.set_config('request.jwt.claims', %(claims)s, true);
