// `npm run bench` (full) and `npm run bench:quick`: seed, serve, load, compare with raw node:http.
//
// The server under test (dist/main.js serve) runs in its own process pinned to core 0, and the load
// generator (bench/load.ts: wrk, one thread) in another pinned to core 1, when `taskset` exists. With
// PostgreSQL, its backends serving the bench database are pinned to core 0 with the server, so the
// service as a whole gets one core, as SQLite (in-process) does and as the baseline does.
// Each scenario (bench/scenarios.ts: one declarative entry each) is checked once, measured, and
// then compared with raw node:http (bench/raw-server.mjs) answering with that scenario's own
// response (status, headers, body) under the same load, right after: the headline is the CPU time
// per request of raw over ours, req/s beside it. The raw run counts only if its server kept ≥ 95 %
// of its core busy (else the load generator, or other work on the machine, was the limit): below
// that the row says INVALID, and the load generator's own CPU share tells which.
// Then `serve --api-only` with WEBHOOK_WORKER=off runs each scenario once more, for its RSS.
// Webhook delivery (bench/webhooks.ts: throughput, lag, writes with endpoints) runs as the scenario
// `webhooks`, on a small database of its own, after the contact scenarios.
// Options: --quick, --db=sqlite,postgres, --scenario=me,list,...,webhooks, --contacts=N (the big account;
// the deep page is at 90%), --rounds=N, --seconds=N, --warmup=N, --connections=N, --engine=wrk|autocannon,
// --node-flags="--flag ..." (the server's node flags, e.g. V8 heap settings to try), --no-api-only,
// --cpu-prof (profiles under bench/results/profiles/), --keep (keep the SQLite file), --pg-free
// (leave PostgreSQL backends unpinned), --root=DIR (measure the build in DIR, e.g. a copy of an older
// commit with `npm run build` done there: its dist/main.js serves, on data seeded by its own
// bench/seed.ts, and everything else is this harness; alternate runs with and without it for an A/B).
// BENCH_DATABASE_URL (else TEST_DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/postgres) is where the throwaway database is created and dropped.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import pg from 'pg'
import { type ExplainedFilter, explainFilters, formatExplained } from './explain.js'
import { hasWrk, type LoadResult, type LoadSpec } from './load.js'
import { SCENARIOS, type Scenario, type ScenarioContext } from './scenarios.js'
import type { SeedPlan, SeedResult } from './seed.js'
import { render } from './template.js'
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
  engine: 'wrk' | 'autocannon'
  nodeFlags: string[]
  apiOnly: boolean
  /** The checkout whose build is measured (dist/main.js) and whose seed (bench/seed.ts) shapes its data. */
  root: string
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
    'engine',
    'node-flags',
    'no-api-only',
    'root',
  ]
  for (const flag of flags.keys()) {
    if (!known.includes(flag)) {
      throw new Error(`unknown option --${flag} (known: ${known.map((k) => `--${k}`).join(' ')})`)
    }
  }
  const quick = flags.has('quick')
  const engine = flags.get('engine') ?? 'wrk'
  if (engine !== 'wrk' && engine !== 'autocannon') {
    throw new Error('--engine takes wrk or autocannon')
  }
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
    engine,
    nodeFlags: (flags.get('node-flags') ?? '').split(' ').filter((flag) => flag !== ''),
    apiOnly: !flags.has('no-api-only'),
    root: path.resolve(flags.get('root') ?? ROOT),
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
  cwd = ROOT,
): ChildProcess {
  const [command, commandArgs] = taskset
    ? ['taskset', ['-c', String(core), process.execPath, ...args]]
    : [process.execPath, args]
  return spawn(command, commandArgs, { cwd, env, stdio: pipes ? 'pipe' : ['ignore', 'ignore', 'pipe'] })
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

/** One measured round: the load generator's result plus what the bench read from /proc meanwhile. */
interface Round extends LoadResult {
  rss: number
  /** CPU time the service (server process, plus its PostgreSQL backends) spent per good answer. */
  cpuUsPerRequest: number
  /** The PostgreSQL backends' part of it. */
  dbCpuUsPerRequest: number
  /** The service's CPU time over the round's time: 1 is one core kept busy. */
  busy: number
}

/**
 * Runs one scenario's load generator in its own process: warm-up, then `beforeRounds` (pinning),
 * then the rounds, sampling the server's RSS meanwhile (the peak of each round is kept) and reading
 * the service's CPU time at the start and the end of each round.
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
      const message = JSON.parse(line) as LoadResult | { warm: true } | { start: number }
      if ('warm' in message) {
        backendPids = await beforeRounds()
        child.stdin?.write('go\n')
      } else if ('start' in message) {
        rss = rssOf(serverPid)
        cpuBefore = cpuMsOf(serverPids)
        dbCpuBefore = cpuMsOf(backendPids)
      } else {
        const serverMs = cpuMsOf(serverPids) - cpuBefore
        const dbMs = cpuMsOf(backendPids) - dbCpuBefore
        const perRequest = (ms: number) => (message.ok > 0 ? (ms * 1000) / message.ok : Number.NaN)
        rounds.push({
          ...message,
          rss: Math.max(rss, rssOf(serverPid)),
          cpuUsPerRequest: perRequest(serverMs + dbMs),
          dbCpuUsPerRequest: perRequest(dbMs),
          // Over the load generator's own measured time: the server is idle before and after it.
          busy: (serverMs + dbMs) / (message.seconds * 1000),
        })
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

/** The medians of a scenario's rounds against one server (ours or the raw baseline). */
interface Measured {
  rounds: Round[]
  engine: LoadResult['engine']
  rps: number
  p50: number
  p99: number
  /** The peak over the rounds. */
  rss: number
  cpuUsPerRequest: number
  dbCpuUsPerRequest: number
  busy: number
  /** The load generator's CPU over the measured time (wrk only). */
  generatorBusy: number
  /** The machine's 1-minute load average before and after. */
  loadAverage: [number, number]
}

interface ScenarioResult extends Measured {
  db: Db
  mode: Mode
  scenario: string
  title: string
  /** The answer both servers give: its status and body size (bytes). */
  status: number
  bytes: number
  /** Raw node:http answering with this scenario's captured response, measured right after. */
  raw?: Measured & { valid: boolean }
  /** The raw server's CPU per request over ours: our share of raw node:http's capacity per core (the headline). */
  cpuRatio?: number
  /** Our req/s over the raw server's. */
  rpsRatio?: number
}

/** The raw baseline counts only when its server was the limit: ≥ 95 % of its core. */
const RAW_MIN_BUSY = 0.95

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

interface Request {
  method: LoadSpec['method']
  path: string
  body?: string
  ids?: string[]
  headers: Record<string, string>
}

async function measure(
  options: Options,
  taskset: boolean,
  target: { url: string; pid: number | undefined; beforeEach?: () => Promise<number[]> },
  request: Request,
  label: string,
  rounds = options.rounds,
  warmup = options.warmup,
): Promise<Measured> {
  const spec: LoadSpec = {
    url: target.url,
    method: request.method,
    path: request.path,
    headers: request.headers,
    ...(request.body === undefined ? {} : { body: request.body }),
    ...(request.ids ? { ids: request.ids } : {}),
    connections: options.connections,
    warmupSeconds: warmup,
    rounds,
    seconds: options.seconds,
    engine: options.engine,
  }
  const loadBefore = os.loadavg()[0] ?? 0
  const results = await load(spec, taskset, target.pid, target.beforeEach ?? (async () => []))
  for (const result of results) {
    if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
      throw new Error(
        `${label}: ${result.non2xx} error statuses (${JSON.stringify(result.statuses)}), ${result.errors} errors, ${result.timeouts} timeouts`,
      )
    }
  }
  const summary: Measured = {
    rounds: results,
    engine: results[0]?.engine ?? 'wrk',
    rps: median(results.map((r) => r.rps)),
    p50: median(results.map((r) => r.p50)),
    p99: median(results.map((r) => r.p99)),
    rss: Math.max(...results.map((r) => r.rss)),
    cpuUsPerRequest: median(results.map((r) => r.cpuUsPerRequest)),
    dbCpuUsPerRequest: median(results.map((r) => r.dbCpuUsPerRequest)),
    busy: median(results.map((r) => r.busy)),
    generatorBusy: median(results.map((r) => r.generatorBusy)),
    loadAverage: [loadBefore, os.loadavg()[0] ?? 0],
  }
  log(
    `  ${label.padEnd(28)} ${Math.round(summary.rps).toString().padStart(6)} req/s  p50 ${summary.p50.toFixed(2)} ms  p99 ${summary.p99.toFixed(2)} ms  rss ${(summary.rss / 2 ** 20).toFixed(0)} MiB  cpu ${summary.cpuUsPerRequest.toFixed(0)} µs/req${summary.dbCpuUsPerRequest > 0 ? ` (db ${summary.dbCpuUsPerRequest.toFixed(0)})` : ''}  core ${(summary.busy * 100).toFixed(0)} %, ${summary.engine} ${(summary.generatorBusy * 100).toFixed(0)} %`,
  )
  return summary
}

/** One answer of the server, as the raw baseline will repeat it. */
interface Captured {
  status: number
  headers: Array<[string, string]>
  body: Buffer
}

/** Headers node:http writes itself (or that describe the connection, not the answer). */
const OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length'])

/** Sends one request of the scenario (n = 0) and checks its status and body; returns the answer. */
async function probe(base: string, scenario: Scenario, request: Request): Promise<Captured> {
  const first = render(request.path, request.body, request.ids ?? [], `probe${randomBytes(3).toString('hex')}`, 0)
  const res = await fetch(`${base}${first.path}`, {
    method: request.method,
    headers: { ...request.headers, ...(first.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(first.body === undefined ? {} : { body: first.body }),
  })
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== scenario.status) {
    throw new Error(
      `${scenario.name}: status ${res.status}, expected ${scenario.status}: ${body.toString().slice(0, 300)}`,
    )
  }
  return { status: res.status, headers: [...res.headers].filter(([name]) => !OWN_HEADERS.has(name)), body }
}

/** Raw node:http (bench/raw-server.mjs) answering every request with `answer`, measured with the same load. */
async function measureRaw(
  options: Options,
  taskset: boolean,
  answer: Captured,
  request: Request,
  label: string,
  cleanups: Array<() => Promise<void>>,
): Promise<Measured & { valid: boolean }> {
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(RESULTS, `raw-answer-${process.pid}.json`)
  writeFileSync(
    file,
    JSON.stringify({
      status: answer.status,
      headers: answer.headers,
      body: answer.body.toString('base64'),
      readBody: request.body !== undefined,
    }),
  )
  const port = await freePort()
  const server = spawnNode(['bench/raw-server.mjs', file, String(port)], SERVER_CORE, taskset, process.env)
  const stop = () => stopProcess(server)
  cleanups.push(stop)
  let serverErr = ''
  server.stderr?.on('data', (chunk) => {
    serverErr = (serverErr + chunk).slice(-4000)
  })
  try {
    await waitForHttp(`http://127.0.0.1:${port}/`, server, () => serverErr)
    // The same path, headers and bodies as ours: the same bytes on the wire both ways.
    const result = await measure(options, taskset, { url: `http://127.0.0.1:${port}`, pid: server.pid }, request, label)
    return { ...result, valid: result.busy >= RAW_MIN_BUSY }
  } finally {
    await stop()
    rmSync(file, { force: true })
  }
}

type Mode = 'serve' | 'api-only'

/**
 * The measured build's seed: its own bench/seed.ts (imported from its checkout, so its rows go
 * through its own migrations and row builders), which its server then finds fully migrated.
 */
async function seedOf(root: string): Promise<typeof import('./seed.js')> {
  return root === ROOT ? import('./seed.js') : import(pathToFileURL(path.join(root, 'bench', 'seed.ts')).href)
}

interface DbRun {
  results: ScenarioResult[]
  seedSeconds: number
  explained: ExplainedFilter[]
}

async function runDb(db: Db, options: Options, taskset: boolean, cleanups: Array<() => Promise<void>>): Promise<DbRun> {
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
    const port = await freePort()
    const profileDir = path.join(RESULTS, 'profiles', mode === 'serve' ? db : `${db}-api-only`)
    const nodeArgs = [
      ...options.nodeFlags,
      ...(options.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
      'dist/main.js',
      'serve',
      ...(mode === 'api-only' ? ['--api-only'] : []),
    ]
    const env = {
      ...process.env,
      DATABASE_URL: databaseUrl,
      SECRET: secret,
      PORT: String(port),
      HOST: '127.0.0.1',
      RATE_LIMIT_PER_SECOND: '0',
      // The full run seeds 1,000,000 contacts, the default quota: POST /contacts would be 403.
      MAX_CONTACTS_PER_ACCOUNT: '1000000000',
      NODE_ENV: 'production',
      ...(mode === 'api-only' ? { WEBHOOK_WORKER: 'off' } : {}),
    }
    const server = spawnNode(nodeArgs, SERVER_CORE, taskset, env, false, options.root)
    let serverErr = ''
    server.stderr?.on('data', (chunk) => {
      serverErr = (serverErr + chunk).slice(-4000)
    })
    const stop = () => stopProcess(server)
    cleanups.push(stop)
    const base = `http://127.0.0.1:${port}`
    await waitForHttp(`${base}/healthz`, server, () => serverErr)
    return { server, base, stop }
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
      path: typeof scenario.path === 'function' ? scenario.path(ctx) : scenario.path,
      ...(scenario.body === undefined ? {} : { body: scenario.body }),
      ...(scenario.ids ? { ids: scenario.ids(ctx) } : {}),
      headers: { ...ctx.headers, ...(await scenario.headers?.(ctx)) },
    }
    requests.set(scenario.name, request)
    // Every scenario is checked once, even when not measured, so the quick run proves them all.
    const answer = await probe(base, scenario, request)
    const problem = scenario.check?.(answer.body.toString(), ctx)
    if (problem) {
      throw new Error(`${db} ${scenario.name}: ${problem}`)
    }
    if (!chosen.includes(scenario)) {
      continue
    }
    const ours = await measure(
      options,
      taskset,
      { url: base, pid: server.pid, ...(backends ? { beforeEach: backends } : {}) },
      request,
      `${db} ${scenario.name}`,
    )
    // Raw node:http with this scenario's own answer, right after ours (same minute, same load).
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
    })
  }
  await stop()

  if (options.apiOnly) {
    // RSS of the lean process under the same loads: one round each, no baseline.
    const lean = await startMode('api-only')
    for (const scenario of chosen) {
      const request = requests.get(scenario.name) as Request
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

interface Target {
  name: string
  met: boolean | undefined
  detail: string
}

const dbName = (db: Db) => (db === 'sqlite' ? 'SQLite' : 'PostgreSQL')
const pct = (ratio: number) => `${(ratio * 100).toFixed(1)} %`
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`

/** What held a raw run back: the load generator at its limit (or unmeasured), or other work on the machine. */
const limitOf = (raw: Measured): string =>
  !Number.isFinite(raw.generatorBusy) || raw.generatorBusy >= 0.9
    ? 'the load generator was the limit'
    : 'other work on the machine was the limit'

function whyInvalid(raw: Measured): string {
  const generator = Number.isFinite(raw.generatorBusy) ? `, ${raw.engine} at ${pct(raw.generatorBusy)}` : ''
  return `raw at ${pct(raw.busy)} of its core${generator}: ${limitOf(raw)}`
}

/** The invalid raw runs in one line per cause, with the ranges of both busy figures. */
function invalidSummary(raws: Measured[]): string {
  const range = (values: number[]) => {
    const finite = values.filter(Number.isFinite)
    return finite.length === 0 ? 'n/a' : `${pct(Math.min(...finite))}–${pct(Math.max(...finite))}`
  }
  return [...new Set(raws.map(limitOf))]
    .map((cause) => {
      const mine = raws.filter((raw) => limitOf(raw) === cause)
      return `${mine.length}: ${cause} (raw ${range(mine.map((r) => r.busy))} of its core, load generator ${range(mine.map((r) => r.generatorBusy))})`
    })
    .join('; ')
}

function evaluate(results: ScenarioResult[]): Target[] {
  const find = (db: Db, scenario: string) =>
    results.find((r) => r.db === db && r.mode === 'serve' && r.scenario === scenario)
  const targets: Target[] = []
  // Against raw serving the scenario's own bytes, by CPU per request (req/s beside it); a raw run
  // that did not saturate its core decides nothing.
  const ratio = (name: string, db: Db, scenario: string, min: number) => {
    const r = find(db, scenario)
    const label = `${name}, ${dbName(db)} ≥ ${min * 100} % of raw`
    if (r?.cpuRatio === undefined || r.raw === undefined || r.rpsRatio === undefined) {
      targets.push({ name: label, met: undefined, detail: 'not measured' })
      return
    }
    const detail = `CPU ${pct(r.cpuRatio)}, req/s ${pct(r.rpsRatio)}`
    targets.push(
      r.raw.valid
        ? { name: label, met: r.cpuRatio >= min, detail }
        : { name: label, met: undefined, detail: `INVALID: ${whyInvalid(r.raw)} (${detail})` },
    )
  }
  ratio('GET /me', 'sqlite', 'me', 0.6)
  ratio('GET /me', 'postgres', 'me', 0.6)
  ratio('list page of 50', 'sqlite', 'list', 0.3)
  ratio('list page of 50', 'postgres', 'list', 0.2)
  for (const db of ['sqlite', 'postgres'] as const) {
    const first = find(db, 'list')
    const deep = find(db, 'list-deep')
    // By CPU per request, the figure other work on the machine disturbs least; p50 beside it.
    targets.push({
      name: `list page at 90 % depth ≤ 1.2 × page 1 (CPU per request), ${dbName(db)}`,
      met: first && deep ? deep.cpuUsPerRequest <= 1.2 * first.cpuUsPerRequest : undefined,
      detail:
        first && deep
          ? `${deep.cpuUsPerRequest.toFixed(0)} µs vs ${first.cpuUsPerRequest.toFixed(0)} µs (×${(deep.cpuUsPerRequest / first.cpuUsPerRequest).toFixed(2)}); p50 ×${(deep.p50 / first.p50).toFixed(2)}`
          : 'not measured',
    })
  }
  ratio('POST /contacts', 'sqlite', 'create', 0.2)
  ratio('polling client, list page 304', 'sqlite', 'list-304', 0.5)
  ratio('polling client, list page 304', 'postgres', 'list-304', 0.5)
  for (const [mode, limit] of [
    ['serve', 150],
    ['api-only', 100],
  ] as const) {
    const rows = results.filter((r) => r.mode === mode)
    const peak = Math.max(0, ...rows.map((r) => r.rss))
    const worst = rows.find((r) => r.rss === peak)
    targets.push({
      name: `RSS under load ≤ ${limit} MiB, ${mode === 'serve' ? '`serve`' : '`serve --api-only`, WEBHOOK_WORKER=off'}`,
      met: peak > 0 ? peak <= limit * 2 ** 20 : undefined,
      detail: worst ? `peak ${mib(peak)} (${dbName(worst.db)}, ${worst.scenario})` : 'not measured',
    })
  }
  return targets
}

/** The headline table: every scenario against raw node:http serving its own answer. */
function table(results: ScenarioResult[]): string {
  const rows = [
    [
      'database',
      'scenario',
      'answer',
      'vs raw, CPU',
      'vs raw, req/s',
      'CPU µs/req',
      'raw CPU µs/req',
      'req/s',
      'raw req/s',
      'p50 ms',
      'p99 ms',
      'raw p50 ms',
      'RSS MiB',
      'raw core busy',
      'wrk busy (raw run)',
    ],
    ...results
      .filter((r) => r.mode === 'serve')
      .map((r) => {
        const raw = r.raw
        const invalid = raw !== undefined && !raw.valid
        const ratio = (value: number | undefined) =>
          value === undefined ? '' : invalid ? `INVALID (${pct(value)})` : pct(value)
        return [
          dbName(r.db),
          r.title,
          `${r.status}, ${(r.bytes / 1024).toFixed(1)} KB`,
          ratio(r.cpuRatio),
          ratio(r.rpsRatio),
          r.db === 'postgres'
            ? `${r.cpuUsPerRequest.toFixed(0)} (${r.dbCpuUsPerRequest.toFixed(0)} db)`
            : r.cpuUsPerRequest.toFixed(0),
          raw ? raw.cpuUsPerRequest.toFixed(1) : '',
          Math.round(r.rps).toLocaleString('en-US'),
          raw ? Math.round(raw.rps).toLocaleString('en-US') : '',
          r.p50.toFixed(2),
          r.p99.toFixed(2),
          raw ? raw.p50.toFixed(2) : '',
          (r.rss / 2 ** 20).toFixed(0),
          raw ? `${pct(raw.busy)}${invalid ? ' INVALID' : ''}` : '',
          raw && Number.isFinite(raw.generatorBusy) ? pct(raw.generatorBusy) : '',
        ]
      }),
  ]
  return markdown(rows, 2)
}

/** Peak RSS of both kinds of process, per database, over all the scenarios measured. */
function rssTable(results: ScenarioResult[]): string {
  const rows = [['database', 'process', 'peak RSS MiB', 'under', 'CPU µs/req, list page 1']]
  for (const db of ['sqlite', 'postgres'] as const) {
    for (const mode of ['serve', 'api-only'] as const) {
      const mine = results.filter((r) => r.db === db && r.mode === mode)
      if (mine.length === 0) {
        continue
      }
      const peak = Math.max(...mine.map((r) => r.rss))
      rows.push([
        dbName(db),
        mode === 'serve' ? 'serve' : 'serve --api-only, WEBHOOK_WORKER=off',
        (peak / 2 ** 20).toFixed(0),
        mine.find((r) => r.rss === peak)?.scenario ?? '',
        mine.find((r) => r.scenario === 'list')?.cpuUsPerRequest.toFixed(0) ?? '',
      ])
    }
  }
  return markdown(rows, 2)
}

function markdown(rows: string[][], firstNumeric: number): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length))) ?? []
  const line = (row: string[]) =>
    `| ${row.map((cell, i) => (i >= firstNumeric ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join(' | ')} |`
  return [
    line(rows[0] ?? []),
    `|${widths.map((w, i) => (i >= firstNumeric ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`,
    ...rows.slice(1).map(line),
  ].join('\n')
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2))
  if (!existsSync(path.join(options.root, 'dist', 'main.js'))) {
    throw new Error(
      `${path.join(options.root, 'dist', 'main.js')} is missing: run \`npm run build\` there first (npm run bench does)`,
    )
  }
  if (options.root !== ROOT) {
    log(`measuring the build in ${options.root} (its dist/main.js, data from its bench/seed.ts)`)
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
    engine: options.engine === 'wrk' && hasWrk() ? 'wrk' : 'autocannon',
    loadAverageBefore: loadBefore,
  }
  log(
    `machine: ${machine.cores} × ${machine.cpu}, ${machine.memoryGiB} GiB, node ${machine.node}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  )
  if (machine.engine !== options.engine) {
    log(
      'warning: wrk is not installed (apt-get install wrk): autocannon cannot saturate raw node:http, expect INVALID rows',
    )
  }
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
  const contactScenarios = !options.scenarios || options.scenarios.some((name) => name !== 'webhooks')
  const webhookScenario = !options.scenarios || options.scenarios.includes('webhooks')
  try {
    if (contactScenarios) {
      for (const db of options.dbs) {
        const run = await runDb(db, options, taskset, cleanups)
        results.push(...run.results)
        seedSeconds[db] = run.seedSeconds
        explain[db] = run.explained
      }
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
    // Which ratios stand: a raw run below RAW_MIN_BUSY of its core was limited by the load generator.
    validity: {
      rawMinBusy: RAW_MIN_BUSY,
      invalid: results.filter((r) => r.raw && !r.raw.valid).map((r) => `${r.db} ${r.scenario}`),
    },
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
    console.log(`${rssTable(results)}\n`)
  }
  if (webhooks.length > 0) {
    console.log(`\n${webhookTable(webhooks)}\n`)
  }
  if (results.length > 0) {
    const raws = results.flatMap((r) => (r.raw ? [r.raw] : []))
    const invalid = raws.filter((raw) => !raw.valid).length
    console.log(
      `vs raw, CPU: raw node:http's CPU time per request, serving the scenario's own answer, over ours (the service's: server plus PostgreSQL backends): our share of raw's capacity per core. vs raw, req/s: ours over raw's, same load. Raw counts only when its server kept ≥ ${RAW_MIN_BUSY * 100} % of its core busy (else the load generator, or other work on the machine, was the limit); ${
        invalid === 0
          ? `every raw run did (${raws.map((raw) => pct(raw.busy)).join(', ')})`
          : `${invalid} of ${raws.length} did not, and those rows are INVALID: ${invalidSummary(raws.filter((raw) => !raw.valid))}`
      }. Load generator: ${machine.engine}.\n`,
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
      const create = SCENARIOS.find((s) => s.name === 'create') as Scenario
      const request = { method: create.method, path: create.path as string, body: create.body as string, headers }
      return measure(
        options,
        taskset,
        { url, pid, ...(backends ? { beforeEach: backends } : {}) },
        request,
        `${db} create`,
      )
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
