"""Every foreign key of schema public has an index whose leading columns are its columns
(migration …_cleanup_indexes.sql): otherwise each delete or key update of a referenced row
scans the whole referencing table (ON DELETE SET NULL / the RI check), as deleting an
abandoned generation scanned all of `documents`."""

from ingestion_pipeline.db.connection import connect
from tests.conftest import _fresh_database

CLEANUP_INDEXES_NAME = "cleanup_indexes"

# A foreign key is covered by a valid, non-partial index whose first n key columns are
# the key's n columns (in any order: equality on all of them uses the index either way).
UNINDEXED_FOREIGN_KEYS = """
select c.conrelid::regclass::text || '.' || string_agg(a.attname, ',' order by k.n) as foreign_key
  from pg_constraint c
  cross join lateral unnest(c.conkey) with ordinality as k(attnum, n)
  join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.attnum
 where c.contype = 'f'
   and c.connamespace = 'public'::regnamespace
   and not exists (
       select 1
         from pg_index i
        where i.indrelid = c.conrelid
          and i.indisvalid
          and i.indpred is null
          and i.indnkeyatts >= cardinality(c.conkey)
          and (select array_agg(x order by x) from unnest((i.indkey::int2[])[0:cardinality(c.conkey) - 1]) x)
              = (select array_agg(x order by x) from unnest(c.conkey) x))
 group by c.oid, c.conrelid
 order by 1
"""


def unindexed_foreign_keys(url: str) -> list[str]:
    with connect(url) as conn:
        return [row["foreign_key"] for row in conn.execute(UNINDEXED_FOREIGN_KEYS)]


def foreign_key_count(url: str) -> int:
    with connect(url) as conn:
        return conn.execute(
            "select count(*) as n from pg_constraint where contype = 'f' and connamespace = 'public'::regnamespace"
        ).fetchone()["n"]


def test_every_foreign_key_is_indexed_at_head(db_url):
    assert foreign_key_count(db_url) >= 5  # the query has keys to look at
    assert unindexed_foreign_keys(db_url) == []


def test_before_the_cleanup_indexes_only_the_generation_key_of_documents_was_unindexed(pg_server, template_before):
    for url in _fresh_database(pg_server, template_before(CLEANUP_INDEXES_NAME)):
        assert unindexed_foreign_keys(url) == ["documents.index_generation_id"]
