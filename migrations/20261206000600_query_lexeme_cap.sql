-- The cap on a query counts what the search works on: its words once identifiers are split
-- (issue 58, the fifth review's defect 2).
--
-- Before (migration 20261204000100): at most 4,096 characters and 64 distinct terms, a term
-- being what spaces and quotes delimit. Identifiers are split afterwards (search_identifier_text:
-- `a.b`, `a::b`, `a_b` and `a->b` become the whole and each part), so one dotted identifier of
-- 4,078 characters was one term and 446 lexemes: an anonymous search with it cost 2,958 ms,
-- 7.9x the costliest query the term cap admits, and a phrase of 600 words in quotes was one
-- term too.
--
-- Now also at most 64 distinct lexemes over every term (words, phrases and exclusions alike),
-- as the English configuration makes them from the identifier-split text: the lexemes the
-- search looks up. A query of 64 plain words is at most 64 lexemes, so whatever the term cap
-- admitted in words is still admitted; an identifier or a phrase pays for each of its parts.
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
        when l.lexemes > 64
            then format('the search query has %s distinct words once its identifiers are split; at most 64',
                        l.lexemes)
    end
      from (select count(distinct w.lexeme) as lexemes
              from public.search_query_terms(p_query) t
             cross join lateral unnest(tsvector_to_array(to_tsvector(
                       'english', public.search_identifier_text(pg_catalog.btrim(t.term, '"'))))) as w (lexeme)) l;
$$;
