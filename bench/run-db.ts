// One database's part of `npm run bench`: seed it, start the server, check and measure each scenario
// against raw node:http, then measure `serve --api-only` for its memory.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { type ExplainedFilter, explainFilters, formatExplained } from './explain.js'
import {
  type Db,
  type Measured,
  MINIMAL_SCENARIOS,
  type Mode,
  measure,
  measureAlternately,
  measureRaw,
  probe,
  type Request,
  type ScenarioResult,
  SERVER_CORE,
  startMinimal,
} from './measure.js'
import { log, RESULTS, ROOT, startService, stopProcess } from './processes.js'
import type { Options } from './run-options.js'
import { SCENARIOS, type ScenarioContext } from './scenarios.js'
import type { SeedResult } from './seed.js'

/**
 * The measured build's seed: its own bench/seed.ts (imported from its checkout, so its rows go
 * through its own migrations and row builders), which its server then finds fully migrated.
 */
async function seedOf(root: string): Promise<typeof import('./seed.js')> {
  return root === ROOT ? import('./seed.js') : import(pathToFileURL(path.join(root, 'bench', 'seed.ts')).href)
}

export interface DbRun {
  results: ScenarioResult[]
  seedSeconds: number
  explained: ExplainedFilter[]
}

export async function runDb(
  db: Db,
  options: Options,
  taskset: boolean,
  cleanups: Array<() => Promise<void>>,
): Promise<DbRun> {
  const secret = randomBytes(32).toString('hex')
  let databaseUrl: string
  let seed: SeedResult
  let explainTarget: Parameters<typeof explainFilters>[0]
  let backends: (() => Promise<number[]>) | undefined
  const { seedPostgres, seedSqlite } = await seedOf(options.root)
  if (db === 'sqlite') {
    const dir = path.join(RESULTS, 'data')
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `bench-${process.pid}.sqlite`)
    const remove = async () => {
      for (const suffix of ['', '-wal', '-shm']) {
        rmSync(`${file}${suffix}`, { force: true })
      }
    }
    await remove()
    if (!options.keep) {
      cleanups.push(remove)
    }
    log(`seeding SQLite (${file}) ...`)
    seed = await seedSqlite(file, options.plan)
    databaseUrl = `sqlite:${file}`
    explainTarget = { kind: 'sqlite', file }
  } else {
    // Unique per run (pid, time, random), so benches of several checkouts on one server never collide.
    const name = `bench_${process.pid}_${Date.now()}_${randomBytes(3).toString('hex')}`
    const admin = new pg.Client({ connectionString: options.pgAdminUrl, connectionTimeoutMillis: 5000 })
    try {
      await admin.connect()
    } catch (error) {
      throw new Error(
        `PostgreSQL is unreachable at ${options.pgAdminUrl} (${(error as Error).message}); set BENCH_DATABASE_URL or run with --db=sqlite`,
      )
    }
    await admin.query(`create database ${name}`)
    await admin.end()
    cleanups.push(async () => {
      const drop = new pg.Client({ connectionString: options.pgAdminUrl })
      await drop.connect()
      await drop.query(`drop database if exists ${name} with (force)`)
      await drop.end()
    })
    const url = new URL(options.pgAdminUrl)
    url.pathname = `/${name}`
    databaseUrl = url.toString()
    log(`seeding PostgreSQL (database ${name}) ...`)
    seed = await seedPostgres(databaseUrl, options.plan)
    explainTarget = { kind: 'postgres', url: databaseUrl }
    // The server's connections, opened during the warm-up: pinned with the server, and counted in its CPU.
    backends = async () => {
      const client = new pg.Client({ connectionString: databaseUrl })
      await client.connect()
      try {
        const { rows } = await client.query<{ pid: number }>(
          'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
        )
        const pids = rows.map((row) => row.pid)
        if (taskset && options.pinPostgres) {
          for (const pid of pids) {
            execFileSync('taskset', ['-a', '-cp', String(SERVER_CORE), String(pid)], { stdio: 'ignore' })
          }
        }
        return pids
      } finally {
        await client.end()
      }
    }
  }
  log(`  seeded in ${seed.seconds.toFixed(1)} s`)
  // This tree's list query on another build's data could fail or mislead: EXPLAIN only our own build.
  const explained = options.root === ROOT ? await explainFilters(explainTarget, seed.big.accountId, seed.deepId) : []
  if (explained.length > 0) {
    log(formatExplained(db === 'sqlite' ? 'SQLite' : 'PostgreSQL', explained))
  }

  /** `serve` as deployed, or `serve --api-only` with WEBHOOK_WORKER=off (the lean API process). */
  const startMode = async (mode: Mode) => {
    const profileDir = path.join(RESULTS, 'profiles', mode === 'serve' ? db : `${db}-api-only`)
    const { child: server, base } = await startService({
      root: options.root,
      core: SERVER_CORE,
      taskset,
      databaseUrl,
      secret,
      apiOnly: mode === 'api-only',
      nodeArgs: [...options.nodeFlags, ...(options.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])],
      // The full run seeds 1,000,000 contacts, the default quota: POST /contacts would be 403.
      env: { MAX_CONTACTS_PER_ACCOUNT: '1000000000' },
      track: (child) => cleanups.push(() => stopProcess(child)),
    })
    return { server, base, stop: () => stopProcess(server) }
  }

  const chosen = SCENARIOS.filter((s) => !options.scenarios || options.scenarios.includes(s.name))
  const results: ScenarioResult[] = []
  const { server, base, stop } = await startMode('serve')
  const ctx: ScenarioContext = { seed, secret, base, headers: { authorization: `Bearer ${seed.big.key}` } }
  const requests = new Map<string, Request>()
  for (const scenario of SCENARIOS) {
    // Another build (--root) may predate what some scenarios exercise: it is probed on the chosen ones only.
    if (options.root !== ROOT && !chosen.includes(scenario)) {
      continue
    }
    const request: Request = {
      method: scenario.method,
      status: scenario.status,
      path: typeof scenario.path === 'function' ? scenario.path(ctx) : scenario.path,
      ...(scenario.body === undefined ? {} : { body: scenario.body }),
      ...(scenario.ids ? { ids: scenario.ids(ctx) } : {}),
      headers: { ...ctx.headers, ...(await scenario.headers?.(ctx)) },
    }
    requests.set(scenario.name, request)
    // Every scenario is checked once, even when not measured, so the quick run proves them all.
    const answer = await probe(base, scenario.name, request)
    const problem = scenario.check?.(answer.body.toString(), ctx)
    if (problem) {
      throw new Error(`${db} ${scenario.name}: ${problem}`)
    }
    if (!chosen.includes(scenario)) {
      continue
    }
    const oursTarget = { url: base, pid: server.pid, ...(backends ? { beforeEach: backends } : {}) }
    const label = `${db} ${scenario.name}`
    let ours: Measured
    // The least code doing the same database work, the anchor of the request's cost: its rounds
    // alternate with ours.
    let minimal: Measured | undefined
    if (MINIMAL_SCENARIOS.has(scenario.name)) {
      const baseline = await startMinimal(
        taskset,
        { url: databaseUrl, secret, backends },
        request,
        `minimal ${scenario.name}`,
        cleanups,
      )
      try {
        ;[ours, minimal] = (await measureAlternately(
          options,
          taskset,
          [
            { target: oursTarget, label },
            { target: baseline.target, label: `minimal ${scenario.name}` },
          ],
          request,
        )) as [Measured, Measured]
      } finally {
        await baseline.stop()
      }
    } else {
      ours = await measure(options, taskset, oursTarget, request, label)
    }
    // Raw node:http with this scenario's own answer, right after (same minute, same load).
    const raw = await measureRaw(options, taskset, answer, request, `raw ${scenario.name}`, cleanups)
    results.push({
      db,
      mode: 'serve',
      scenario: scenario.name,
      title: scenario.title,
      status: answer.status,
      bytes: answer.body.length,
      ...ours,
      raw,
      cpuRatio: raw.cpuUsPerRequest / ours.cpuUsPerRequest,
      rpsRatio: ours.rps / raw.rps,
      ...(minimal ? { minimal, minimalRatio: ours.rps / minimal.rps } : {}),
    })
  }
  await stop()

  if (options.apiOnly) {
    // RSS of the lean process under the same loads: one round each, no baseline.
    const lean = await startMode('api-only')
    for (const scenario of chosen) {
      const taken = requests.get(scenario.name) as Request
      // Headers taken from an answer (the polling client's ETag) are taken again: the writes
      // measured since may have changed the list, and a stale tag would be answered 200.
      const request = scenario.headers
        ? { ...taken, headers: { ...ctx.headers, ...(await scenario.headers({ ...ctx, base: lean.base })) } }
        : taken
      const ours = await measure(
        options,
        taskset,
        { url: lean.base, pid: lean.server.pid, ...(backends ? { beforeEach: backends } : {}) },
        request,
        `${db} ${scenario.name} (api-only)`,
        1,
      )
      results.push({
        db,
        mode: 'api-only',
        scenario: scenario.name,
        title: scenario.title,
        status: scenario.status,
        bytes: 0,
        ...ours,
      })
    }
    await lean.stop()
  }
  return { results, seedSeconds: seed.seconds, explained }
}
