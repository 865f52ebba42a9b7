// EXPLAIN for every list filter, on the seeded data: each list call goes through the app's own
// listContactRows; the SQL it sends is captured from Kysely's log and explained by the database
// (SQLite: EXPLAIN QUERY PLAN; PostgreSQL: EXPLAIN ANALYZE), with the time of one warm call.
import SQLite from 'better-sqlite3'
import { type CompiledQuery, Kysely, type LogEvent, PostgresDialect, SqliteDialect } from 'kysely'
import pg from 'pg'
import { type ListContactsOptions, listContactRows } from '../src/contacts/contacts.list-query.js'
import type { Database } from '../src/db/schema.js'

export interface ExplainedFilter {
  filter: string
  /** One entry per statement the call sent (updated_after sends a probe first). */
  statements: Array<{ sql: string; plan: string[] }>
  rows: number
  /** One warm call, the whole listContactRows. */
  ms: number
}

const DAY_MS = 86_400_000

function cases(deepId: string): Array<[string, Omit<ListContactsOptions, 'fetch'>]> {
  const recent = new Date(Date.now() - DAY_MS).toISOString()
  return [
    ['page 1', { order: 'asc', afterId: undefined }],
    ['page at depth (after=cursor)', { order: 'asc', afterId: deepId }],
    ['order=desc', { order: 'desc', afterId: undefined }],
    ['email', { order: 'asc', afterId: undefined, email: 'nobody@example.com' }],
    ['tag=vip (2%)', { order: 'asc', afterId: undefined, tag: 'vip' }],
    ['tag=vip at depth', { order: 'asc', afterId: deepId, tag: 'vip' }],
    ['q=mar (common prefix)', { order: 'asc', afterId: undefined, q: 'mar' }],
    ['q=zzz (no match)', { order: 'asc', afterId: undefined, q: 'zzz' }],
    ['updated_after=a day ago (few)', { order: 'asc', afterId: undefined, updated_after: recent }],
    ['updated_after=2000 (all)', { order: 'asc', afterId: undefined, updated_after: '2000-01-01T00:00:00Z' }],
  ]
}

export async function explainFilters(
  target: { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string },
  accountId: string,
  deepId: string,
): Promise<ExplainedFilter[]> {
  const captured: CompiledQuery[] = []
  const log = (event: LogEvent) => {
    if (event.level === 'query') {
      captured.push(event.query)
    }
  }
  const sqlite = target.kind === 'sqlite' ? new SQLite(target.file, { readonly: true }) : undefined
  const pool = target.kind === 'postgres' ? new pg.Pool({ connectionString: target.url, max: 1 }) : undefined
  const db = new Kysely<Database>({
    dialect: sqlite ? new SqliteDialect({ database: sqlite }) : new PostgresDialect({ pool: pool as pg.Pool }),
    log,
  })
  const explain = async (query: CompiledQuery): Promise<string[]> => {
    if (sqlite) {
      const rows = sqlite.prepare(`explain query plan ${query.sql}`).all(...query.parameters) as Array<{
        detail: string
      }>
      return rows.map((row) => row.detail)
    }
    const { rows } = await (pool as pg.Pool).query<{ 'QUERY PLAN': string }>(
      `explain (analyze, costs off, timing off, summary off) ${query.sql}`,
      [...query.parameters],
    )
    return rows.map((row) => row['QUERY PLAN'])
  }
  const results: ExplainedFilter[] = []
  try {
    for (const [filter, options] of cases(deepId)) {
      await listContactRows(db, accountId, { ...options, fetch: 51 })
      captured.length = 0
      const started = performance.now()
      const { rows } = await listContactRows(db, accountId, { ...options, fetch: 51 })
      const ms = performance.now() - started
      const statements = []
      for (const query of [...captured]) {
        statements.push({ sql: query.sql, plan: await explain(query) })
      }
      results.push({ filter, statements, rows: rows.length, ms })
    }
  } finally {
    await db.destroy()
  }
  return results
}

/** The plans in a few lines each, for the console. */
export function formatExplained(db: string, explained: ExplainedFilter[]): string {
  const lines = [`EXPLAIN, ${db}:`]
  for (const entry of explained) {
    lines.push(`  ${entry.filter}: ${entry.rows} rows in ${entry.ms.toFixed(2)} ms`)
    for (const statement of entry.statements) {
      for (const line of statement.plan) {
        lines.push(`      ${line}`)
      }
    }
  }
  return lines.join('\n')
}
