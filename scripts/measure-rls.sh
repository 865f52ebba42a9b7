#!/usr/bin/env bash
# Measures what PostgreSQL row-level security costs on the contacts list query (docs/tenant-isolation.md).
# A: the app's keyset page as one statement (the tenant filter is in the WHERE clause).
# B: the same page behind RLS, as the app would run it: a transaction that sets app.account_id
#    with set_config(..., true), then the query, as a role that is neither owner nor BYPASSRLS.
# Usage: scripts/measure-rls.sh [postgres://postgres@127.0.0.1:5432/postgres] [seconds] [rounds]
set -euo pipefail
admin_url="${1:-postgres://postgres@127.0.0.1:5432/postgres}"
seconds="${2:-10}"
rounds="${3:-3}"
db="rls_measure_$$"
psql "$admin_url" -qc "create database $db"
trap 'psql "$admin_url" -qc "drop database if exists $db with (force)" >/dev/null; psql "$admin_url" -qc "drop role if exists rls_app" >/dev/null' EXIT
url="${admin_url%/*}/$db"

psql "$url" -q -v ON_ERROR_STOP=1 <<'SQL'
create table accounts (id text primary key, name text not null);
create table contacts (account_id text not null references accounts(id), id text not null, email_lower text,
  search text not null, created_at text not null, updated_at text not null, body text not null,
  primary key (account_id, id));
insert into accounts select 'acct_' || lpad(g::text, 26, '0'), 'A' || g from generate_series(1, 1001) g;
-- One large account (200,000 contacts) and 1,000 small ones (20 each), bodies of ~330 bytes.
insert into contacts select 'acct_' || lpad('1', 26, '0'), 'con_' || lpad(g::text, 26, '0'), 'c' || g || '@example.com',
  E'\nc' || g, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z',
  '{"object":"contact","id":"con_' || lpad(g::text, 26, '0') || '","email":"c' || g || '@example.com","first_name":"First","last_name":"Last","phone":"+441632960961","company":"Analytical Engines","job_title":null,"tags":["vip"],"custom_fields":{"plan":"pro"},"created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z"}'
  from generate_series(1, 200000) g;
insert into contacts select 'acct_' || lpad(a::text, 26, '0'), 'con_' || lpad((a * 100 + g)::text, 26, '0'), null, '', 'x', 'x', '{}'
  from generate_series(2, 1001) a, generate_series(1, 20) g;
vacuum analyze;
create role rls_app login;
grant select on accounts, contacts to rls_app;
alter table contacts enable row level security;
alter table contacts force row level security;
create policy tenant on contacts using (account_id = nullif(current_setting('app.account_id', true), ''));
SQL

acct="acct_$(printf '%026d' 1)"
cat > /tmp/rls-a.sql <<SQL
\set n random(1, 199000)
select id, body from contacts where account_id = '$acct' and id > 'con_' || lpad(:n::text, 26, '0') order by id limit 51;
SQL
cat > /tmp/rls-b.sql <<SQL
\set n random(1, 199000)
begin;
select set_config('app.account_id', '$acct', true);
select id, body from contacts where account_id = '$acct' and id > 'con_' || lpad(:n::text, 26, '0') order by id limit 51;
commit;
SQL
# A runs as the table owner (the app's explicit filter only); B as rls_app under the policy.
run() { pgbench -n -c 4 -j 2 -T "$seconds" -f "$2" "$1" 2>/dev/null | awk '/^tps/ {print int($3)}'; }
app_url="${url/postgres@/rls_app@}"
echo "round A_no_rls_tps B_rls_tps"
for i in $(seq 1 "$rounds"); do
  echo "$i $(run "$url" /tmp/rls-a.sql) $(run "$app_url" /tmp/rls-b.sql)"
done
# The same policy query without the explicit transaction is not an option: the setting must be
# local to the transaction, or a pooled connection would carry one tenant's id into the next.
echo "plan under RLS:"
psql "$app_url" -Atc "begin; select set_config('app.account_id', '$acct', true); explain select id, body from contacts where account_id = '$acct' and id > 'con_0' order by id limit 51; commit;" | grep -v '^acct_\|^BEGIN\|^COMMIT'
