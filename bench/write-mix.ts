// over 400 lines: one benchmark whose wrk script, seed, server and report are read in order.
// `npm run bench:writes`: a mixed soak of writes and reads against `serve` on SQLite or PostgreSQL
// (method and options: bench/README.md#write-mix).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import pg from 'pg'
import { openDatabase } from '../src/db/database.js'
import { cliCommand, freePort } from '../test/processes.js'
import { captureStatements } from '../test/statement-capture.js'
import { describeMachine, type MachineReading, readMachine } from './machine-probe.js'
import { enableStatementStats, type PostgresRound, watchPostgresRound } from './pg-state.js'
import { canPin, cpuMsOf, log, parseFlags, pinTo, RESULTS, ROOT, sleep } from './processes.js'
import { type SeedPlan, seedPostgres, seedSqlite } from './seed.js'

type Db = 'sqlite' | 'postgres'

const SERVER_CORE = 0
const LOAD_CORE = 1
/** Seeded contacts of each account that the mix patches; the rest are deleted when no contact the run created is at hand. */
const PATCH_POOL = 2000

interface Options {
  dbs: Db[]
  seconds: number
  warmup: number
  connections: number
  contacts: number
  threads: number
  rounds: number
  pin: boolean
  pinPostgres: boolean
  keep: boolean
  /** Another checkout whose built server to measure (its dist/main.js), for before/after pairs. */
  serverRoot: string
  /** Only one kind of request instead of the mix (CPU per request of that kind). */
  only: RequestKind | undefined
  /** Profiles of the server under bench/results/profiles/write-mix-<db>/. */
  cpuProf: boolean
  /** PostgreSQL: commit without waiting for the WAL flush, to tell a commit-bound run (diagnosis only). */
  asyncCommit: boolean
  pgAdminUrl: string
}

const KINDS = ['create', 'me', 'list', 'patch', 'delete'] as const
type RequestKind = (typeof KINDS)[number]

function parseOptions(argv: string[]): Options {
  const flags = parseFlags(argv, [
    'db',
    'seconds',
    'warmup',
    'connections',
    'contacts',
    'threads',
    'rounds',
    'no-pin',
    'pg-free',
    'keep',
    'server-root',
    'only',
    'cpu-prof',
    'async-commit',
  ])
  const number = (name: string, fallback: number, max: number) => {
    const raw = flags.get(name)
    const value = raw === undefined ? fallback : Number(raw)
    if (!Number.isInteger(value) || value <= 0 || value > max) {
      throw new Error(`--${name} must be an integer from 1 to ${max}`)
    }
    return value
  }
  const dbs = (flags.get('db') ?? 'sqlite,postgres').split(',') as Db[]
  if (dbs.length === 0 || dbs.some((db) => db !== 'sqlite' && db !== 'postgres')) {
    throw new Error('--db takes sqlite, postgres or both')
  }
  return {
    dbs,
    seconds: number('seconds', 20, 600),
    warmup: number('warmup', 3, 60),
    connections: number('connections', 32, 1000),
    contacts: number('contacts', 20_000, 1_000_000),
    threads: number('threads', 1, 16),
    rounds: number('rounds', 1, 10),
    pin: !flags.has('no-pin'),
    pinPostgres: !flags.has('pg-free'),
    keep: flags.has('keep'),
    serverRoot: path.resolve(flags.get('server-root') ?? ROOT),
    only: onlyKind(flags.get('only')),
    cpuProf: flags.has('cpu-prof'),
    asyncCommit: flags.has('async-commit'),
    pgAdminUrl:
      process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  }
}

function onlyKind(raw: string | undefined): RequestKind | undefined {
  if (raw !== undefined && !(KINDS as readonly string[]).includes(raw)) {
    throw new Error(`--only takes one of ${KINDS.join(', ')}`)
  }
  return raw as RequestKind | undefined
}

/** CPU time (user + system) of processes in µs, from /proc; a process that ended counts 0. */
const cpuUsOf = (pids: number[]): number => cpuMsOf(pids) * 1000

/** The mix as a wrk script: one request kind after another, the account alternating. */
function wrkScript(spec: {
  keys: string[]
  patchIds: string[][]
  reserveIds: string[][]
  threads: number
  only: RequestKind | undefined
}): string {
  const luaList = (items: string[]) => `{${items.map((item) => JSON.stringify(item)).join(',')}}`
  return `
local keys = ${luaList(spec.keys)}
local patch_ids = {${spec.patchIds.map(luaList).join(',')}}
local reserve_ids = {${spec.reserveIds.map(luaList).join(',')}}
local threads_total = ${spec.threads}
local only = ${spec.only === undefined ? 'nil' : KINDS.indexOf(spec.only)}
local lists = {"/api/v1/contacts?limit=50&tag=vip", "/api/v1/contacts?limit=50&q=mar"}

local threads = {}
local next_thread = 1
function setup(thread)
  thread:set("tid", next_thread)
  next_thread = next_thread + 1
  table.insert(threads, thread)
end

-- Each run passes its own tag (unique emails) and where its set-aside contacts start (a delete
-- never targets one an earlier run deleted).
function init(args)
  tag = args[1]
  local offset = tonumber(args[2])
  n = 0
  statuses = {}
  created = {{}, {}}
  reserve_at = {offset + tid, offset + tid}
  fallbacks = 0
  math.randomseed(tid * 7919)
end

local function headers(account, body)
  local h = {["Authorization"] = "Bearer " .. keys[account]}
  if body then h["Content-Type"] = "application/json" end
  return h
end

function request()
  n = n + 1
  local account = n % 2 + 1
  local kind = only or n % 5
  if kind == 0 then
    local body = string.format('{"email":"mix-%d-%s.%d.%d@example.com","first_name":"Mix","last_name":"Load %d","tags":["bench"],"custom_fields":{"source":"wrk","n":%d}}', account, tag, tid, n, n, n)
    return wrk.format("POST", "/api/v1/contacts", headers(account, true), body)
  elseif kind == 1 then
    return wrk.format("GET", "/api/v1/me", headers(account, false))
  elseif kind == 2 then
    return wrk.format("GET", lists[math.floor(n / 5) % 2 + 1], headers(account, false))
  elseif kind == 3 then
    local ids = patch_ids[account]
    local id = ids[math.random(#ids)]
    return wrk.format("PATCH", "/api/v1/contacts/" .. id, headers(account, true), string.format('{"job_title":"Title %s %d"}', tag, n))
  else
    -- A contact this thread created, else one of the seeded ones set aside for this thread.
    local id = table.remove(created[account], 1)
    if not id then
      local reserve = reserve_ids[account]
      id = reserve[reserve_at[account]]
      reserve_at[account] = reserve_at[account] + threads_total
      fallbacks = fallbacks + 1
    end
    return wrk.format("DELETE", "/api/v1/contacts/" .. (id or "con_none"), headers(account, false))
  end
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 201 then
    local account = tonumber(string.match(body, '"email":"mix%-(%d)%-'))
    local id = string.match(headers["location"] or headers["Location"] or "", "/(con_[%w]+)$")
    if account and id then table.insert(created[account], id) end
  end
end

function done(summary, latency, requests)
  local all = {}
  local fell_back = 0
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      all[status] = (all[status] or 0) + count
    end
    fell_back = fell_back + thread:get("fallbacks")
  end
  local parts = {}
  for status, count in pairs(all) do table.insert(parts, string.format('"%d":%d', status, count)) end
  io.write(string.format('{"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"reserve_deletes":%d,"statuses":{%s}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout,
    fell_back, table.concat(parts, ",")))
end
`
}

interface WrkResult {
  requests: number
  duration_us: number
  p50_us: number
  p90_us: number
  p99_us: number
  max_us: number
  errors: Record<'connect' | 'read' | 'write' | 'status' | 'timeout', number>
  reserve_deletes: number
  statuses: Record<string, number>
}

/** Runs wrk once; resolves with its result and its own CPU time. */
async function runWrk(
  options: Options,
  base: string,
  script: string,
  seconds: number,
  pin: boolean,
  reserveOffset: number,
): Promise<{ result: WrkResult; cpuUs: number }> {
  const args = [
    `-t${options.threads}`,
    `-c${options.connections}`,
    `-d${seconds}s`,
    '--timeout',
    '10s',
    '-s',
    script,
    base,
    '--',
    randomBytes(3).toString('hex'),
    String(reserveOffset),
  ]
  const [command, commandArgs] = pin ? ['taskset', ['-c', String(LOAD_CORE), 'wrk', ...args]] : ['wrk', args]
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk) => {
    stdout += chunk
  })
  child.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  // wrk's own CPU, read just before it exits (then /proc has nothing): its children are none.
  let cpuUs = 0
  const sampler = setInterval(() => {
    if (child.pid !== undefined) {
      cpuUs = Math.max(cpuUs, cpuUsOf([child.pid]))
    }
  }, 100)
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  clearInterval(sampler)
  const line = stdout.split('\n').find((l) => l.startsWith('{"requests"'))
  if (code !== 0 || !line) {
    throw new Error(`wrk failed (exit ${code}): ${stderr}\n${stdout}`)
  }
  return { result: JSON.parse(line) as WrkResult, cpuUs }
}

interface Seeded {
  databaseUrl: string
  keys: string[]
  patchIds: string[][]
  reserveIds: string[][]
  accountIds: string[]
  drop: () => Promise<void>
}

async function seed(db: Db, options: Options): Promise<Seeded> {
  const plan: SeedPlan = {
    bigContacts: options.contacts,
    deepPosition: 1,
    smallAccounts: 1,
    contactsPerSmallAccount: options.contacts,
  }
  let databaseUrl: string
  let drop: () => Promise<void>
  let result: Awaited<ReturnType<typeof seedSqlite>>
  if (db === 'sqlite') {
    const dir = path.join(RESULTS, 'data')
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `write-mix-${process.pid}.sqlite`)
    drop = async () => {
      if (!options.keep) {
        for (const suffix of ['', '-wal', '-shm']) {
          rmSync(`${file}${suffix}`, { force: true })
        }
      }
    }
    await drop()
    result = await seedSqlite(file, plan)
    databaseUrl = `sqlite:${file}`
  } else {
    const name = `${process.env.BENCH_DATABASE_PREFIX ?? 'bench_writes'}_${Date.now()}_${randomBytes(3).toString('hex')}`
    await adminQuery(options.pgAdminUrl, `create database ${name}`)
    drop = () => adminQuery(options.pgAdminUrl, `drop database if exists ${name} with (force)`)
    const url = new URL(options.pgAdminUrl)
    url.pathname = `/${name}`
    databaseUrl = url.toString()
    result = await seedPostgres(databaseUrl, plan)
    if (options.asyncCommit) {
      await adminQuery(options.pgAdminUrl, `alter database ${name} set synchronous_commit = off`)
    }
  }
  log(`  seeded 2 × ${options.contacts.toLocaleString('en-US')} contacts in ${result.seconds.toFixed(1)} s`)
  const keys = [result.big.key, result.smallKeys[0] as string]
  const handle = openDatabase(
    db === 'sqlite'
      ? { kind: 'sqlite', path: databaseUrl.slice('sqlite:'.length), synchronous: 'NORMAL' }
      : { kind: 'postgres', url: databaseUrl },
  )
  const accountIds: string[] = []
  const patchIds: string[][] = []
  const reserveIds: string[][] = []
  // In the order of keys; each account's test-mode twin has no contacts and is not used.
  for (const accountId of [result.big.accountId, result.smallAccountIds[0] as string]) {
    const rows = await handle.db
      .selectFrom('contacts')
      .select('id')
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute()
    accountIds.push(accountId)
    patchIds.push(rows.slice(0, PATCH_POOL).map((r) => r.id))
    reserveIds.push(rows.slice(PATCH_POOL).map((r) => r.id))
  }
  await handle.close()
  return { databaseUrl, keys, patchIds, reserveIds, accountIds, drop }
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/**
 * Statements per request of each write, counted in-process at the driver (test/statement-capture.ts
 * on PostgreSQL; better-sqlite3's statement runs on SQLite) on the seeded database, before the load.
 */
async function statementsPerWrite(db: Db, seeded: Seeded, serverRoot: string): Promise<Record<string, number>> {
  // The app of the server measured (another checkout's build with --server-root), in this process.
  const built = (file: string) => import(path.join(serverRoot, 'dist', file))
  const { buildApp } = (await built('app.js')) as typeof import('../src/app.js')
  const { loadConfig } = (await built('config.js')) as typeof import('../src/config.js')
  const { createDeps } = (await built('deps.js')) as typeof import('../src/deps.js')
  const builtDatabase = (await built('db/database.js')) as typeof import('../src/db/database.js')
  const counted: { n: number } = { n: 0 }
  let restore: () => void
  if (db === 'postgres') {
    const capture = captureStatements()
    restore = () => capture.restore()
    const take = capture.take
    Object.defineProperty(counted, 'n', { get: () => take().length })
  } else {
    const probe = new SQLite(':memory:')
    const proto = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...args: unknown[]) => unknown>
    probe.close()
    const originals = { run: proto.run, all: proto.all, get: proto.get, iterate: proto.iterate }
    let runs = 0
    for (const method of ['run', 'all', 'get', 'iterate'] as const) {
      const original = originals[method] as (...args: unknown[]) => unknown
      proto[method] = function (this: unknown, ...args: unknown[]) {
        runs++
        return original.apply(this, args)
      }
    }
    restore = () => Object.assign(proto, originals)
    Object.defineProperty(counted, 'n', {
      get: () => {
        const value = runs
        runs = 0
        return value
      },
    })
  }
  const config = loadConfig({
    DATABASE_URL: seeded.databaseUrl,
    SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_SECOND: '0',
    WEBHOOK_WORKER: 'off',
  })
  const database = builtDatabase.openDatabase(config.database)
  const deps = createDeps(config, { database })
  const app = await buildApp(deps, { logger: false })
  await app.ready()
  const headers = { authorization: `Bearer ${seeded.keys[0]}` }
  const counts: Record<string, number[]> = { create: [], patch: [], delete: [] }
  try {
    await app.inject({ method: 'GET', url: '/api/v1/me', headers }) // the key, cached from here on
    void counted.n
    for (let i = 0; i < 3; i++) {
      const created = await app.inject({
        method: 'POST',
        url: '/api/v1/contacts',
        headers,
        payload: { email: `count.${i}.${randomBytes(3).toString('hex')}@example.com`, tags: ['bench'] },
      })
      counts.create?.push(counted.n)
      const id = (created.json() as { id: string }).id
      await app.inject({ method: 'PATCH', url: `/api/v1/contacts/${id}`, headers, payload: { job_title: `T${i}` } })
      counts.patch?.push(counted.n)
      await app.inject({ method: 'DELETE', url: `/api/v1/contacts/${id}`, headers })
      counts.delete?.push(counted.n)
    }
  } finally {
    await app.close()
    await database.close()
    restore()
  }
  // The least of three: a request may also carry the key cache's refresh, which is not the write's.
  return Object.fromEntries(Object.entries(counts).map(([kind, values]) => [kind, Math.min(...values)]))
}

interface WaitSample {
  active: number
  idleInTransaction: number
  idle: number
  waits: Record<string, number>
}

/** Samples what the service's backends are doing, every 50 ms, until stopped. */
function sampleBackends(databaseUrl: string) {
  const client = new pg.Client({ connectionString: databaseUrl })
  const totals: WaitSample = { active: 0, idleInTransaction: 0, idle: 0, waits: {} }
  let samples = 0
  let running = true
  const loop = (async () => {
    await client.connect()
    while (running) {
      const { rows } = await client.query<{ state: string | null; wait: string | null }>(
        `select state, wait_event_type || ':' || wait_event as wait from pg_stat_activity
         where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
      )
      samples++
      for (const row of rows) {
        if (row.state === 'active') {
          totals.active++
          // Active and waiting on something other than the client: a lock, the WAL flush, I/O.
          if (row.wait !== null) {
            totals.waits[row.wait] = (totals.waits[row.wait] ?? 0) + 1
          }
        } else if (row.state === 'idle in transaction') {
          totals.idleInTransaction++
        } else {
          totals.idle++
        }
      }
      await sleep(50)
    }
    await client.end()
  })()
  return async () => {
    running = false
    await loop
    const per = (value: number) => (samples > 0 ? value / samples : 0)
    return {
      samples,
      active: per(totals.active),
      idleInTransaction: per(totals.idleInTransaction),
      idle: per(totals.idle),
      waits: Object.fromEntries(
        Object.entries(totals.waits)
          .sort((a, b) => b[1] - a[1])
          .map(([wait, count]) => [wait, Number(per(count).toFixed(3))]),
      ),
    }
  }
}

async function backendPids(databaseUrl: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number }>(
      "select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()",
    )
    return rows.map((row) => row.pid)
  } finally {
    await client.end()
  }
}

async function commitsOf(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ n: string }>(
      'select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()',
    )
    return Number(rows[0]?.n ?? 0)
  } finally {
    await client.end()
  }
}

async function startServer(
  seeded: Seeded,
  pin: boolean,
  serverRoot: string,
  profileDir: string | undefined,
): Promise<{ child: ChildProcess; base: string }> {
  const port = await freePort()
  const args = [
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
    ...(serverRoot === ROOT ? cliCommand() : [path.join(serverRoot, 'dist', 'main.js')]),
    'serve',
  ]
  const [command, commandArgs] = pin
    ? ['taskset', ['-c', String(SERVER_CORE), process.execPath, ...args]]
    : [process.execPath, args]
  const child = spawn(command, commandArgs, {
    cwd: serverRoot,
    env: {
      ...process.env,
      DATABASE_URL: seeded.databaseUrl,
      SECRET: randomBytes(32).toString('hex'),
      PORT: String(port),
      HOST: '127.0.0.1',
      RATE_LIMIT_PER_SECOND: '0',
      NODE_ENV: 'production',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000)
  })
  const base = `http://127.0.0.1:${port}`
  for (let attempt = 0; ; attempt++) {
    if (child.exitCode !== null) {
      throw new Error(`server exited (${child.exitCode}): ${stderr}`)
    }
    try {
      await (await fetch(`${base}/healthz`)).arrayBuffer()
      return { child, base }
    } catch {
      if (attempt > 300) {
        throw new Error(`server did not answer within 30 s: ${stderr}`)
      }
      await sleep(100)
    }
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return
  }
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
}

interface MixResult {
  db: Db
  rps: number
  p50: number
  p90: number
  p99: number
  max: number
  requests: number
  statuses: Record<string, number>
  reserveDeletes: number
  cpuUsPerRequest: number
  dbCpuUsPerRequest: number
  loadGeneratorCpu: number
  transactionsPerRequest?: number
  backends?: Awaited<ReturnType<ReturnType<typeof sampleBackends>>>
  postgres?: PostgresRound
  machine: MachineReading
}

function logPostgresRound(round: PostgresRound, requests: number): void {
  log(
    `           server: WAL ${(round.walBytes / requests).toFixed(0)} B/req (full-page images ${round.walFpi}), checkpoints ${round.checkpoints} (${round.buffersCheckpoint} buffers; ${round.buffersBackend} written by backends), autovacuum ${round.autovacuums}, autoanalyze ${round.autoanalyzes}, dead tuples ${round.deadTuples}`,
  )
  for (const statement of round.statements ?? []) {
    log(
      `             ${statement.totalMs.toFixed(0).padStart(6)} ms ${String(statement.calls).padStart(7)} calls ${statement.meanUs.toFixed(0).padStart(5)} µs  rows ${statement.rowsPerCall.toFixed(1)}  blocks hit ${statement.blocksHitPerCall.toFixed(1)} read ${statement.blocksReadPerCall.toFixed(2)}  WAL ${statement.walBytesPerCall.toFixed(0)} B  ${statement.query}`,
    )
  }
}

async function runDb(
  db: Db,
  options: Options,
  pin: boolean,
): Promise<{ rounds: MixResult[]; statements: Record<string, number> }> {
  log(`${db}: seeding ...`)
  const seeded = await seed(db, options)
  if (db === 'postgres') {
    const missing = await enableStatementStats(seeded.databaseUrl)
    if (missing) {
      log(`  ${missing}`)
    }
  }
  let server: ChildProcess | undefined
  try {
    const statements = await statementsPerWrite(db, seeded, options.serverRoot)
    log(`  statements per write: ${JSON.stringify(statements)}`)
    const script = `/tmp/write-mix-${process.pid}-${db}.lua`
    writeFileSync(
      script,
      wrkScript({
        keys: seeded.keys,
        patchIds: seeded.patchIds,
        reserveIds: seeded.reserveIds,
        threads: options.threads,
        only: options.only,
      }),
    )
    const profileDir = options.cpuProf ? path.join(RESULTS, 'profiles', `write-mix-${db}`) : undefined
    const started = await startServer(seeded, pin, options.serverRoot, profileDir)
    server = started.child
    log(`  warm-up ${options.warmup} s`)
    let reserveOffset = (await runWrk(options, started.base, script, options.warmup, pin, 0)).result.reserve_deletes
    const backends = db === 'postgres' ? await backendPids(seeded.databaseUrl) : []
    if (pin && options.pinPostgres) {
      for (const pid of backends) {
        pinTo(SERVER_CORE, pid)
      }
    }
    const rounds: MixResult[] = []
    for (let round = 0; round < options.rounds; round++) {
      const machine = readMachine()
      log(`  round ${round + 1}: ${describeMachine(machine)}`)
      const serverPids = [server.pid as number]
      const cpuBefore = cpuUsOf(serverPids)
      const dbCpuBefore = cpuUsOf(backends)
      const commitsBefore = db === 'postgres' ? await commitsOf(seeded.databaseUrl) : 0
      const stopSampling = db === 'postgres' ? sampleBackends(seeded.databaseUrl) : undefined
      const endRound = db === 'postgres' ? await watchPostgresRound(seeded.databaseUrl) : undefined
      const { result, cpuUs: wrkCpu } = await runWrk(options, started.base, script, options.seconds, pin, reserveOffset)
      reserveOffset += result.reserve_deletes
      const sampled = await stopSampling?.()
      const postgres = await endRound?.()
      const cpu = cpuUsOf(serverPids) - cpuBefore
      const dbCpu = cpuUsOf(backends) - dbCpuBefore
      const commits = db === 'postgres' ? (await commitsOf(seeded.databaseUrl)) - commitsBefore : 0
      const seconds = result.duration_us / 1e6
      const ok = Object.entries(result.statuses)
        .filter(([status]) => status.startsWith('2'))
        .reduce((sum, [, count]) => sum + count, 0)
      const mix: MixResult = {
        db,
        rps: ok / seconds,
        p50: result.p50_us / 1000,
        p90: result.p90_us / 1000,
        p99: result.p99_us / 1000,
        max: result.max_us / 1000,
        requests: result.requests,
        statuses: result.statuses,
        reserveDeletes: result.reserve_deletes,
        cpuUsPerRequest: (cpu + dbCpu) / result.requests,
        dbCpuUsPerRequest: dbCpu / result.requests,
        loadGeneratorCpu: wrkCpu / result.duration_us,
        ...(db === 'postgres' ? { transactionsPerRequest: commits / result.requests } : {}),
        ...(sampled ? { backends: sampled } : {}),
        ...(postgres ? { postgres } : {}),
        machine,
      }
      const bad = result.requests - ok
      log(
        `  ${db.padEnd(8)} ${Math.round(mix.rps).toString().padStart(6)} req/s  p50 ${mix.p50.toFixed(1)} ms  p90 ${mix.p90.toFixed(1)} ms  p99 ${mix.p99.toFixed(1)} ms  max ${mix.max.toFixed(0)} ms  cpu ${mix.cpuUsPerRequest.toFixed(0)} µs/req${db === 'postgres' ? ` (db ${mix.dbCpuUsPerRequest.toFixed(0)})` : ''}  wrk cpu ${(mix.loadGeneratorCpu * 100).toFixed(0)}%${mix.transactionsPerRequest === undefined ? '' : `  tx/req ${mix.transactionsPerRequest.toFixed(2)}`}${bad > 0 ? `  NON-2XX ${bad} ${JSON.stringify(result.statuses)}` : ''}`,
      )
      if (sampled) {
        log(
          `           backends (mean per sample): active ${sampled.active.toFixed(1)}, idle in transaction ${sampled.idleInTransaction.toFixed(1)}, idle ${sampled.idle.toFixed(1)}; waiting: ${JSON.stringify(sampled.waits)}`,
        )
      }
      if (postgres) {
        logPostgresRound(postgres, result.requests)
      }
      rounds.push(mix)
    }
    return { rounds, statements }
  } finally {
    if (server) {
      await stop(server)
    }
    await seeded.drop()
  }
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (spawnSync('wrk', ['-v']).error) {
    throw new Error('wrk is not installed (apt-get install wrk): the mix needs it as its load generator')
  }
  const pin = options.pin && canPin()
  const loadBefore = os.loadavg()
  log(
    `write mix: ${options.connections} connections, ${options.threads} wrk thread(s), warm-up ${options.warmup} s + ${options.rounds} × ${options.seconds} s; ${pin ? `server on core ${SERVER_CORE}${options.pinPostgres ? ' with its PostgreSQL backends' : ''}, wrk on core ${LOAD_CORE}` : 'not pinned'}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  )
  const report: Record<string, unknown> = {
    startedAt: new Date().toISOString(),
    options: { ...options, pgAdminUrl: undefined },
    loadBefore,
  }
  for (const db of options.dbs) {
    report[db] = await runDb(db, options, pin)
  }
  report.loadAfter = os.loadavg()
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(RESULTS, `write-mix-${String(report.startedAt).replace(/[:.]/g, '-')}.json`)
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)
  log(
    `load average after ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; results: ${path.relative(ROOT, file)}`,
  )
}

main().catch((error: unknown) => {
  log(`write mix failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  process.exitCode = 1
})
