// `npm run bench` (full) and `npm run bench:quick`: seed, serve, load, compare with raw node:http.
//
// The server under test (dist/main.js serve) runs in its own process pinned to core 0, and the load
// generator (bench/load.ts, autocannon) in another pinned to core 1, when `taskset` exists. With
// PostgreSQL, its backends serving the bench database are pinned to core 0 with the server, so the
// service as a whole gets one core, as SQLite (in-process) does and as the baseline does.
// Webhook delivery (bench/webhooks.ts: throughput, lag, writes with endpoints) runs as the scenario
// `webhooks`, on a small database of its own, after the contact scenarios.
// Options: --quick, --db=sqlite,postgres, --scenario=me,list,...,webhooks, --contacts=N (the big account;
// the deep page is at 90%), --rounds=N, --seconds=N,
// --warmup=N, --connections=N, --cpu-prof (profiles under bench/results/profiles/), --keep (keep the
// SQLite file), --pg-free (leave PostgreSQL backends unpinned). BENCH_DATABASE_URL (else
// TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres) is where the throwaway
// database is created and dropped.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { encodeCursor } from '../src/http/pagination.js'
import { type ExplainedFilter, explainFilters, formatExplained } from './explain.js'
import type { LoadResult, LoadSpec } from './load.js'
import { type SeedPlan, type SeedResult, seedPostgres, seedSqlite } from './seed.js'
import { type BenchKit, runWebhooks, WEBHOOK_PLANS, type WebhookResult } from './webhooks.js'

type Db = 'sqlite' | 'postgres'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const RESULTS = path.join(ROOT, 'bench', 'results')
const CLOCK_TICKS = 100
const SERVER_CORE = 0
const LOAD_CORE = 1

interface Options {
  quick: boolean
  dbs: Db[]
  scenarios: string[] | undefined
  rounds: number
  seconds: number
  warmup: number
  connections: number
  plan: SeedPlan
  cpuProf: boolean
  keep: boolean
  pinPostgres: boolean
  pgAdminUrl: string
}

function parseOptions(argv: string[]): Options {
  const flags = new Map<string, string>()
  for (const arg of argv) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg)
    if (!match?.[1]) {
      throw new Error(`unknown argument ${arg}`)
    }
    flags.set(match[1], match[2] ?? 'true')
  }
  const known = [
    'quick',
    'db',
    'scenario',
    'contacts',
    'rounds',
    'seconds',
    'warmup',
    'connections',
    'cpu-prof',
    'keep',
    'pg-free',
  ]
  for (const flag of flags.keys()) {
    if (!known.includes(flag)) {
      throw new Error(`unknown option --${flag} (known: ${known.map((k) => `--${k}`).join(' ')})`)
    }
  }
  const quick = flags.has('quick')
  const number = (name: string, fallback: number) => {
    const raw = flags.get(name)
    const value = raw === undefined ? fallback : Number(raw)
    if (!Number.isFinite(value) || value <= 0 || value > 600) {
      throw new Error(`--${name} must be a number from 1 to 600`)
    }
    return value
  }
  const dbs = (flags.get('db') ?? 'sqlite,postgres').split(',') as Db[]
  if (dbs.some((db) => db !== 'sqlite' && db !== 'postgres')) {
    throw new Error('--db takes sqlite, postgres or both')
  }
  const plan: SeedPlan = quick
    ? { bigContacts: 20_000, deepPosition: 18_000, smallAccounts: 50, contactsPerSmallAccount: 20 }
    : { bigContacts: 1_000_000, deepPosition: 900_000, smallAccounts: 1000, contactsPerSmallAccount: 20 }
  const contacts = flags.get('contacts')
  if (contacts !== undefined) {
    const count = Number(contacts)
    if (!Number.isInteger(count) || count < 1000 || count > 10_000_000) {
      throw new Error('--contacts must be an integer from 1000 to 10000000')
    }
    plan.bigContacts = count
    plan.deepPosition = Math.floor(count * 0.9)
  }
  return {
    quick,
    dbs,
    scenarios: flags.get('scenario')?.split(','),
    rounds: number('rounds', quick ? 1 : 3),
    seconds: number('seconds', quick ? 2 : 10),
    warmup: number('warmup', quick ? 0.5 : 3),
    connections: number('connections', 50),
    plan,
    cpuProf: flags.has('cpu-prof'),
    keep: flags.has('keep'),
    pinPostgres: !flags.has('pg-free'),
    pgAdminUrl:
      process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  }
}

const log = (text: string) => process.stderr.write(`${text}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' })
    return os.availableParallelism() >= 2
  } catch {
    return false
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/** Spawns node with these arguments, on `core` when taskset is available. */
function spawnNode(
  args: string[],
  core: number,
  taskset: boolean,
  env: NodeJS.ProcessEnv,
  pipes = false,
): ChildProcess {
  const [command, commandArgs] = taskset
    ? ['taskset', ['-c', String(core), process.execPath, ...args]]
    : [process.execPath, args]
  return spawn(command, commandArgs, { cwd: ROOT, env, stdio: pipes ? 'pipe' : ['ignore', 'ignore', 'pipe'] })
}

async function waitForHttp(url: string, child: ChildProcess, stderr: () => string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) {
      throw new Error(`server exited (${child.exitCode}): ${stderr()}`)
    }
    try {
      const res = await fetch(url)
      await res.arrayBuffer()
      return
    } catch {
      await sleep(100)
    }
  }
  throw new Error(`no answer from ${url} within 30 s: ${stderr()}`)
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
  await exited
  clearTimeout(timer)
}

/** Resident set size of a process in bytes, from /proc (0 where /proc is missing). */
function rssOf(pid: number | undefined): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1]
    return kb ? Number(kb) * 1024 : 0
  } catch {
    return 0
  }
}

/** CPU time (user + system) of processes in ms, from /proc (0 where /proc is missing). */
function cpuMsOf(pids: number[]): number {
  let ticks = 0
  for (const pid of pids) {
    try {
      // Fields after the command name (which may contain spaces): utime and stime are 14 and 15.
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
        .replace(/^.*\) /, '')
        .split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // Gone: a PostgreSQL backend that ended.
    }
  }
  return (ticks * 1000) / CLOCK_TICKS
}

/**
 * Runs one scenario's load generator in its own process: warm-up, then `beforeRounds` (pinning),
 * then the rounds, sampling the server's RSS meanwhile (the peak of each round is kept).
 */
async function load(
  spec: LoadSpec,
  taskset: boolean,
  serverPid: number | undefined,
  beforeRounds: () => Promise<number[]>,
): Promise<Round[]> {
  const child = spawnNode(
    ['--import', 'tsx', 'bench/load.ts', JSON.stringify(spec)],
    LOAD_CORE,
    taskset,
    process.env,
    true,
  )
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000)
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const rounds: Round[] = []
  let rss = 0
  const serverPids = serverPid === undefined ? [] : [serverPid]
  let backendPids: number[] = []
  let cpuBefore = 0
  let dbCpuBefore = 0
  const sampler = setInterval(() => {
    rss = Math.max(rss, rssOf(serverPid))
  }, 200)
  try {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })
    for await (const line of lines) {
      const message = JSON.parse(line) as LoadResult | { warm: true }
      if ('warm' in message) {
        backendPids = await beforeRounds()
        rss = rssOf(serverPid)
        cpuBefore = cpuMsOf(serverPids)
        dbCpuBefore = cpuMsOf(backendPids)
        child.stdin?.write('go\n')
      } else {
        const cpuNow = cpuMsOf(serverPids)
        const dbCpuNow = cpuMsOf(backendPids)
        const served = message.rps * spec.seconds
        const perRequest = (ms: number) => (served > 0 ? (ms * 1000) / served : Number.NaN)
        const dbUs = perRequest(dbCpuNow - dbCpuBefore)
        rounds.push({
          ...message,
          rss: Math.max(rss, rssOf(serverPid)),
          cpuUsPerRequest: perRequest(cpuNow - cpuBefore) + dbUs,
          dbCpuUsPerRequest: dbUs,
        })
        rss = 0
        cpuBefore = cpuNow
        dbCpuBefore = dbCpuNow
      }
    }
  } finally {
    clearInterval(sampler)
  }
  const code = await exited
  if (code !== 0 || rounds.length !== spec.rounds) {
    throw new Error(`load generator failed (exit ${code}): ${stderr}`)
  }
  return rounds
}

interface Scenario {
  name: string
  title: string
  method: LoadSpec['method']
  path: string
  body: LoadSpec['body']
  ids?: string[]
  /** Checks one response before the load, so a broken scenario fails loudly instead of measuring errors. */
  check?: (body: string) => string | undefined
}

const listCheck = (predicate?: (contacts: Array<{ id: string; tags: string[] }>) => string | undefined) => {
  return (body: string) => {
    const page = JSON.parse(body) as { contacts: Array<{ id: string; tags: string[] }>; next_cursor: string | null }
    if (page.contacts.length !== 50 || page.next_cursor === null) {
      return `expected a full page of 50 with a next cursor, got ${page.contacts.length}`
    }
    return predicate?.(page.contacts)
  }
}

function scenariosFor(seed: SeedResult, secret: string): Scenario[] {
  const cursor = encodeCursor(
    secret,
    { list: 'contacts', accountId: seed.big.accountId, filters: { order: 'asc' } },
    seed.deepId,
  )
  return [
    { name: 'me', title: 'GET /me', method: 'GET', path: '/api/v1/me', body: 'none' },
    {
      name: 'list',
      title: 'list page 1 (limit 50)',
      method: 'GET',
      path: '/api/v1/contacts?limit=50',
      body: 'none',
      check: listCheck(),
    },
    {
      name: 'list-deep',
      title: 'list page at depth',
      method: 'GET',
      path: `/api/v1/contacts?limit=50&after=${encodeURIComponent(cursor)}`,
      body: 'none',
      check: listCheck((contacts) =>
        (contacts[0]?.id ?? '') > seed.deepId ? undefined : 'the deep page does not start after the cursor',
      ),
    },
    {
      name: 'list-tag',
      title: 'list, tag=vip (2%)',
      method: 'GET',
      path: '/api/v1/contacts?limit=50&tag=vip',
      body: 'none',
      check: listCheck((contacts) => (contacts.every((c) => c.tags.includes('vip')) ? undefined : 'untagged contact')),
    },
    {
      name: 'list-q',
      title: 'list, q=mar (~10%)',
      method: 'GET',
      path: '/api/v1/contacts?limit=50&q=mar',
      body: 'none',
      check: listCheck(),
    },
    { name: 'create', title: 'POST /contacts', method: 'POST', path: '/api/v1/contacts', body: 'create' },
    {
      name: 'patch',
      title: 'PATCH /contacts/{id}',
      method: 'PATCH',
      path: '/api/v1/contacts',
      body: 'patch',
      ids: seed.patchIds,
    },
  ]
}

interface Round extends LoadResult {
  rss: number
  /** CPU time the service (server process, plus its PostgreSQL backends) spent per 2xx response. */
  cpuUsPerRequest: number
  /** The PostgreSQL backends' part of it. */
  dbCpuUsPerRequest: number
}

interface ScenarioResult {
  db: Db | 'raw'
  scenario: string
  title: string
  rounds: Round[]
  rps: number
  p50: number
  p99: number
  rss: number
  cpuUsPerRequest: number
  dbCpuUsPerRequest: number
  /** req/s over the baseline's req/s (the issue's measure). */
  ratio?: number
  /** The baseline's CPU per request over this one's: the share of raw node:http's per-core capacity. */
  cpuRatio?: number
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

async function measure(
  options: Options,
  taskset: boolean,
  target: { db: Db | 'raw'; url: string; pid: number | undefined; beforeEach?: () => Promise<number[]> },
  scenario: Scenario,
  headers: Record<string, string>,
): Promise<ScenarioResult> {
  const spec: LoadSpec = {
    url: target.url,
    method: scenario.method,
    path: scenario.path,
    headers,
    body: scenario.body,
    ...(scenario.ids ? { ids: scenario.ids } : {}),
    connections: options.connections,
    warmupSeconds: options.warmup,
    rounds: options.rounds,
    seconds: options.seconds,
  }
  const rounds = await load(spec, taskset, target.pid, target.beforeEach ?? (async () => []))
  for (const result of rounds) {
    if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
      throw new Error(
        `${target.db} ${scenario.name}: ${result.non2xx} non-2xx (${JSON.stringify(result.statuses)}), ${result.errors} errors, ${result.timeouts} timeouts`,
      )
    }
  }
  const summary: ScenarioResult = {
    db: target.db,
    scenario: scenario.name,
    title: scenario.title,
    rounds,
    rps: median(rounds.map((r) => r.rps)),
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    rss: Math.max(...rounds.map((r) => r.rss)),
    cpuUsPerRequest: median(rounds.map((r) => r.cpuUsPerRequest)),
    dbCpuUsPerRequest: median(rounds.map((r) => r.dbCpuUsPerRequest)),
  }
  log(
    `  ${target.db.padEnd(8)} ${scenario.name.padEnd(10)} ${Math.round(summary.rps).toString().padStart(6)} req/s  p50 ${summary.p50.toFixed(2)} ms  p99 ${summary.p99.toFixed(2)} ms  rss ${(summary.rss / 2 ** 20).toFixed(0)} MB  cpu ${summary.cpuUsPerRequest.toFixed(0)} µs/req${target.db === 'postgres' ? ` (db ${summary.dbCpuUsPerRequest.toFixed(0)})` : ''}`,
  )
  return summary
}

interface DbRun {
  results: ScenarioResult[]
  seedSeconds: number
  explained: ExplainedFilter[]
  page?: Buffer
}

async function runDb(db: Db, options: Options, taskset: boolean, cleanups: Array<() => Promise<void>>): Promise<DbRun> {
  const secret = randomBytes(32).toString('hex')
  let databaseUrl: string
  let seed: SeedResult
  let explainTarget: Parameters<typeof explainFilters>[0]
  let backends: (() => Promise<number[]>) | undefined
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
    const name = `bench_${Date.now()}_${randomBytes(3).toString('hex')}`
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
  const explained = await explainFilters(explainTarget, seed.big.accountId, seed.deepId)
  log(formatExplained(db === 'sqlite' ? 'SQLite' : 'PostgreSQL', explained))

  const port = await freePort()
  const profileDir = path.join(RESULTS, 'profiles', db)
  const nodeArgs = [...(options.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), 'dist/main.js', 'serve']
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    SECRET: secret,
    PORT: String(port),
    HOST: '127.0.0.1',
    RATE_LIMIT_PER_SECOND: '0',
    NODE_ENV: 'production',
  }
  const server = spawnNode(nodeArgs, SERVER_CORE, taskset, env)
  let serverErr = ''
  server.stderr?.on('data', (chunk) => {
    serverErr = (serverErr + chunk).slice(-4000)
  })
  const stop = () => stopProcess(server)
  cleanups.push(stop)
  const base = `http://127.0.0.1:${port}`
  await waitForHttp(`${base}/healthz`, server, () => serverErr)
  const headers = { authorization: `Bearer ${seed.big.key}` }

  const all = scenariosFor(seed, secret)
  const chosen = all.filter((s) => !options.scenarios || options.scenarios.includes(s.name))
  let page: Buffer | undefined
  for (const scenario of all) {
    // Every scenario is checked once, even when not measured, so the quick run proves them all.
    if (scenario.body !== 'none') {
      continue
    }
    const res = await fetch(`${base}${scenario.path}`, { headers })
    const body = await res.text()
    const problem = res.status === 200 ? scenario.check?.(body) : `status ${res.status}: ${body.slice(0, 300)}`
    if (problem) {
      throw new Error(`${db} ${scenario.name}: ${problem}`)
    }
    if (scenario.name === 'list') {
      page = Buffer.from(body)
    }
  }

  const results: ScenarioResult[] = []
  for (const scenario of chosen) {
    results.push(
      await measure(
        options,
        taskset,
        { db, url: base, pid: server.pid, ...(backends ? { beforeEach: backends } : {}) },
        scenario,
        headers,
      ),
    )
  }
  await stop()
  return { results, seedSeconds: seed.seconds, explained, ...(page ? { page } : {}) }
}

async function runBaseline(options: Options, taskset: boolean, page: Buffer, cleanups: Array<() => Promise<void>>) {
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(RESULTS, 'page.json')
  writeFileSync(file, page)
  const port = await freePort()
  const server = spawnNode(['bench/raw-server.mjs', file, String(port)], SERVER_CORE, taskset, process.env)
  cleanups.push(() => stopProcess(server))
  let serverErr = ''
  server.stderr?.on('data', (chunk) => {
    serverErr = (serverErr + chunk).slice(-4000)
  })
  await waitForHttp(`http://127.0.0.1:${port}/`, server, () => serverErr)
  const scenario: Scenario = {
    name: 'baseline',
    title: `raw node:http, same ${(page.length / 1024).toFixed(1)} KB page`,
    method: 'GET',
    path: '/',
    body: 'none',
  }
  const result = await measure(
    options,
    taskset,
    { db: 'raw', url: `http://127.0.0.1:${port}`, pid: server.pid },
    scenario,
    {},
  )
  await stopProcess(server)
  return result
}

interface Target {
  name: string
  met: boolean | undefined
  detail: string
}

function evaluate(results: ScenarioResult[]): Target[] {
  const find = (db: Db, scenario: string) => results.find((r) => r.db === db && r.scenario === scenario)
  const targets: Target[] = []
  const ratio = (name: string, db: Db, scenario: string, min: number) => {
    const r = find(db, scenario)
    targets.push({
      name,
      met: r?.ratio === undefined ? undefined : r.ratio >= min,
      detail: r?.ratio === undefined ? 'not measured' : `${(r.ratio * 100).toFixed(1)}% (≥ ${min * 100}%)`,
    })
  }
  ratio('GET /me, SQLite ≥ 60% of raw', 'sqlite', 'me', 0.6)
  ratio('GET /me, PostgreSQL ≥ 60% of raw', 'postgres', 'me', 0.6)
  ratio('list page of 50, SQLite ≥ 30%', 'sqlite', 'list', 0.3)
  ratio('list page of 50, PostgreSQL ≥ 20%', 'postgres', 'list', 0.2)
  for (const db of ['sqlite', 'postgres'] as const) {
    const first = find(db, 'list')
    const deep = find(db, 'list-deep')
    targets.push({
      name: `p50 at depth ≤ 1.2 × p50 of page 1, ${db === 'sqlite' ? 'SQLite' : 'PostgreSQL'}`,
      met: first && deep ? deep.p50 <= 1.2 * first.p50 : undefined,
      detail:
        first && deep
          ? `${deep.p50.toFixed(2)} ms vs ${first.p50.toFixed(2)} ms (×${(deep.p50 / first.p50).toFixed(2)})`
          : 'not measured',
    })
  }
  ratio('POST /contacts, SQLite ≥ 20%', 'sqlite', 'create', 0.2)
  const servers = results.filter((r) => r.db !== 'raw')
  const peak = Math.max(0, ...servers.map((r) => r.rss))
  targets.push({
    name: 'RSS under load ≤ 150 MB',
    met: servers.length > 0 && peak > 0 ? peak <= 150 * 2 ** 20 : undefined,
    detail: peak > 0 ? `peak ${(peak / 2 ** 20).toFixed(0)} MB` : 'not measured',
  })
  return targets
}

function table(results: ScenarioResult[]): string {
  const rows = [
    ['database', 'scenario', 'req/s', 'p50 ms', 'p99 ms', 'RSS MB', 'CPU µs/req', 'vs raw', 'vs raw, CPU'],
    ...results.map((r) => [
      r.db === 'raw' ? '—' : r.db === 'sqlite' ? 'SQLite' : 'PostgreSQL',
      r.title,
      Math.round(r.rps).toLocaleString('en-US'),
      r.p50.toFixed(2),
      r.p99.toFixed(2),
      (r.rss / 2 ** 20).toFixed(0),
      r.db === 'postgres'
        ? `${r.cpuUsPerRequest.toFixed(0)} (${r.dbCpuUsPerRequest.toFixed(0)} db)`
        : r.cpuUsPerRequest.toFixed(0),
      r.ratio === undefined ? '' : `${(r.ratio * 100).toFixed(1)}%`,
      r.cpuRatio === undefined ? '' : `${(r.cpuRatio * 100).toFixed(1)}%`,
    ]),
  ]
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length))) ?? []
  const line = (row: string[]) =>
    `| ${row.map((cell, i) => (i >= 2 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join(' | ')} |`
  return [
    line(rows[0] ?? []),
    `|${widths.map((w, i) => (i >= 2 ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`,
    ...rows.slice(1).map(line),
  ].join('\n')
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2))
  if (!existsSync(path.join(ROOT, 'dist', 'main.js'))) {
    throw new Error('dist/main.js is missing: run `npm run build` first (npm run bench does)')
  }
  const taskset = hasTaskset()
  const loadBefore = os.loadavg()
  const machine = {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.type()} ${os.release()}`,
    taskset,
    loadAverageBefore: loadBefore,
  }
  log(
    `machine: ${machine.cores} × ${machine.cpu}, ${machine.memoryGiB} GiB, node ${machine.node}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  )
  log(
    taskset
      ? `pinning: server on core ${SERVER_CORE}${options.pinPostgres ? ' (with its PostgreSQL backends)' : ''}, load generator on core ${LOAD_CORE}`
      : 'taskset not available (or one core): processes are not pinned',
  )
  if (!options.quick && (loadBefore[0] ?? 0) > 1) {
    log('warning: the 1-minute load average is above 1.0; other work on this machine will lower the numbers')
  }
  log(
    `plan: ${options.plan.bigContacts.toLocaleString('en-US')} contacts in one account + ${options.plan.smallAccounts} accounts × ${options.plan.contactsPerSmallAccount}; ${options.connections} connections, warm-up ${options.warmup} s, ${options.rounds} × ${options.seconds} s per scenario`,
  )

  const cleanups: Array<() => Promise<void>> = []
  let interrupted = false
  const onSignal = () => {
    interrupted = true
    log('interrupted: cleaning up')
    void runCleanups(cleanups).finally(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)

  const started = Date.now()
  const results: ScenarioResult[] = []
  const webhooks: WebhookResult[] = []
  const seedSeconds: Partial<Record<Db, number>> = {}
  const explain: Partial<Record<Db, ExplainedFilter[]>> = {}
  let page: Buffer | undefined
  const contactScenarios = !options.scenarios || options.scenarios.some((name) => name !== 'webhooks')
  const webhookScenario = !options.scenarios || options.scenarios.includes('webhooks')
  try {
    if (contactScenarios) {
      for (const db of options.dbs) {
        const run = await runDb(db, options, taskset, cleanups)
        results.push(...run.results)
        seedSeconds[db] = run.seedSeconds
        explain[db] = run.explained
        page ??= run.page
      }
      if (!page) {
        throw new Error('no list page was captured for the baseline')
      }
      const baseline = await runBaseline(options, taskset, page, cleanups)
      for (const result of results) {
        result.ratio = result.rps / baseline.rps
        result.cpuRatio = baseline.cpuUsPerRequest / result.cpuUsPerRequest
      }
      results.unshift(baseline)
    }
    if (webhookScenario) {
      const kit = benchKit(options, taskset)
      for (const db of options.dbs) {
        webhooks.push(await runWebhooks(db, WEBHOOK_PLANS[options.quick ? 'quick' : 'full'], kit, cleanups))
        await runCleanups(cleanups)
      }
    }
  } finally {
    if (!interrupted) {
      await runCleanups(cleanups)
    }
  }

  const targets = [...(contactScenarios ? evaluate(results) : []), ...evaluateWebhooks(webhooks)]
  const loadAfter = os.loadavg()
  const report = {
    startedAt: new Date(started).toISOString(),
    minutes: (Date.now() - started) / 60_000,
    machine: { ...machine, loadAverageAfter: loadAfter },
    options: { ...options, pgAdminUrl: undefined },
    seedSeconds,
    results,
    webhooks,
    targets,
    explain,
  }
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(
    RESULTS,
    `bench-${options.quick ? 'quick-' : ''}${report.startedAt.replace(/[:.]/g, '-')}.json`,
  )
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)

  if (results.length > 0) {
    console.log(`\n${table(results)}\n`)
  }
  if (webhooks.length > 0) {
    console.log(`\n${webhookTable(webhooks)}\n`)
  }
  const baseline = results.find((r) => r.db === 'raw')
  if (baseline) {
    const busy = (baseline.rps * baseline.cpuUsPerRequest) / 1e6
    console.log(
      `vs raw: req/s over the baseline's req/s. vs raw, CPU: the baseline's CPU per request over the scenario's (all service processes), i.e. the share of raw node:http's capacity per core. The raw server used ${(busy * 100).toFixed(0)}% of its core${busy < 0.9 ? ': the load generator, not the server, limited the baseline, so "vs raw" flatters every row' : ''}.\n`,
    )
  }
  for (const target of targets) {
    console.log(`${target.met === undefined ? '  ·' : target.met ? ' ok' : 'MISS'}  ${target.name}: ${target.detail}`)
  }
  console.log(
    `\n${options.quick ? 'quick run (numbers are indicative only)' : 'full run'}; load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadAfter.map((l) => l.toFixed(2)).join(' ')}; ${report.minutes.toFixed(1)} min`,
  )
  console.log(`results: ${path.relative(ROOT, file)}`)
  return 0
}

/** The webhook benches' helpers: the same process handling, pinning and load generator as the rest. */
function benchKit(options: Options, taskset: boolean): BenchKit {
  return {
    taskset,
    serverCore: SERVER_CORE,
    loadCore: LOAD_CORE,
    results: RESULTS,
    pgAdminUrl: options.pgAdminUrl,
    pinPostgres: options.pinPostgres,
    cpuProf: options.cpuProf,
    log,
    freePort,
    spawnNode: (args, core, pin, env) => spawnNode(args, core, pin, env),
    waitForHttp,
    stopProcess,
    cpuMsOf,
    load,
    measureCreate: async (db, url, pid, backends, headers) => {
      const create = scenariosFor(
        { big: { accountId: '', key: '' }, smallKeys: [], deepId: '', patchIds: [], seconds: 0 },
        '',
      ).find((s) => s.name === 'create') as Scenario
      return measure(options, taskset, { db, url, pid, ...(backends ? { beforeEach: backends } : {}) }, create, headers)
    },
  }
}

function evaluateWebhooks(runs: WebhookResult[]): Target[] {
  const targets: Target[] = []
  for (const run of runs) {
    const name = run.db === 'sqlite' ? 'SQLite' : 'PostgreSQL'
    targets.push({
      name: `webhook lag at ${run.lag.rate} writes/s × ${run.lag.endpoints} endpoints p50 ≤ 100 ms, p99 ≤ 1 s, ${name}`,
      met: run.lag.p50 <= 100 && run.lag.p99 <= 1000,
      detail: `p50 ${run.lag.p50} ms, p99 ${run.lag.p99} ms, max ${run.lag.max} ms`,
    })
    targets.push({
      name: `webhook deliveries ≥ 2,000/s on one core, ${name}`,
      met: run.throughput.perSecond >= 2000,
      detail: `${Math.round(run.throughput.perSecond).toLocaleString('en-US')}/s (${run.throughput.deliveries.toLocaleString('en-US')} to ${run.throughput.endpoints} endpoints; ${run.throughput.cpuUsPerDelivery.toFixed(0)} µs CPU each)`,
    })
    targets.push({
      name: `POST /contacts with ${run.writes.endpoints} endpoints within 10 % of none, ${name}`,
      met: run.writes.ratio >= 0.9,
      detail: `${(run.writes.ratio * 100).toFixed(1)} % (${run.writes.none.map((r) => Math.round(r.rps)).join(' / ')} req/s without, ${Math.round(run.writes.with.rps)} with)`,
    })
  }
  return targets
}

function webhookTable(runs: WebhookResult[]): string {
  const lines = [
    '| database | deliveries/s (backlog) | CPU µs/delivery | lag p50 ms | lag p99 ms | lag max ms | POST req/s: none / 10 endpoints / none |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ]
  for (const run of runs) {
    lines.push(
      `| ${run.db === 'sqlite' ? 'SQLite' : 'PostgreSQL'} | ${Math.round(run.throughput.perSecond).toLocaleString('en-US')} | ${run.throughput.cpuUsPerDelivery.toFixed(0)}${run.db === 'postgres' ? ` (${run.throughput.dbCpuUsPerDelivery.toFixed(0)} db)` : ''} | ${run.lag.p50} | ${run.lag.p99} | ${run.lag.max} | ${Math.round(run.writes.none[0]?.rps ?? 0)} / ${Math.round(run.writes.with.rps)} / ${Math.round(run.writes.none[1]?.rps ?? 0)} (${(run.writes.ratio * 100).toFixed(1)} %) |`,
    )
  }
  return lines.join('\n')
}

async function runCleanups(cleanups: Array<() => Promise<void>>): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    await cleanup().catch((error: unknown) => log(`cleanup failed: ${String(error)}`))
  }
  cleanups.length = 0
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    log(`bench failed: ${error instanceof Error ? error.message : String(error)}`)
    process.exitCode = 1
  },
)
