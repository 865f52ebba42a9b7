#!/usr/bin/env bash
# The PostgreSQL leg once more, through a transaction-mode PgBouncer this script starts itself
# (README, "Behind a connection pooler"): the suite's PostgreSQL files with
# DATABASE_POOLER=transaction, then a short concurrent load (mixed GET/POST, 32 connections) that
# must get no error and no non-2xx answer.
# Runs on its own (`bash .ci/pgbouncer-leg.sh [vitest file filters…]`) or from .ci/run; uses
# TEST_DATABASE_URL when set (the server, reached directly), else a throwaway database of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== PgBouncer (transaction pooling)"
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }
fi
PGBOUNCER="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
"$PGBOUNCER" --version | head -1

work="$(mktemp -d /tmp/pgbouncer-leg.XXXXXX)"
export TEST_POOLER_ROLES="pgbleg$$"
created_db=""
cleanup() {
  if [ -n "${server_pid:-}" ]; then kill "$server_pid" 2>/dev/null || true; fi
  if [ -f "$work/pgbouncer.pid" ]; then kill "$(cat "$work/pgbouncer.pid")" 2>/dev/null || true; fi
  # The suite's roles (test/harness.ts names them after TEST_POOLER_ROLES) and the load's.
  if [ -n "${TEST_DATABASE_URL:-}" ]; then
    for role in $(psql "$TEST_DATABASE_URL" -Atc "select rolname from pg_roles where rolname like '${TEST_POOLER_ROLES}\_%'" 2>/dev/null); do
      psql "$TEST_DATABASE_URL" -qc "drop schema if exists $role cascade; drop owned by $role cascade; drop role if exists $role" \
        >/dev/null 2>&1 || true
    done
  fi
  if [ -n "$created_db" ]; then
    psql -h 127.0.0.1 -U postgres -qc "drop database if exists $created_db with (force)" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${TEST_DATABASE_URL:-}" ]; then
  created_db="contacts_pgb_$(date +%s)_$$"
  psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -qc "create database $created_db"
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$created_db"
fi
# host, port, database and user of the server, and a free port for the pooler
read -r pg_host pg_port pg_db pg_user port < <(node -e '
  const u = new URL(process.argv[1])
  const s = require("node:net").createServer().listen(0, "127.0.0.1", () => {
    console.log(u.hostname || "127.0.0.1", u.port || 5432, u.pathname.slice(1), decodeURIComponent(u.username) || "postgres", s.address().port)
    s.close()
  })' "$TEST_DATABASE_URL")

# Any user the server knows may log in (auth_query as auth_user, then trust): the suite gives each
# throwaway schema a role whose default search_path is the schema (test/harness.ts), because a
# pooler passes no `options` startup parameter. A pool of 3 server connections per user, so a
# harness's 10 clients really share them between transactions; at most 40 server connections to
# the database, since the server is shared, and idle ones closed after 1 s: a new pool waits for a
# free one (with 5 s, the suite's new roles waited up to 5 s each and the process tests timed out).
cat >"$work/pgbouncer.ini" <<EOF
[databases]
* = host=$pg_host port=$pg_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $work/userlist.txt
auth_user = $pg_user
pool_mode = transaction
default_pool_size = 3
max_db_connections = 40
max_client_conn = 800
server_idle_timeout = 1
query_wait_timeout = 60
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
EOF
printf '"%s" ""\n' "$pg_user" >"$work/userlist.txt"
if [ "$(id -u)" = 0 ]; then
  # PgBouncer refuses to run as root.
  chown -R postgres "$work"
  runuser -u postgres -- "$PGBOUNCER" -d "$work/pgbouncer.ini"
else
  "$PGBOUNCER" -d "$work/pgbouncer.ini"
fi
for _ in $(seq 1 50); do
  pg_isready -h 127.0.0.1 -p "$port" -q && break
  sleep 0.2
done
pg_isready -h 127.0.0.1 -p "$port" || { cat "$work/pgbouncer.log" >&2; exit 1; }
export TEST_POOLER_URL="postgres://$pg_user@127.0.0.1:$port/$pg_db"
echo "PgBouncer on 127.0.0.1:$port (pool_mode=transaction, default_pool_size=3) in front of $pg_host:$pg_port/$pg_db"

echo "== test: the PostgreSQL leg through PgBouncer"
# The files that run on PostgreSQL (per dialect through testDialects(), or on a schema of the server),
# with the kill -9 rounds, less what only reads through the same stores again (the web pages, the
# OpenAPI samples, the SDK's session, the model-based run, the HTTP conventions and connection
# limits) and the rolling upgrade, whose migrations are the pooler-tested migrations'; the Citus
# files check SQL text. The rest of the suite (SQLite, processes, the CLI) ran in the main leg and
# meets no pooler. Vitest file filters given as arguments replace the list. PGBOUNCER_LEG_TESTS=0:
# load only.
if [ "${PGBOUNCER_LEG_TESTS:-1}" != 0 ]; then
  if [ "$#" -gt 0 ]; then
    files=("$@")
  else
    mapfile -t files < <(
      { grep -rlE "testDialects\(\)|TEST_DATABASE_URL|createThrowawaySchema" src test packages --include='*.test.ts'
        ls test/crash.postgres.test.ts; } |
        grep -vE '^src/web/|^src/http/openapi-samples|^packages/|^test/(property|citus-|docs-|e2e/|rolling-upgrade|http-conventions|connection-limits)' |
        sort -u
    )
  fi
  echo "${#files[@]} test files"
  # Five kill -9 rounds here: the main leg ran the checklist's twenty on the server itself.
  CRASH_ROUNDS=5 TEST_DIALECTS=postgres npx vitest run "${files[@]}"
fi

echo "== load through PgBouncer: 32 connections, mixed GET/POST, zero errors"
load_schema="${TEST_POOLER_ROLES}_load"
psql "$TEST_DATABASE_URL" -v ON_ERROR_STOP=1 -qc \
  "create role $load_schema login; alter role $load_schema set search_path = $load_schema; create schema $load_schema authorization $load_schema"
load_port="$(node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
export DATABASE_URL="postgres://$load_schema@127.0.0.1:$port/$pg_db"
export DATABASE_POOLER=transaction DATABASE_DIRECT_URL="$TEST_DATABASE_URL"
export SECRET="pgbouncer-leg-$(node -e 'console.log(require("node:crypto").randomBytes(24).toString("hex"))')"
export PORT="$load_port" LOG_LEVEL=warn RATE_LIMIT_PER_SECOND=0 WEBHOOK_WORKER=off
# The build when it is newer than every source file (as in CI, after npm run build), else the sources.
if [ -f dist/main.js ] && [ -z "$(find src -name '*.ts' -newer dist/main.js -print -quit)" ]; then
  main=(node dist/main.js)
else
  main=(node --import tsx src/main.ts) # one process: a kill of $server_pid stops the server itself
fi
key="$("${main[@]}" accounts create --name 'PgBouncer load' --json | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).api_key.secret))')"
"${main[@]}" serve >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$load_port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "http://127.0.0.1:$load_port/readyz" >/dev/null || { cat "$work/server.log" >&2; exit 1; }
LOAD_URL="http://127.0.0.1:$load_port" LOAD_KEY="$key" node --input-type=module -e '
  import autocannon from "autocannon"
  let n = 0
  const auth = { authorization: `Bearer ${process.env.LOAD_KEY}` }
  const result = await autocannon({
    url: process.env.LOAD_URL,
    connections: 32,
    duration: 5,
    requests: [
      {
        // Every other request a create (a transaction: contact, tags, terms, event), else a list page.
        setupRequest: (req) =>
          n++ % 2 === 0
            ? { ...req, method: "POST", path: "/api/v1/contacts",
                headers: { ...auth, "content-type": "application/json" },
                body: JSON.stringify({ email: `load${n}-${process.pid}@example.com`, first_name: "Load", tags: ["pgb"] }) }
            : { ...req, method: "GET", path: "/api/v1/contacts?limit=20", headers: auth },
      },
    ],
  })
  const bad = result.non2xx + result.errors + result.timeouts
  console.log(`${result.requests.total} requests in ${result.duration} s (${Math.round(result.requests.average)}/s),` +
    ` p99 ${result.latency.p99} ms; non-2xx ${result.non2xx}, errors ${result.errors}, timeouts ${result.timeouts};` +
    ` statuses ${JSON.stringify(Object.fromEntries(Object.entries(result.statusCodeStats).map(([k, v]) => [k, v.count])))}`)
  if (bad > 0 || result.requests.total === 0) {
    console.error("load through PgBouncer: failed requests; the server said:")
    process.exit(1)
  }
' || { tail -c 4000 "$work/server.log" >&2; exit 1; }
if grep -q '"level":[56]0' "$work/server.log"; then
  echo "server log under load:" >&2
  cat "$work/server.log" >&2
  exit 1
fi
echo "== PgBouncer leg passed"
