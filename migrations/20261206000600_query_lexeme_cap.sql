-- The cap on a query counts what the search works on: its words once identifiers are split
-- (issue 58, the fifth review's defect 2).
--
-- Before (migration 20261204000100): at most 4,096 characters and 64 distinct terms, a term
-- being what spaces and quotes delimit. Identifiers are split afterwards (search_identifier_text:
-- `a.b`, `a::b`, `a_b` and `a->b` become the whole and each part), so one dotted identifier of
-- 4,078 characters was one term and 446 lexemes: an anonymous search with it cost 2,958 ms,
-- 7.9x the costliest query the term cap admits, and a phrase of hundreds of words in quotes
-- was one term too.
--
-- Now also at most 64 words, counted as the search works on them, from the identifier-split
-- text the English configuration makes lexemes of: outside phrases, the distinct lexemes (a
-- lexeme is looked up once, however often it is written); inside a "phrase", every word, repeats
-- included (a phrase is matched position by position: one common word quoted to 4,096 characters was one
-- term and one lexeme, and cost 4.2x the costliest query of 64 plain words). A query of 64
-- plain words is at most 64 lexemes, so whatever the term cap admitted in words is still
-- admitted; an identifier or a phrase pays for each of its parts.
--
-- Expand/contract: same signature; the refusal is a new message under the same SQLSTATE
-- (22023).

create or replace function public.search_query_refusal(p_query text)
returns text
language sql
immutable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select case
        when pg_catalog.length(p_query) > 4096
            then format('the search query is %s characters long; at most 4096', pg_catalog.length(p_query))
        when (select count(distinct pg_catalog.lower(t.term)) from public.search_query_terms(p_query) t) > 64
            then 'the search query has more than 64 distinct terms'
        when w.words + p.words > 64
            then format('the search query has %s words once its identifiers are split (a phrase''s words '
                        'each counted); at most 64', w.words + p.words)
    end
      from (select count(distinct l.lexeme) as words
              from public.search_query_terms(p_query) t
             cross join lateral unnest(tsvector_to_array(to_tsvector(
                       'english', public.search_identifier_text(t.term)))) as l (lexeme)
             where t.term not like '"%') w,
           (select coalesce(sum((pg_catalog.numnode(q.query) + 1) / 2), 0) as words
              from public.search_query_terms(p_query) t
             cross join lateral (select websearch_to_tsquery(
                       'english', public.search_identifier_text(pg_catalog.btrim(t.term, '"'))) as query) q
             where t.term like '"%') p;
$$;
