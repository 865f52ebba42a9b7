// The request log's own cost per entry, alone and steady, on each database: the writer's record
// (copy into the open chunk, encode it when full) and its writes (transactions of up to WRITE_MAX
// entries, and on PostgreSQL the server's backends). Whole-service throughput swings more between
// runs than this cost; compare it with GET /me's CPU per request from bench/run.ts.
// Entries as GET /me makes them, at one id a microsecond (newId's clock, as a busy instance).
//
//   node --import tsx bench/request-log-cost.ts [--db=sqlite|postgres] [--entries=400000] [--rounds=5]
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import pg from 'pg'
import { openDatabase } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { newId } from '../src/lib/ids.js'
import type { StoredEntry } from '../src/request-logs/request-log.js'
import { createRequestLogWriter, WRITE_MAX } from '../src/request-logs/request-log-writer.js'
import { cpuMsOf, log } from './processes.js'

const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [name, value = ''] = arg.replace(/^--/, '').split('=')
    return [name, value]
  }),
)
const dbs = (args.get('db') ?? 'sqlite,postgres').split(',')
const entries = Number(args.get('entries') ?? 400_000)
const rounds = Number(args.get('rounds') ?? 5)
const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const ACCOUNT = 'acct_01JD3Z8Q4R5S6T7V8W9X0Y1Z2B'
const KEY = 'key_01JD3Z8Q4R5S6T7V8W9X0Y1Z2K'

async function measure(db: string): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'request-log-cost-'))
  const name = `bench_request_log_${process.pid}`
  const admin = new pg.Client({ connectionString: adminUrl })
  let url: string | undefined
  if (db === 'postgres') {
    await admin.connect()
    await admin.query(`create database ${name}`)
    url = adminUrl.replace(/\/[^/]*$/, `/${name}`)
  }
  const handle = openDatabase(
    url === undefined
      ? { kind: 'sqlite', path: path.join(dir, 'bench.sqlite'), synchronous: 'NORMAL' }
      : { kind: 'postgres', url },
  )
  try {
    await migrateToLatest(handle)
    const now = new Date().toISOString()
    await sql`insert into accounts (id, name, created_at, updated_at) values (${ACCOUNT}, 'Bench', ${now}, ${now})`.execute(
      handle.db,
    )
    const backends = async () =>
      url === undefined
        ? []
        : (
            await admin.query<{ pid: number }>(
              'select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
              [name],
            )
          ).rows.map((row) => row.pid)
    const figures: string[] = []
    for (let round = 0; round <= rounds; round++) {
      const start = Date.now()
      const made: StoredEntry[] = Array.from({ length: entries }, (_, i) => [
        newId('request', start + Math.floor(i / 1000)),
        KEY,
        'GET',
        `/api/v1/${'me'}`,
        '/api/v1/me',
        200,
        0.4,
        null,
        '127.0.0.1',
        'contacts-api-client/0.1.0',
        null,
        0,
      ])
      const writer = createRequestLogWriter({ db: handle.db, maxPerDay: Number.MAX_SAFE_INTEGER, count: () => {} })
      const pids = await backends()
      const dbBefore = cpuMsOf(pids)
      const before = process.cpuUsage()
      let recording = 0
      for (let at = 0; at < entries; at += WRITE_MAX) {
        const slice = process.cpuUsage()
        for (const entry of made.slice(at, at + WRITE_MAX)) {
          writer.record(ACCOUNT, entry)
        }
        const spent = process.cpuUsage(slice)
        recording += spent.user + spent.system
        // A write of WRITE_MAX entries, as a busy instance makes them.
        await writer.flush()
      }
      await writer.stop()
      const total = process.cpuUsage(before)
      const dbMs = cpuMsOf(await backends()) - dbBefore
      const us = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / entries
      // Round 0 warms the code and the database up.
      if (round > 0) {
        figures.push(
          `record ${(recording / entries).toFixed(2)}, all ${us(total).toFixed(2)}, database ${((dbMs * 1000) / entries).toFixed(2)}`,
        )
      }
    }
    log(`${db}: µs of CPU per entry (service: record, record + writes; database server)`)
    for (const line of figures) {
      log(`  ${line}`)
    }
  } finally {
    await handle.close()
    rmSync(dir, { recursive: true, force: true })
    if (url !== undefined) {
      await admin.query(`drop database ${name}`)
      await admin.end()
    }
  }
}

for (const db of dbs) {
  await measure(db)
}
