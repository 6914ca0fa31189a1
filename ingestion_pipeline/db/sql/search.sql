-- Lexical search over committed generations (readers see no build in progress, no deleted
-- document). Loaded by name through ingestion_pipeline.db.queries.query().

-- name: search_lexical
-- Pages ranked by how much of the query their best passage covers, with their best chunk.
--
-- Every chunk matching any term is a candidate (an OR of the terms), so a page that misses
-- one word of the query still ranks; what it covers decides how high:
--   term weight   ln(1 + chunks / chunks containing the term): covering a rare term
--                 ("password") counts more than a common one ("file");
--   field weight  where the chunk has the term: its page's title 1.0, its heading path 0.4,
--                 only its text 0.1 (ts_rank's default weights for A, B and D). The title
--                 and headings are in every chunk's vector, so the page about a term beats a
--                 page that repeats it in passing;
--   chunk share   sum of term weight x field weight over the terms the chunk has, divided
--                 by the sum of the term weights: 1.0 for a chunk with every term in its
--                 title;
--   window share  the same over two neighbouring chunks, for an answer that spans a
--                 section break (but not a whole long page: covering each word somewhere
--                 in 50 chunks is not an answer);
--   score         best chunk share + 0.5 x best window share; ties by ts_rank.
-- Parameters: included (text[], one websearch term each), any_included and any_excluded
-- (the terms joined with "or"), collections (text[]: only their documents; null: all), limit.
with query as (
    select websearch_to_tsquery('english', %(any_included)s) as any_term,
           websearch_to_tsquery('english', %(any_excluded)s) as any_excluded
),
terms as (
    select t.n, q.term
    from unnest(%(included)s::text[]) with ordinality as t (text, n)
    cross join lateral websearch_to_tsquery('english', t.text) as q (term)
    where numnode(q.term) > 0
),
chunks as (
    select c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.content, c.content_tsv,
           ts_rank(c.content_tsv, q.any_term) as rank
    from query q
    join committed_document_chunks c on c.content_tsv @@ q.any_term
    where (numnode(q.any_excluded) = 0 or not c.content_tsv @@ q.any_excluded)
      and (%(collections)s::text[] is null
           or exists (select 1 from documents d
                      where d.id = c.document_id and d.collection = any (%(collections)s::text[])))
),
hits as (
    select c.document_id, c.ordinal, t.n,
           case when ts_filter(c.content_tsv, '{a}') @@ t.term then 1.0
                when ts_filter(c.content_tsv, '{b}') @@ t.term then 0.4
                else 0.1 end as field
    from chunks c
    join terms t on c.content_tsv @@ t.term
),
index_size as (
    select greatest((select count(*) from chunks),
                    (select reltuples from pg_catalog.pg_class
                     where oid = 'public.document_chunks'::regclass)) as chunks
),
term_weights as (
    select h.n, ln(1 + s.chunks / count(*)) as weight
    from hits h cross join index_size s
    group by h.n, s.chunks
),
chunk_cover as (
    select h.document_id, h.ordinal, sum(w.weight * h.field) as covered
    from hits h join term_weights w using (n)
    group by h.document_id, h.ordinal
),
window_cover as (  -- chunks (start, start + 1), each term at its best field in either
    select x.document_id, max(x.covered) as covered
    from (select p.document_id, p.start, sum(w.weight * p.field) as covered
          from (select h.document_id, s.start, h.n, max(h.field) as field
                from hits h cross join lateral (values (h.ordinal - 1), (h.ordinal)) as s (start)
                group by h.document_id, s.start, h.n) p
          join term_weights w using (n)
          group by p.document_id, p.start) x
    group by x.document_id
),
best_chunks as (
    select distinct on (c.document_id)
           c.document_id, c.index_generation_id, c.ordinal, c.section_ordinal, c.content, cc.covered, c.rank
    from chunks c join chunk_cover cc using (document_id, ordinal)
    order by c.document_id, cc.covered desc, c.rank desc, c.ordinal
),
scored as (
    select b.*, (b.covered + 0.5 * wc.covered) / t.weight as score
    from best_chunks b
    join window_cover wc using (document_id)
    cross join (select sum(weight) as weight from term_weights) t
)
select s.document_id,
       coalesce(d.title, d.source_name) as title,
       d.source_name,
       d.source_key as source_uri,
       d.collection,
       sec.heading,
       s.ordinal as chunk_ordinal,
       s.score::float8 as score,
       ts_headline('english', s.content, q.any_term,
                   'MaxFragments=1, MinWords=8, MaxWords=30, StartSel=[, StopSel=]') as snippet
from scored s
cross join query q
join documents d on d.id = s.document_id
left join document_sections sec
       on sec.document_id = s.document_id
      and sec.index_generation_id = s.index_generation_id
      and sec.ordinal = s.section_ordinal
order by s.score desc, s.rank desc, s.document_id
limit %(limit)s;
