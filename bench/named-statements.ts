// What named (prepared) statements buy on a direct PostgreSQL connection (bench/README.md#two-instances).
// `node --import tsx bench/named-statements.ts` (BENCH_DATABASE_URL, else TEST_DATABASE_URL).
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { createAccountWithKey } from '../src/accounts/accounts.js'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { openDatabase } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { closeDeps, createDeps } from '../src/deps.js'

const url =
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const ROUNDS = Number(process.env.ROUNDS ?? 4)
const REQUESTS = Number(process.env.REQUESTS ?? 1500)
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 1)

const schema = `bench_named_${randomBytes(4).toString('hex')}`
const admin = new pg.Client({ connectionString: url })
await admin.connect()
await admin.query(`create schema ${schema}`)
const scoped = new URL(url)
scoped.searchParams.set('options', `-c search_path=${schema}`)

/** CPU time of these backends so far, in ns. */
const backendCpuNs = (pids: number[]): number =>
  pids.reduce((sum, pid) => sum + Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]), 0)

async function instance(pooler: boolean, name = 'setup') {
  const tagged = new URL(scoped)
  tagged.searchParams.set('application_name', name)
  const env = {
    DATABASE_URL: tagged.toString(),
    SECRET: 'x'.repeat(32),
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_SECOND: '0',
    ...(pooler ? { DATABASE_POOLER: 'transaction' } : {}),
  }
  const config = loadConfig(env)
  const database = openDatabase(config.database)
  const deps = createDeps(config, { database })
  const app = await buildApp(deps, { logger: false })
  await app.ready()
  const close = async () => {
    await app.close()
    await closeDeps(deps)
  }
  return { app, deps, close }
}

try {
  const setup = await instance(false)
  await migrateToLatest(setup.deps.database)
  const { secret } = await createAccountWithKey(setup.deps.database.db, {
    name: 'Bench',
    now: new Date(),
    keyPrefix: 'service',
  })
  const headers = { authorization: `Bearer ${secret}` }
  for (let i = 0; i < 500; i++) {
    await setup.app.inject({
      method: 'POST',
      url: '/api/v1/contacts',
      headers,
      payload: { email: `c${i}@example.com`, first_name: `C${i}`, tags: ['t'] },
    })
  }
  await setup.close()

  const results: Record<string, { list: number[]; me: number[] }> = {
    named: { list: [], me: [] },
    unnamed: { list: [], me: [] },
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of round % 2 ? (['unnamed', 'named'] as const) : (['named', 'unnamed'] as const)) {
      const name = `bench_named_${mode}_${round}`
      const { app, close } = await instance(mode === 'unnamed', name)
      for (const [kind, path] of [
        ['list', '/api/v1/contacts?limit=50'],
        ['me', '/api/v1/me'],
      ] as const) {
        const run = async (n: number) => {
          let next = 0
          await Promise.all(
            Array.from({ length: CONCURRENCY }, async () => {
              while (next++ < n) {
                const res = await app.inject({ method: 'GET', url: path, headers })
                if (res.statusCode !== 200) {
                  throw new Error(`${path}: ${res.statusCode}`)
                }
              }
            }),
          )
        }
        await run(200) // warm-up: connections opened, statements prepared, JIT
        const pids = (
          await admin.query<{ pid: number }>('select pid from pg_stat_activity where application_name = $1', [name])
        ).rows.map((row) => row.pid)
        const before = backendCpuNs(pids)
        await run(REQUESTS)
        results[mode]?.[kind].push((backendCpuNs(pids) - before) / 1000 / REQUESTS)
      }
      await close()
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
  for (const kind of ['list', 'me'] as const) {
    const named = median(results.named?.[kind] ?? [])
    const unnamed = median(results.unnamed?.[kind] ?? [])
    console.log(
      `${kind}: PostgreSQL CPU per request, named ${named.toFixed(0)} µs, unnamed ${unnamed.toFixed(0)} µs: named saves ${(100 * (1 - named / unnamed)).toFixed(1)}%`,
      JSON.stringify(results.named?.[kind].map(Math.round)),
      JSON.stringify(results.unnamed?.[kind].map(Math.round)),
    )
  }
} finally {
  await admin.query(`drop schema if exists ${schema} cascade`)
  await admin.end()
}
