// over 400 lines: three benchmarks sharing one receiver, database and server set-up.
// The webhook benches, scenario `webhooks` of `npm run bench`: throughput, lag, and writes with
// endpoints (method: bench/README.md#webhooks).
import type { ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { openDatabase } from '../src/db/database.js'
import { createEndpoint, removeEndpoint, type WebhookActionsDeps } from '../src/webhooks/endpoint-lifecycle.js'
import { webhookSecretKey } from '../src/webhooks/secrets.js'
import { defaultResolver } from '../src/webhooks/webhook-url.js'
import type { LoadResult, LoadSpec } from './load.js'
import { seedPostgres, seedSqlite } from './seed.js'
import { CREATE_BODY } from './template.js'

type Db = 'sqlite' | 'postgres'

export interface WebhookPlan {
  /** Throughput: endpoints and events of the backlog (deliveries = endpoints × events). */
  backlogEndpoints: number
  backlogEvents: number
  /** Lag: writes per second, for how long (after a warm-up at the same rate). */
  lagRate: number
  lagSeconds: number
  lagWarmup: number
  /** Writes: the endpoints of the middle run. */
  writeEndpoints: number
}

export const WEBHOOK_PLANS: Record<'full' | 'quick', WebhookPlan> = {
  full: {
    backlogEndpoints: 4,
    backlogEvents: 5000,
    lagRate: 500,
    lagSeconds: 30,
    lagWarmup: 3,
    writeEndpoints: 10,
  },
  quick: { backlogEndpoints: 4, backlogEvents: 1000, lagRate: 500, lagSeconds: 5, lagWarmup: 1, writeEndpoints: 10 },
}

/** What bench/run.ts lends: its process helpers and its measure of one scenario. */
export interface BenchKit {
  taskset: boolean
  serverCore: number
  loadCore: number
  results: string
  pgAdminUrl: string
  pinPostgres: boolean
  /** --cpu-prof: profile the worker of the throughput run (bench/results/profiles/webhooks-<db>/). */
  cpuProf: boolean
  log(text: string): void
  freePort(): Promise<number>
  spawnNode(args: string[], core: number, taskset: boolean, env: NodeJS.ProcessEnv): ChildProcess
  waitForHttp(url: string, child: ChildProcess, stderr: () => string): Promise<void>
  stopProcess(child: ChildProcess): Promise<void>
  cpuMsOf(pids: number[]): number
  /** One load generator run (warm-up, `beforeRounds`, rounds) against a server. */
  load(
    spec: LoadSpec,
    taskset: boolean,
    serverPid: number | undefined,
    beforeRounds: () => Promise<number[]>,
  ): Promise<Array<LoadResult & { cpuUsPerRequest: number; dbCpuUsPerRequest: number }>>
  /** The create scenario, as the contact benches run it (rounds, warm-up, connections of the options). */
  measureCreate(
    db: Db,
    url: string,
    pid: number | undefined,
    backends: (() => Promise<number[]>) | undefined,
    headers: Record<string, string>,
  ): Promise<{ rps: number; p50: number; p99: number; cpuUsPerRequest: number; dbCpuUsPerRequest: number }>
}

export interface WebhookResult {
  db: Db
  throughput: {
    deliveries: number
    endpoints: number
    /** Deliveries per second, first receipt to last. */
    perSecond: number
    /** From the worker's /healthz answering to the last receipt (fan-out of the backlog included). */
    wallSeconds: number
    /** CPU of the worker process (and its PostgreSQL backends) per delivery, µs. */
    cpuUsPerDelivery: number
    dbCpuUsPerDelivery: number
  }
  lag: {
    rate: number
    writes: number
    deliveries: number
    endpoints: number
    p50: number
    p90: number
    p99: number
    max: number
    writeP50: number
    writeP99: number
  }
  writes: {
    endpoints: number
    none: Array<{ rps: number; p50: number; cpuUsPerRequest: number }>
    with: { rps: number; p50: number; cpuUsPerRequest: number }
    /** with.rps over the mean of the two runs without. */
    ratio: number
  }
}

interface Stats {
  count: number
  bad: number
  firstAt: number
  lastAt: number
  byPath: Record<string, number>
  lag: { p50: number; p90: number; p99: number; max: number }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function stats(receiver: string): Promise<Stats> {
  const res = await fetch(`${receiver}/__stats`)
  return (await res.json()) as Stats
}

async function reset(receiver: string): Promise<void> {
  await (await fetch(`${receiver}/__reset`, { method: 'POST' })).text()
}

/** Waits until the receiver has `count` deliveries (then a moment more, for duplicates), or throws. */
async function waitForCount(receiver: string, count: number, timeoutMs: number, during?: () => Promise<void>) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    await during?.()
    const now = await stats(receiver)
    if (now.count >= count) {
      await sleep(300)
      return stats(receiver)
    }
    if (Date.now() > deadline) {
      throw new Error(`the receiver has ${now.count} of ${count} deliveries after ${timeoutMs / 1000} s`)
    }
    await sleep(50)
  }
}

/** Waits until nothing more arrives for `quietMs`. */
async function waitForQuiet(receiver: string, quietMs: number): Promise<Stats> {
  let last = await stats(receiver)
  for (;;) {
    await sleep(quietMs)
    const now = await stats(receiver)
    if (now.count === last.count) {
      return now
    }
    last = now
  }
}

interface Provisioned {
  databaseUrl: string
  handleConfig: Parameters<typeof openDatabase>[0]
  accountId: string
  key: string
  drop(): Promise<void>
}

async function provision(db: Db, kit: BenchKit): Promise<Provisioned> {
  const plan = { bigContacts: 1000, deepPosition: 900, smallAccounts: 1, contactsPerSmallAccount: 1 }
  if (db === 'sqlite') {
    const dir = path.join(kit.results, 'data')
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `webhooks-${process.pid}.sqlite`)
    const drop = async () => {
      for (const suffix of ['', '-wal', '-shm']) {
        rmSync(`${file}${suffix}`, { force: true })
      }
    }
    await drop()
    const seed = await seedSqlite(file, plan)
    return {
      databaseUrl: `sqlite:${file}`,
      handleConfig: { kind: 'sqlite', path: file, synchronous: 'NORMAL' },
      accountId: seed.big.accountId,
      key: seed.big.key,
      drop,
    }
  }
  const name = `bench_wh_${Date.now()}_${randomBytes(3).toString('hex')}`
  const admin = new pg.Client({ connectionString: kit.pgAdminUrl, connectionTimeoutMillis: 5000 })
  await admin.connect()
  await admin.query(`create database ${name}`)
  await admin.end()
  const url = new URL(kit.pgAdminUrl)
  url.pathname = `/${name}`
  const seed = await seedPostgres(url.toString(), plan)
  return {
    databaseUrl: url.toString(),
    handleConfig: { kind: 'postgres', url: url.toString() },
    accountId: seed.big.accountId,
    key: seed.big.key,
    drop: async () => {
      const client = new pg.Client({ connectionString: kit.pgAdminUrl })
      await client.connect()
      await client.query(`drop database if exists ${name} with (force)`)
      await client.end()
    },
  }
}

/** The database's backends other than ours, pinned to the server's core (so the service gets one core). */
async function pinBackends(kit: BenchKit, databaseUrl: string | undefined, pinned: Set<number>): Promise<number[]> {
  if (!databaseUrl) {
    return []
  }
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    )
    for (const { pid } of rows) {
      if (!pinned.has(pid) && kit.taskset && kit.pinPostgres) {
        const { execFileSync } = await import('node:child_process')
        try {
          execFileSync('taskset', ['-a', '-cp', String(kit.serverCore), String(pid)], { stdio: 'ignore' })
        } catch {
          // ended meanwhile
        }
      }
      pinned.add(pid)
    }
    return [...pinned]
  } finally {
    await client.end()
  }
}

export async function runWebhooks(
  db: Db,
  plan: WebhookPlan,
  kit: BenchKit,
  cleanups: Array<() => Promise<void>>,
): Promise<WebhookResult> {
  const label = db === 'sqlite' ? 'SQLite' : 'PostgreSQL'
  kit.log(`webhooks on ${label}: provisioning a small database ...`)
  const base = await provision(db, kit)
  cleanups.push(base.drop)
  const pgUrl = db === 'postgres' ? base.databaseUrl : undefined
  const secret = randomBytes(32).toString('hex')
  const opened = openDatabase(base.handleConfig)
  let closing: Promise<void> | undefined
  const handle = { db: opened.db, close: () => (closing ??= opened.close()) }
  cleanups.push(() => handle.close())
  const deps: WebhookActionsDeps = {
    db: handle.db,
    secretKey: webhookSecretKey(secret),
    allowPrivateUrls: true,
    resolve: defaultResolver,
  }
  const receiverPort = await kit.freePort()
  const receiverProcess = kit.spawnNode(
    ['bench/receiver.mjs', String(receiverPort)],
    kit.loadCore,
    kit.taskset,
    process.env,
  )
  cleanups.push(() => kit.stopProcess(receiverProcess))
  const receiver = `http://127.0.0.1:${receiverPort}`
  await kit.waitForHttp(`${receiver}/__stats`, receiverProcess, () => '')
  // SQLite: a transaction that reads first cannot wait for the server's last writes; try again.
  const retried = async <T>(action: () => Promise<T>): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await action()
      } catch (error) {
        if (attempt > 50 || !/locked|busy/i.test(String(error))) {
          throw error
        }
        await sleep(100)
      }
    }
  }
  const addEndpoints = async (prefix: string, n: number) => {
    const ids: string[] = []
    for (let i = 1; i <= n; i++) {
      const { endpoint } = await retried(() =>
        createEndpoint(deps, base.accountId, { url: `${receiver}/${prefix}/${i}` }, undefined, new Date()),
      )
      ids.push(endpoint.id)
    }
    return ids
  }
  const removeAll = async (ids: string[]) => {
    for (const id of ids) {
      await retried(() => removeEndpoint(deps, base.accountId, id, undefined, new Date()))
    }
  }
  const headers = { authorization: `Bearer ${base.key}` }
  const startProcess = async (
    role: 'serve' | 'worker',
    worker: boolean,
    nodeArgs: string[] = [],
    core = kit.serverCore,
  ) => {
    const port = await kit.freePort()
    const env = {
      ...process.env,
      DATABASE_URL: base.databaseUrl,
      SECRET: secret,
      PORT: String(port),
      HOST: '127.0.0.1',
      RATE_LIMIT_PER_SECOND: '0',
      NODE_ENV: 'production',
      WEBHOOK_WORKER: worker ? 'on' : 'off',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    }
    const child = kit.spawnNode([...nodeArgs, 'dist/main.js', role], core, kit.taskset, env)
    let stderr = ''
    child.stderr?.on('data', (chunk) => {
      stderr = (stderr + chunk).slice(-4000)
    })
    cleanups.push(() => kit.stopProcess(child))
    const url = `http://127.0.0.1:${port}`
    await kit.waitForHttp(`${url}/healthz`, child, () => stderr)
    return { child, url }
  }

  // 1. Throughput: the backlog is written with no worker anywhere, then `contacts-api worker` alone.
  const backlogIds = await addEndpoints('backlog', plan.backlogEndpoints)
  const writer = await startProcess('serve', false)
  kit.log(`  writing ${plan.backlogEvents} contacts with the worker off ...`)
  let written = 0
  const tag = randomBytes(4).toString('hex')
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (written < plan.backlogEvents) {
        const n = written++
        const res = await fetch(`${writer.url}/api/v1/contacts`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ email: `backlog.${tag}.${n}@example.com`, first_name: 'Backlog', tags: ['bench'] }),
        })
        await res.text()
        if (res.status !== 201) {
          throw new Error(`backlog write answered ${res.status}`)
        }
      }
    }),
  )
  await kit.stopProcess(writer.child)
  await reset(receiver)
  const expected = plan.backlogEvents * plan.backlogEndpoints
  const pinned = new Set<number>()
  const profileDir = path.join(kit.results, 'profiles', `webhooks-${db}`)
  const worker = await startProcess('worker', true, kit.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])
  const workerPids = [worker.child.pid as number]
  const readyAt = Date.now()
  const cpuBefore = kit.cpuMsOf(workerPids)
  let lastPin = 0
  const done = await waitForCount(receiver, expected, 300_000, async () => {
    if (pgUrl && Date.now() - lastPin > 250) {
      lastPin = Date.now()
      await pinBackends(kit, pgUrl, pinned)
    }
  })
  const cpuMs = kit.cpuMsOf(workerPids)
  const dbCpuMs = kit.cpuMsOf([...pinned])
  await kit.stopProcess(worker.child)
  if (done.count !== expected || done.bad > 0) {
    throw new Error(`${db} webhooks throughput: ${done.count} deliveries (${done.bad} malformed), ${expected} expected`)
  }
  const throughput = {
    deliveries: done.count,
    endpoints: plan.backlogEndpoints,
    perSecond: (done.count - 1) / ((done.lastAt - done.firstAt) / 1000),
    wallSeconds: (done.lastAt - readyAt) / 1000,
    cpuUsPerDelivery: ((cpuMs - cpuBefore + dbCpuMs) * 1000) / done.count,
    dbCpuUsPerDelivery: (dbCpuMs * 1000) / done.count,
  }
  kit.log(
    `  ${db.padEnd(8)} throughput ${Math.round(throughput.perSecond)} deliveries/s (${done.count} to ${plan.backlogEndpoints} endpoints, ${throughput.wallSeconds.toFixed(1)} s from ready), cpu ${throughput.cpuUsPerDelivery.toFixed(0)} µs/delivery${pgUrl ? ` (db ${throughput.dbCpuUsPerDelivery.toFixed(0)})` : ''}`,
  )
  await removeAll(backlogIds)

  // 2. Lag: serve, and `contacts-api worker` as production runs it, in a process of its own on the
  // other core (the load generator's: at this rate it leaves most of that core free); writes at a
  // fixed rate, 2 endpoints.
  await addEndpoints('lag', 2)
  const server = await startProcess('serve', false)
  const lagWorker = await startProcess('worker', true, [], kit.loadCore)
  const serverPinned = new Set<number>()
  const lagSpec: LoadSpec = {
    url: server.url,
    method: 'POST',
    path: '/api/v1/contacts',
    headers,
    body: CREATE_BODY,
    connections: 10,
    rate: plan.lagRate,
    warmupSeconds: plan.lagWarmup,
    rounds: 1,
    seconds: plan.lagSeconds,
  }
  const [round] = await kit.load(lagSpec, kit.taskset, server.child.pid, async () => {
    await waitForQuiet(receiver, 500)
    await reset(receiver)
    return pinBackends(kit, pgUrl, serverPinned)
  })
  if (!round || round.non2xx > 0 || round.errors > 0) {
    throw new Error(`${db} webhooks lag: the writes failed (${JSON.stringify(round)})`)
  }
  const writes = Math.round(round.rps * round.seconds)
  const lagStats = await waitForCount(receiver, 2 * round.requests, 120_000).catch(() => waitForQuiet(receiver, 1000))
  const lag = {
    rate: plan.lagRate,
    writes: round.requests,
    deliveries: lagStats.count,
    endpoints: 2,
    ...lagStats.lag,
    writeP50: round.p50,
    writeP99: round.p99,
  }
  kit.log(
    `  ${db.padEnd(8)} lag at ${plan.lagRate} writes/s × 2 endpoints: p50 ${lag.p50} ms, p90 ${lag.p90} ms, p99 ${lag.p99} ms, max ${lag.max} ms (${lagStats.count} deliveries of ${2 * round.requests} expected; ~${writes} 2xx writes; write p50 ${round.p50.toFixed(2)} ms)`,
  )
  if (lagStats.count < 2 * round.requests) {
    throw new Error(`${db} webhooks lag: ${lagStats.count} deliveries, ${2 * round.requests} expected`)
  }
  await kit.stopProcess(lagWorker.child)
  await kit.stopProcess(server.child)

  // 3. Writes with and without endpoints, WEBHOOK_WORKER=off (see the header).
  const plain = await startProcess('serve', false)
  const writePinned = new Set<number>()
  const backends = pgUrl ? () => pinBackends(kit, pgUrl, writePinned) : undefined
  // A first run warms the new server up (JIT, the pool); the first run of a fresh server is slower.
  await kit.measureCreate(db, plain.url, plain.child.pid, backends, headers)
  const none1 = await kit.measureCreate(db, plain.url, plain.child.pid, backends, headers)
  const ids = await addEndpoints('writes', plan.writeEndpoints)
  const withEndpoints = await kit.measureCreate(db, plain.url, plain.child.pid, backends, headers)
  await removeAll(ids)
  const none2 = await kit.measureCreate(db, plain.url, plain.child.pid, backends, headers)
  await kit.stopProcess(plain.child)
  const pick = (r: { rps: number; p50: number; cpuUsPerRequest: number }) => ({
    rps: r.rps,
    p50: r.p50,
    cpuUsPerRequest: r.cpuUsPerRequest,
  })
  const writesResult = {
    endpoints: plan.writeEndpoints,
    none: [pick(none1), pick(none2)],
    with: pick(withEndpoints),
    ratio: withEndpoints.rps / ((none1.rps + none2.rps) / 2),
  }
  kit.log(
    `  ${db.padEnd(8)} POST /contacts: ${Math.round(none1.rps)} req/s with no endpoint, ${Math.round(withEndpoints.rps)} with ${plan.writeEndpoints}, ${Math.round(none2.rps)} with none again: ${(writesResult.ratio * 100).toFixed(1)} %`,
  )
  await kit.stopProcess(receiverProcess)
  await handle.close()
  return { db, throughput, lag, writes: writesResult }
}
