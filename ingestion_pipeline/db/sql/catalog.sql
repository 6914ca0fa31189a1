-- Catalog queries behind the drift manifest (ingestion_pipeline/db/drift.py). They read
-- the `public` schema only and print definitions with pg_get_*def, so the same schema
-- gives the same manifest on PostgreSQL 15 to 18. Objects of an extension (pgvector's
-- functions, when it is installed in public) belong to the extension, not to our
-- migrations: they are left out (pg_depend deptype 'e').

-- name: tables
select c.relname as name,
       case c.relkind when 'r' then 'table' when 'p' then 'partitioned table' when 'v' then 'view'
                      when 'm' then 'materialized view' end as kind,
       coalesce(array_to_string(c.reloptions, ','), '') as options
from pg_class c
where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v', 'm')
order by 1;

-- name: columns
select c.relname || '.' || a.attname as name,
       format_type(a.atttypid, a.atttypmod) as type,
       a.attnotnull as not_null,
       coalesce(pg_get_expr(d.adbin, d.adrelid), '') as default,
       case a.attgenerated when 's' then 'stored' else '' end as generated
from pg_attribute a
join pg_class c on c.oid = a.attrelid
left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v', 'm')
  and a.attnum > 0 and not a.attisdropped
order by 1;

-- name: constraints
-- contype 'n' (NOT NULL as a constraint, PostgreSQL 18) is covered by columns.not_null.
select c.conrelid::regclass::text || '.' || c.conname as name,
       pg_get_constraintdef(c.oid) as definition
from pg_constraint c
where c.connamespace = 'public'::regnamespace and c.contype <> 'n' and c.conrelid <> 0
order by 1;

-- name: indexes
select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as definition
from pg_index i
join pg_class c on c.oid = i.indexrelid
where c.relnamespace = 'public'::regnamespace
order by 1;

-- name: functions
select p.oid::regprocedure::text as name,
       pg_get_function_result(p.oid) as returns,
       l.lanname as language,
       case when p.prosecdef then 'definer' else 'invoker' end as security,
       case p.provolatile when 'i' then 'immutable' when 's' then 'stable' else 'volatile' end as volatility,
       coalesce(array_to_string(p.proconfig, ','), '') as config,
       md5(p.prosrc) as body_md5
from pg_proc p
join pg_language l on l.oid = p.prolang
where p.pronamespace = 'public'::regnamespace and p.prokind = 'f'
  and not exists (select from pg_depend e where e.classid = 'pg_proc'::regclass and e.objid = p.oid and e.deptype = 'e')
order by 1;

-- name: triggers
select t.tgrelid::regclass::text || '.' || t.tgname as name, pg_get_triggerdef(t.oid) as definition
from pg_trigger t
join pg_class c on c.oid = t.tgrelid
where c.relnamespace = 'public'::regnamespace and not t.tgisinternal
order by 1;

-- name: function_grants
-- The owner's own privileges vary by installation and are left out; PUBLIC shows up
-- when a function was never revoked from it.
select p.oid::regprocedure::text || ' to ' ||
       case when a.grantee = 0 then 'PUBLIC' else a.grantee::regrole::text end as name,
       a.privilege_type as privilege
from pg_proc p
cross join lateral aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
where p.pronamespace = 'public'::regnamespace and p.prokind = 'f' and a.grantee <> p.proowner
  and not exists (select from pg_depend e where e.classid = 'pg_proc'::regclass and e.objid = p.oid and e.deptype = 'e')
order by 1;
