-- Hybrid search fuses scores, not ranks (issue 47; docs/search.md, "Modes").
--
-- Before: reciprocal-rank fusion (k = 60) of the lexical and vector lists. A document first in
-- one list and absent from the other tied with one 20th in both, whatever the scores said.
--
-- Now: each list's scores on one scale and added, half each: a lexical score divided by the
-- list's best one (0..1), and the cosine similarity (0..1, negatives as 0). Over an index
-- without vectors the vector list is empty and hybrid ranks exactly as lexical does.
-- Measured with bench/fusion.py's candidates (bench/README.md, "Questions"): on 224 FAQ
-- questions MRR@10 0.351 -> 0.380; on the keyword benchmarks of three manuals nDCG@10 within
-- the bar of lexical (bench/results/question_quality.md).
--
-- Expand/contract: the signature and columns are unchanged.

create or replace function public.search_documents(
    p_query text, p_collections text[] default null, p_mode text default 'lexical', p_limit integer default 10,
    p_query_embedding real[] default null)
returns table (document_id uuid, collection text, source_uri text, source_name text, title text, heading text,
               heading_path text, page integer, chunk_ordinal integer, snippet text, score double precision)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
set enable_seqscan = off  -- each hit's document by primary key
set enable_bitmapscan = off
set enable_indexonlyscan = off  -- as migration 20261204000500 set it
set enable_hashjoin = off
set enable_mergejoin = off
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_depth integer;
    v_scope text[];
    v_refusal text;
begin
    if p_mode is null or p_mode not in ('lexical', 'vector', 'hybrid') then
        raise exception 'search_documents: unknown mode %; choose lexical, vector or hybrid', coalesce(p_mode, 'null')
            using errcode = '22023';
    end if;
    if p_limit is null or p_limit < 1 or p_limit > 1000 then
        raise exception 'search_documents: p_limit must be between 1 and 1000, got %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;
    v_refusal := public.search_query_refusal(p_query);
    if v_refusal is not null then
        raise exception 'search_documents: %', v_refusal using errcode = '22023';
    end if;
    if p_mode <> 'vector' and coalesce(btrim(p_query), '') = '' then
        raise exception 'search_documents: the search query is empty' using errcode = '22023';
    end if;
    if p_mode <> 'lexical' then
        if p_query_embedding is null or cardinality(p_query_embedding) = 0 then
            raise exception 'search_documents: % search needs p_query_embedding, the query''s vector from the '
                            'embedder the documents were indexed with', p_mode using errcode = '22023';
        end if;
        if cardinality(p_query_embedding) > 16000 then
            raise exception 'search_documents: p_query_embedding has % dimensions; at most 16000',
                cardinality(p_query_embedding) using errcode = '22023';
        end if;
        if exists (select 1 from unnest(p_query_embedding) as x
                    where x is null or x in ('NaN'::real, 'Infinity'::real, '-Infinity'::real)) then
            raise exception 'search_documents: p_query_embedding holds a null, NaN or infinite value'
                using errcode = '22023';
        end if;
    end if;
    v_scope := public.search_scope(p_collections);
    v_depth := case when p_mode = 'hybrid' then p_limit * 5 else p_limit end;
    return query
    with lists as (
        select 'lexical'::text as list, h.*
          from public.search_lexical_hits(p_query, p_collections, v_depth) h
         where p_mode <> 'vector'
        union all
        select 'vector'::text, h.*
          from public.search_vector_hits(p_query_embedding, p_collections, v_depth) h
         where p_mode <> 'lexical'
    ), tops as (  -- each list's best score, to put the lexical scores on the cosine's 0..1 scale
        select l.list, max(l.score) as top from lists l group by l.list
    ), fused as (
        select l.document_id, min(l.n) as n,
               case when p_mode <> 'hybrid' then max(l.score)
                    else sum(case when l.list = 'lexical' then 0.5 * l.score / nullif(t.top, 0)
                                  else 0.5 * greatest(l.score, 0) end order by l.list) end as score
          from lists l
          join tops t on t.list = l.list
         group by l.document_id
    ), shown as (
        select distinct on (l.document_id) l.*
          from lists l
         order by l.document_id, l.n, l.list
    )
    select s.document_id, s.collection, s.source_uri, s.source_name, s.title,
           s.heading, s.heading_path, s.page_ordinal + 1, s.chunk_ordinal, s.snippet, f.score
      from fused f
      join shown s on s.document_id = f.document_id
     cross join lateral (  -- the scope, once more
           select 1 from public.documents d
            where d.id = s.document_id and d.deleted_at is null and (v_scope is null or d.collection = any (v_scope))
           offset 0) d
     order by case when p_mode = 'hybrid' then -f.score else f.n end, s.document_id::text
     limit p_limit;
end;
$$;

