// What the PostgreSQL server did during one measured round, for telling a slow round from a fast
// one: its WAL (full-page images follow a checkpoint), checkpoints, autovacuum and autoanalyze of
// the bench database's tables, and, when pg_stat_statements is loaded, the statements that took
// the most time with their buffer reads. Used by write-mix.ts (bench/README.md#write-mix).
import pg from 'pg'

interface Counters {
  walBytes: number
  walFpi: number
  walRecords: number
  checkpoints: number
  buffersCheckpoint: number
  buffersBackend: number
  autovacuums: number
  autoanalyzes: number
  deadTuples: number
}

export interface StatementCost {
  query: string
  calls: number
  totalMs: number
  meanUs: number
  rowsPerCall: number
  blocksReadPerCall: number
  blocksHitPerCall: number
  walBytesPerCall: number
}

export interface PostgresRound extends Counters {
  statements?: StatementCost[]
}

const COUNTERS = `
  select (select wal_bytes from pg_stat_wal)::float8 as "walBytes",
         (select wal_fpi from pg_stat_wal)::float8 as "walFpi",
         (select wal_records from pg_stat_wal)::float8 as "walRecords",
         (select checkpoints_timed + checkpoints_req from pg_stat_bgwriter)::float8 as checkpoints,
         (select buffers_checkpoint from pg_stat_bgwriter)::float8 as "buffersCheckpoint",
         (select buffers_backend from pg_stat_bgwriter)::float8 as "buffersBackend",
         coalesce(sum(autovacuum_count), 0)::float8 as autovacuums,
         coalesce(sum(autoanalyze_count), 0)::float8 as autoanalyzes,
         coalesce(sum(n_dead_tup), 0)::float8 as "deadTuples"
  from pg_stat_user_tables`

const STATEMENTS = `
  select query, calls::float8 as calls, total_exec_time as "totalMs",
         total_exec_time * 1000 / calls as "meanUs", rows::float8 / calls as "rowsPerCall",
         shared_blks_read::float8 / calls as "blocksReadPerCall",
         shared_blks_hit::float8 / calls as "blocksHitPerCall", wal_bytes::float8 / calls as "walBytesPerCall"
  from pg_stat_statements
  where dbid = (select oid from pg_database where datname = current_database()) and calls > 0
  order by total_exec_time desc limit $1`

/** Starts a round: resets pg_stat_statements (when loaded); the returned function ends it. */
export async function watchPostgresRound(
  databaseUrl: string,
  topStatements = 8,
): Promise<() => Promise<PostgresRound>> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  const loaded = await client.query("select 1 from pg_extension where extname = 'pg_stat_statements'")
  const withStatements = loaded.rowCount === 1
  if (withStatements) {
    await client.query('select pg_stat_statements_reset()')
  }
  const before = (await client.query<Counters>(COUNTERS)).rows[0] as Counters
  return async () => {
    try {
      // The counters of pg_stat_user_tables lag by up to PGSTAT's flush interval; close enough here.
      const after = (await client.query<Counters>(COUNTERS)).rows[0] as Counters
      const round = Object.fromEntries(
        Object.entries(after).map(([name, value]) => [
          name,
          name === 'deadTuples' ? value : value - before[name as keyof Counters],
        ]),
      ) as unknown as PostgresRound
      if (withStatements) {
        const { rows } = await client.query<StatementCost>(STATEMENTS, [topStatements])
        round.statements = rows.map((row) => ({ ...row, query: row.query.replace(/\s+/g, ' ').slice(0, 160) }))
      }
      return round
    } finally {
      await client.end()
    }
  }
}

/** Loads pg_stat_statements into the bench database when the server preloads it; else says why not. */
export async function enableStatementStats(databaseUrl: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ libraries: string }>(
      "select current_setting('shared_preload_libraries') as libraries",
    )
    if (!rows[0]?.libraries.includes('pg_stat_statements')) {
      return "pg_stat_statements is not in the server's shared_preload_libraries: no per-statement figures"
    }
    await client.query('create extension if not exists pg_stat_statements')
    return undefined
  } finally {
    await client.end()
  }
}
