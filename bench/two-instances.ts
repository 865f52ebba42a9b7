// over 400 lines: one benchmark whose four steps share their processes and are read in order.
// `npm run bench:instances`: one API process against two on the same PostgreSQL and Redis, under the
// same total load split evenly across the two (method and options: bench/README.md#two-instances).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import pg from 'pg'
import { cliCommand, freePort, type ServerProcess, startServerProcess } from '../test/processes.js'
import { httpSignUp } from '../test/web-client.js'
import type { LoadResult, LoadSpec } from './load.js'
import { CLOCK_TICKS, cpuTicksOf, log, median, ROOT } from './processes.js'
import { type SeedResult, seedPostgres } from './seed.js'
import { CREATE_BODY, PATCH_BODY } from './template.js'

const TICK_US = 1_000_000 / CLOCK_TICKS
const REVOCATION_BOUND_MS = 1000 // pushed revocations: docs/design.md#authentication

type Kind = 'me' | 'list' | 'create' | 'patch'

interface KindSpec {
  title: string
  method: LoadSpec['method']
  path: string
  /** A JSON body template (bench/template.ts), or none. */
  body?: string
  /** `{id}` in the path takes the seeded contacts to patch. */
  patches?: boolean
  /** Total requests per second, whatever the number of instances: low enough for one instance on a busy machine. */
  rate: number
}

const KINDS: Record<Kind, KindSpec> = {
  me: { title: 'GET /me', method: 'GET', path: '/api/v1/me', rate: 2000 },
  list: { title: 'list page 1 (limit 50)', method: 'GET', path: '/api/v1/contacts?limit=50', rate: 400 },
  create: { title: 'POST /contacts', method: 'POST', path: '/api/v1/contacts', body: CREATE_BODY, rate: 150 },
  patch: {
    title: 'PATCH /contacts/{id}',
    method: 'PATCH',
    path: '/api/v1/contacts/{id}',
    body: PATCH_BODY,
    patches: true,
    rate: 150,
  },
}
const CONNECTIONS = 16

function parseOptions(argv: string[]) {
  const flags = new Map(argv.map((arg) => [arg.replace(/^--/, '').split('=')[0] ?? '', arg.split('=')[1] ?? '']))
  for (const flag of flags.keys()) {
    if (!['contacts', 'seconds', 'rounds', 'kinds', 'lease', 'pin'].includes(flag)) {
      throw new Error(`unknown option --${flag} (known: --contacts --seconds --rounds --kinds --lease --pin)`)
    }
  }
  const number = (name: string, fallback: number, max: number) => {
    const value = Number(flags.get(name) ?? fallback)
    if (!Number.isInteger(value) || value < 1 || value > max) {
      throw new Error(`--${name} must be an integer from 1 to ${max}`)
    }
    return value
  }
  const kinds = (flags.get('kinds') ?? 'me,list,create,patch').split(',') as Kind[]
  if (kinds.some((kind) => !(kind in KINDS))) {
    throw new Error(`--kinds takes ${Object.keys(KINDS).join(', ')}`)
  }
  return {
    contacts: number('contacts', 100_000, 10_000_000),
    seconds: number('seconds', 5, 20),
    rounds: number('rounds', 3, 20),
    kinds,
    /** RATE_LIMIT_LEASE of the instances with REDIS_URL (1: a round trip per request, as before leases). */
    lease: number('lease', 10, 1000),
    /** Pin A to CPU 0 and B to CPU 1 (every thread, taskset -a), so the two never share a core. */
    pin: flags.has('pin'),
  }
}
type Options = ReturnType<typeof parseOptions>

/** CPU time (user + system) of a process in µs; 0 once it is gone. */
const cpuUs = (pid: number | undefined): number => cpuTicksOf(pid) * TICK_US

/** PostgreSQL backends serving the bench database, with their CPU so far (one born later starts at 0). */
async function backendCpu(admin: pg.Client, database: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>(
    'select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
    [database],
  )
  return new Map(rows.map((row) => [row.pid, cpuUs(row.pid)]))
}

function spentSince(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0
  for (const [pid, us] of after) {
    total += us - (before.get(pid) ?? 0)
  }
  return total
}

interface Redis$ {
  client: Redis
  pid: number | undefined
  url: string
  private: boolean
  stop(): Promise<void>
}

async function startRedis(): Promise<Redis$> {
  const shared = process.env.BENCH_REDIS_URL
  if (shared) {
    const client = new Redis(shared)
    return { client, pid: undefined, url: shared, private: false, stop: async () => client.disconnect() }
  }
  const port = await freePort()
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  )
  const url = `redis://127.0.0.1:${port}`
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 })
  client.on('error', () => {})
  for (let attempt = 0; ; attempt++) {
    try {
      await client.connect()
      await client.ping()
      break
    } catch (error) {
      if (attempt > 50 || child.exitCode !== null) {
        throw new Error(`redis-server did not start on port ${port}: ${String(error)}`)
      }
      client.disconnect()
      await sleep(100)
    }
  }
  return {
    client,
    pid: child.pid,
    url,
    private: true,
    async stop() {
      client.disconnect()
      child.kill('SIGTERM')
    },
  }
}

/** `INFO commandstats`: calls per command, and µs Redis spent running them (a script's own calls included). */
async function commandStats(redis: Redis): Promise<Record<string, { calls: number; usec: number }>> {
  const stats: Record<string, { calls: number; usec: number }> = {}
  for (const match of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    stats[match[1] as string] = { calls: Number(match[2]), usec: Number(match[3]) }
  }
  return stats
}

/** A load generator (bench/load.ts) in its own process: warm-up, then one measured run on 'go'. */
function startLoad(spec: LoadSpec) {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'bench/load.ts', JSON.stringify(spec)], {
    cwd: ROOT,
    stdio: 'pipe',
  })
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000)
  })
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]()
  const next = async (): Promise<string> => {
    const line = await lines.next()
    if (line.done) {
      throw new Error(`load generator ended early: ${stderr}`)
    }
    return line.value
  }
  const warm = next()
  return {
    pid: child.pid,
    warm,
    async go(): Promise<LoadResult> {
      child.stdin?.end('go\n')
      // Each round is announced by a {"start": n} line, then its result.
      for (;;) {
        const parsed = JSON.parse(await next()) as LoadResult | { start: number }
        if (!('start' in parsed)) {
          return parsed
        }
      }
    },
  }
}

interface Instance {
  name: string
  server: ServerProcess
}

interface Share {
  instance: string
  requests: number
  cpuUsPerRequest: number
  p50: number
  p99: number
  rps: number
  targetRate: number
  loaderCpuShare: number
}

interface RoundResult {
  shares: Share[]
  requests: number
  dbUsPerRequest: number
  redisUsPerRequest: number
  /** Of which running the scripts (commandstats `usec` of EVALSHA/EVAL), the rest being network I/O. */
  redisScriptUsPerRequest: number
  redisCallsPerRequest: Record<string, number>
}

interface Scaling {
  one: Summary
  two: Summary
  half: Summary
}

interface Context {
  options: Options
  backends: () => Promise<Map<number, number>>
  redis: Redis$
  headers: Record<string, string>
  seed: SeedResult
}

/**
 * One measured round: `rate` requests per second of `kind` split evenly over `instances`, each with
 * its own generator. Everything is read just before 'go' and as each generator reports.
 */
async function round(ctx: Context, kind: Kind, instances: Instance[], rate: number): Promise<RoundResult> {
  const spec = KINDS[kind]
  const loads = instances.map((instance) =>
    startLoad({
      url: instance.server.base,
      method: spec.method,
      path: spec.path,
      headers: ctx.headers,
      ...(spec.body === undefined ? {} : { body: spec.body }),
      ...(spec.patches ? { ids: ctx.seed.patchIds } : {}),
      connections: CONNECTIONS / instances.length,
      rate: rate / instances.length,
      warmupSeconds: 1,
      rounds: 1,
      seconds: ctx.options.seconds,
    }),
  )
  await Promise.all(loads.map((l) => l.warm))
  const dbBefore = await ctx.backends()
  const redisBefore = cpuUs(ctx.redis.pid)
  const callsBefore = await commandStats(ctx.redis.client)
  const serverBefore = instances.map((i) => cpuUs(i.server.child.pid))
  const loaderBefore = loads.map((l) => cpuUs(l.pid))
  const started = performance.now()
  const shares = await Promise.all(
    loads.map(async (l, index): Promise<Share> => {
      const result = await l.go()
      const serverUs = cpuUs(instances[index]?.server.child.pid) - (serverBefore[index] ?? 0)
      const loaderUs = cpuUs(l.pid) - (loaderBefore[index] ?? 0)
      if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
        throw new Error(
          `${kind} on ${instances[index]?.name}: ${JSON.stringify(result.statuses)}, ${result.errors} errors`,
        )
      }
      const requests = Math.round(result.rps * ctx.options.seconds)
      return {
        instance: instances[index]?.name ?? '?',
        requests,
        cpuUsPerRequest: serverUs / requests,
        p50: result.p50,
        p99: result.p99,
        rps: result.rps,
        targetRate: rate / instances.length,
        loaderCpuShare: loaderUs / ((performance.now() - started) * 1000),
      }
    }),
  )
  const dbUs = spentSince(dbBefore, await ctx.backends())
  const redisUs = cpuUs(ctx.redis.pid) - redisBefore
  const callsAfter = await commandStats(ctx.redis.client)
  const requests = shares.reduce((sum, s) => sum + s.requests, 0)
  const redisCallsPerRequest: Record<string, number> = {}
  let scriptUs = 0
  for (const [command, { calls, usec }] of Object.entries(callsAfter)) {
    const spent = calls - (callsBefore[command]?.calls ?? 0) - (command === 'info' ? 1 : 0) // our own INFO
    if (spent > 0) {
      redisCallsPerRequest[command] = spent / requests
    }
    if (command === 'evalsha' || command === 'eval') {
      scriptUs += usec - (callsBefore[command]?.usec ?? 0)
    }
  }
  return {
    shares,
    requests,
    dbUsPerRequest: dbUs / requests,
    redisUsPerRequest: ctx.redis.pid === undefined ? Number.NaN : redisUs / requests,
    redisScriptUsPerRequest: scriptUs / requests,
    redisCallsPerRequest,
  }
}

interface Summary {
  cpuUsPerRequest: number
  perInstance: number[]
  dbUsPerRequest: number
  redisUsPerRequest: number
  redisScriptUsPerRequest: number
  redisCallsPerRequest: Record<string, number>
  p50: number
  p99: number
  rps: number
  /** The worst round's share of one core used by a generator, and achieved over asked rate. */
  loaderCpuMax: number
  rateAchievedMin: number
  /**
   * The same medians over the rounds in which every generator got its asked rate served (≥ 97 %): on
   * a machine busy with other work, a starved service serves less and its CPU per request swells.
   */
  paced: { rounds: number; cpuUsPerRequest: number; perInstance: number[]; dbUsPerRequest: number }
  rounds: RoundResult[]
}

const PACED = 0.97

function cpuMedians(rounds: RoundResult[]) {
  const instanceNames = [...new Set(rounds.flatMap((r) => r.shares.map((s) => s.instance)))]
  const perInstance = instanceNames.map((name) =>
    median(rounds.map((r) => r.shares.find((s) => s.instance === name)?.cpuUsPerRequest ?? Number.NaN)),
  )
  return {
    rounds: rounds.length,
    cpuUsPerRequest: perInstance.reduce((a, b) => a + b, 0) / perInstance.length,
    perInstance,
    dbUsPerRequest: median(rounds.map((r) => r.dbUsPerRequest)),
  }
}

function summarize(rounds: RoundResult[]): Summary {
  const { cpuUsPerRequest, perInstance } = cpuMedians(rounds)
  const commands = [...new Set(rounds.flatMap((r) => Object.keys(r.redisCallsPerRequest)))]
  return {
    cpuUsPerRequest,
    perInstance,
    dbUsPerRequest: median(rounds.map((r) => r.dbUsPerRequest)),
    redisUsPerRequest: median(rounds.map((r) => r.redisUsPerRequest)),
    redisScriptUsPerRequest: median(rounds.map((r) => r.redisScriptUsPerRequest)),
    redisCallsPerRequest: Object.fromEntries(
      commands.map((c) => [c, median(rounds.map((r) => r.redisCallsPerRequest[c] ?? 0))]),
    ),
    p50: median(rounds.map((r) => median(r.shares.map((s) => s.p50)))),
    p99: median(rounds.map((r) => Math.max(...r.shares.map((s) => s.p99)))),
    rps: median(rounds.map((r) => r.shares.reduce((sum, s) => sum + s.rps, 0))),
    loaderCpuMax: Math.max(...rounds.flatMap((r) => r.shares.map((s) => s.loaderCpuShare))),
    rateAchievedMin: Math.min(...rounds.flatMap((r) => r.shares.map((s) => s.rps / s.targetRate))),
    paced: cpuMedians(rounds.filter((r) => r.shares.every((s) => s.rps >= PACED * s.targetRate))),
    rounds,
  }
}

/** Rounds of several setups interleaved (A B C, B C A, …), so a drift of the machine's load hits them alike. */
async function interleaved(
  ctx: Context,
  kind: Kind,
  setups: Array<{ name: string; instances: Instance[]; rate?: number }>,
): Promise<Record<string, Summary>> {
  const rounds = new Map<string, RoundResult[]>(setups.map((s) => [s.name, []]))
  // Each instance alone first, unrecorded: one that served less so far (B) has colder JIT-compiled code.
  for (const instance of new Set(setups.flatMap((s) => s.instances))) {
    await round(ctx, kind, [instance], KINDS[kind].rate)
  }
  for (let r = 0; r < ctx.options.rounds; r++) {
    for (let i = 0; i < setups.length; i++) {
      const setup = setups[(r + i) % setups.length] as (typeof setups)[number]
      rounds.get(setup.name)?.push(await round(ctx, kind, setup.instances, setup.rate ?? KINDS[kind].rate))
    }
  }
  return Object.fromEntries(setups.map((s) => [s.name, summarize(rounds.get(s.name) ?? [])]))
}

/** Signs up through an instance's web app and issues keys there (as test/multi-instance.test.ts does). */
async function webAccount(instance: ServerProcess) {
  const email = `capacity.${randomBytes(4).toString('hex')}@example.com`
  const { web, accountId } = await httpSignUp(instance.base, email, 'Capacity')
  return {
    async issue(): Promise<{ key: string; keyId: string }> {
      await web.get(`/app/${accountId}/settings/api`)
      const created = await web.post(`/app/${accountId}/settings/api/keys`, {
        name: 'K',
        scope: 'full',
        expires: 'never',
      })
      const shown = await web.get(created.location ?? '')
      const key = /value="(service_live_[A-Za-z0-9]{32})"/.exec(shown.body)?.[1]
      const me = await fetch(`${instance.base}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })
      const keyId = ((await me.json()) as { api_key?: { id: string } }).api_key?.id
      if (!key || !keyId) {
        throw new Error('issuing a key through the web app failed')
      }
      return { key, keyId }
    },
    async revoke(keyId: string): Promise<void> {
      await web.get(`/app/${accountId}/settings/api/keys/${keyId}/revoke`)
      const revoked = await web.post(`/app/${accountId}/settings/api/keys/${keyId}/revoke`, {})
      if (revoked.status !== 303) {
        throw new Error(`revoking through the web app answered ${revoked.status}`)
      }
    },
  }
}

const meStatus = async (instance: ServerProcess, key: string) => {
  const res = await fetch(`${instance.base}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })
  await res.arrayBuffer()
  return { status: res.status, ratelimit: res.headers.get('ratelimit') ?? '' }
}

/** Revoked through `through`'s web app: ms until `other` (which has the key cached) answers 401. */
async function revocationDelays(through: ServerProcess, other: ServerProcess, times: number): Promise<number[]> {
  const account = await webAccount(through)
  const delays: number[] = []
  for (let i = 0; i < times; i++) {
    const { key, keyId } = await account.issue()
    if ((await meStatus(other, key)).status !== 200) {
      throw new Error('the other instance refused a fresh key')
    }
    await account.revoke(keyId)
    const started = performance.now()
    let delay = Number.POSITIVE_INFINITY
    while (performance.now() - started < 3 * REVOCATION_BOUND_MS) {
      if ((await meStatus(other, key)).status === 401) {
        delay = performance.now() - started
        break
      }
      await sleep(5)
    }
    delays.push(delay)
  }
  return delays
}

/** 30 requests alternating between two instances on one account: how many the shared budget let through. */
async function budgetAcross(a: ServerProcess, b: ServerProcess, key: string) {
  const answers: Array<{ status: number; ratelimit: string }> = []
  for (let i = 0; i < 30; i++) {
    answers.push(await meStatus(i % 2 ? b : a, key))
  }
  return { ok: answers.filter((x) => x.status === 200).length, first: answers.slice(0, 4).map((x) => x.ratelimit) }
}

async function idleCost(ctx: Context, instance: Instance, seconds: number) {
  const db = await ctx.backends()
  const api = cpuUs(instance.server.child.pid)
  const redis = cpuUs(ctx.redis.pid)
  await sleep(seconds * 1000)
  return {
    apiUsPerSecond: (cpuUs(instance.server.child.pid) - api) / seconds,
    dbUsPerSecond: spentSince(db, await ctx.backends()) / seconds,
    redisUsPerSecond: (cpuUs(ctx.redis.pid) - redis) / seconds,
  }
}

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—')
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '—')
const calls = (c: Record<string, number>) =>
  Object.entries(c)
    .filter(([, n]) => n >= 0.005)
    .map(([command, n]) => `${command} ${n.toFixed(2)}`)
    .join(', ') || 'none'

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2))
  if (cliCommand()[0] !== 'dist/main.js') {
    throw new Error('dist/ is missing or older than src/: run `npm run build` (npm run bench:instances does)')
  }
  const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/two_instances_bench'
  const database = new URL(databaseUrl).pathname.slice(1)
  const admin = new pg.Client({ connectionString: databaseUrl.replace(/\/[^/]+$/, '/postgres') })
  await admin.connect()
  const servers: ServerProcess[] = []
  let redis: Redis$ | undefined
  const started = new Date()
  const loadBefore = os.loadavg()
  try {
    await admin.query(`drop database if exists ${database} with (force)`)
    await admin.query(`create database ${database}`)
    const plan = {
      bigContacts: options.contacts,
      deepPosition: options.contacts,
      smallAccounts: 10,
      contactsPerSmallAccount: 20,
    }
    const seed = await seedPostgres(databaseUrl, plan)
    log(`seeded ${options.contacts.toLocaleString('en-US')} contacts in ${seed.seconds.toFixed(1)} s`)
    redis = await startRedis()
    const postgresVersion = (await admin.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]
      ?.v
    const redisVersion = /redis_version:(\S+)/.exec(await redis.client.info('server'))?.[1]
    const machine = {
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.availableParallelism(),
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      postgres: postgresVersion,
      redis: `${redisVersion}${redis.private ? ' (private to this run)' : ' (shared: counts include other clients)'}`,
    }
    log(
      `machine: ${machine.cores} × ${machine.cpu}, ${machine.memoryGiB} GiB, Node ${machine.node}, PostgreSQL ${machine.postgres}, Redis ${machine.redis}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
    )

    const secret = randomBytes(32).toString('hex')
    const common = { DATABASE_URL: databaseUrl, SECRET: secret, WEBHOOK_WORKER: 'off', HOST: '127.0.0.1' }
    // The limit is on and checked on every request, but never refuses the load.
    const unlimited = { RATE_LIMIT_PER_SECOND: '1000000', RATE_LIMIT_BURST: '1000000' }
    const start = async (name: string, env: Record<string, string>): Promise<Instance> => {
      const server = await startServerProcess({ ...common, ...env })
      servers.push(server)
      return { name, server }
    }
    const redisEnv = { REDIS_URL: redis.url, RATE_LIMIT_LEASE: String(options.lease) }
    const [a, b, c, d, e] = await Promise.all([
      start('A', { ...redisEnv, ...unlimited }),
      start('B', { ...redisEnv, ...unlimited }),
      start('C', unlimited),
      start('D', { RATE_LIMIT_PER_SECOND: '0' }),
      start('E', { ...redisEnv, ...unlimited, RATE_LIMIT_LEASE: '1' }),
    ])
    if (!a || !b || !c || !d || !e) {
      throw new Error('an instance did not start')
    }
    if (options.pin) {
      for (const [instance, cpu] of [
        [a, 0],
        [b, 1],
      ] as const) {
        const pinned = spawnSync('taskset', ['-a', '-pc', String(cpu), String(instance.server.child.pid)])
        if (pinned.status !== 0) {
          throw new Error(`taskset failed: ${pinned.stderr}`)
        }
      }
      log('  pinned: A to CPU 0, B to CPU 1 (all threads)')
    }
    const ctx: Context = {
      options,
      backends: () => backendCpu(admin, database),
      redis,
      headers: { authorization: `Bearer ${seed.big.key}` },
      seed,
    }

    log(
      `\n1. One instance against two, same total load (paced; ${CONNECTIONS} connections in all), ${options.rounds} × ${options.seconds} s each, interleaved`,
    )
    const scaling: Record<string, Scaling> = {}
    for (const kind of options.kinds) {
      const result = await interleaved(ctx, kind, [
        { name: 'one', instances: [a] },
        { name: 'two', instances: [a, b] },
        // The control: one instance at what each of the two gets, to tell sharing from load per process.
        { name: 'half', instances: [a], rate: KINDS[kind].rate / 2 },
      ])
      scaling[kind] = { one: result.one as Summary, two: result.two as Summary, half: result.half as Summary }
      const { one, two } = scaling[kind]
      log(
        `  ${kind.padEnd(7)} one ${f0(one.cpuUsPerRequest)} µs/req, two ${two.perInstance.map(f0).join(' / ')} µs/req (×${(two.cpuUsPerRequest / one.cpuUsPerRequest).toFixed(3)}), one at half the rate ${f0(scaling[kind].half.cpuUsPerRequest)}; db ${f0(one.dbUsPerRequest)} / ${f0(two.dbUsPerRequest)}; redis ${f2(one.redisUsPerRequest)} µs, ${calls(one.redisCallsPerRequest)}`,
      )
    }

    log(
      `\n2. The rate-limit check: A (REDIS_URL, lease ${options.lease}) against E (REDIS_URL, lease 1), C (in memory) and D (off), interleaved`,
    )
    const overhead: Record<string, Record<string, Summary>> = {}
    for (const kind of options.kinds.filter((k) => k === 'me' || k === 'list')) {
      overhead[kind] = await interleaved(ctx, kind, [
        { name: 'redis', instances: [a] },
        { name: 'redis-exact', instances: [e] },
        { name: 'memory', instances: [c] },
        { name: 'off', instances: [d] },
      ])
      const o = overhead[kind] as Record<'redis' | 'redis-exact' | 'memory' | 'off', Summary>
      log(
        `  ${kind.padEnd(7)} CPU µs/req redis ${f0(o.redis.cpuUsPerRequest)}, redis lease 1 ${f0(o['redis-exact'].cpuUsPerRequest)} (${calls(o['redis-exact'].redisCallsPerRequest)}), memory ${f0(o.memory.cpuUsPerRequest)}, off ${f0(o.off.cpuUsPerRequest)}; p50 ms ${f2(o.redis.p50)} / ${f2(o.memory.p50)} / ${f2(o.off.p50)}; p99 ms ${f2(o.redis.p99)} / ${f2(o.memory.p99)} / ${f2(o.off.p99)}`,
      )
    }

    log('\n3. Sharing')
    const revocations = await revocationDelays(a.server, b.server, 3)
    log(`  revoked through A's web app, refused by B after ${revocations.map((ms) => ms.toFixed(0)).join(', ')} ms`)
    const small = { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '20' }
    const [p, q, x, y] = await Promise.all([
      start('P', { ...redisEnv, ...small }),
      start('Q', { ...redisEnv, ...small }),
      start('X', small),
      start('Y', small),
    ])
    if (!p || !q || !x || !y) {
      throw new Error('an instance did not start')
    }
    const sharedBudget = await budgetAcross(p.server, q.server, seed.smallKeys[0] ?? '')
    const separateBudget = await budgetAcross(x.server, y.server, seed.smallKeys[1] ?? '')
    log(
      `  budget 1/s, burst 20; 30 requests alternating: with REDIS_URL ${sharedBudget.ok} served (RateLimit ${sharedBudget.first.join(' | ')}); without (control) ${separateBudget.ok} served`,
    )
    for (const instance of [p, q, x, y]) {
      await instance.server.stop()
    }

    log('\n4. Idle cost: A (WEBHOOK_WORKER=off) over 5 s, and W (on) over three 5 s windows')
    const idleA = await idleCost(ctx, a, 5)
    const w = await start('W', { ...redisEnv, ...unlimited, WEBHOOK_WORKER: 'on' })
    // W first walks the events the writes above left (with no endpoint, nothing to deliver): the
    // last window is the idle polling alone.
    const windows = []
    for (let i = 0; i < 3; i++) {
      windows.push(await idleCost(ctx, w, 5))
    }
    const idleW = windows[windows.length - 1] as Awaited<ReturnType<typeof idleCost>>
    log(
      `  A: ${f0(idleA.apiUsPerSecond)} µs/s, db ${f0(idleA.dbUsPerSecond)} µs/s; W: ${windows.map((x) => `${f0(x.apiUsPerSecond)} µs/s, db ${f0(x.dbUsPerSecond)} µs/s`).join(' → ')}`,
    )

    const loadAfter = os.loadavg()
    const report = {
      startedAt: started.toISOString(),
      minutes: (Date.now() - started.getTime()) / 60_000,
      machine: { ...machine, loadAverageBefore: loadBefore, loadAverageAfter: loadAfter },
      options,
      rates: Object.fromEntries(options.kinds.map((k) => [k, KINDS[k].rate])),
      scaling,
      overhead,
      sharing: { revocationDelaysMs: revocations, boundMs: REVOCATION_BOUND_MS, sharedBudget, separateBudget },
      idle: { apiOnly: idleA, withWorker: idleW },
    }
    const dir = path.join(ROOT, 'bench', 'results')
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `two-instances-${report.startedAt.replace(/[:.]/g, '-')}.json`)
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`)
    printReport(report, options)
    console.log(`results: ${path.relative(ROOT, file)}`)
    const failed = checks(report).filter((check) => !check.met)
    for (const check of checks(report)) {
      console.log(`${check.met ? ' ok' : 'MISS'}  ${check.name}: ${check.detail}`)
    }
    process.exitCode = failed.some((check) => check.hard) ? 1 : 0
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
    await redis?.stop()
    await admin.query(`drop database if exists ${database} with (force)`).catch(() => {})
    await admin.end()
  }
}

type Report = {
  scaling: Record<string, Scaling>
  overhead: Record<string, Record<string, Summary>>
  sharing: {
    revocationDelaysMs: number[]
    boundMs: number
    sharedBudget: { ok: number }
    separateBudget: { ok: number }
  }
  idle: Record<string, { apiUsPerSecond: number; dbUsPerSecond: number; redisUsPerSecond: number }>
  machine: { loadAverageBefore: number[]; loadAverageAfter: number[] }
  startedAt: string
  minutes: number
}

function printReport(report: Report, options: Options): void {
  const lines = [
    '',
    '| kind | req/s served (one / two) | one: API µs/req | two: API µs/req (A / B) | two / one | two / one, paced rounds | one at half the rate: API µs/req | two / half | PostgreSQL µs/req (one / two) | Redis µs/req (script) | Redis commands/req | p50 / p99 ms (one) | p50 / p99 ms (two) | generator CPU max | rate reached min |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|',
  ]
  for (const kind of options.kinds) {
    const s = report.scaling[kind]
    if (!s) {
      continue
    }
    const { one, two, half } = s
    lines.push(
      `| ${KINDS[kind].title} | ${f0(one.rps)} / ${f0(two.rps)} | ${f0(one.cpuUsPerRequest)} | ${f0(two.cpuUsPerRequest)} (${two.perInstance.map(f0).join(' / ')}) | ${(two.cpuUsPerRequest / one.cpuUsPerRequest).toFixed(3)} | ${one.paced.rounds && two.paced.rounds ? `${(two.paced.cpuUsPerRequest / one.paced.cpuUsPerRequest).toFixed(3)} (${one.paced.rounds} + ${two.paced.rounds})` : '—'} | ${f0(half.cpuUsPerRequest)} | ${(two.cpuUsPerRequest / half.cpuUsPerRequest).toFixed(3)} | ${f0(one.dbUsPerRequest)} / ${f0(two.dbUsPerRequest)} | ${f2(one.redisUsPerRequest)} (${f2(one.redisScriptUsPerRequest)}) | ${calls(one.redisCallsPerRequest)} | ${f2(one.p50)} / ${f2(one.p99)} | ${f2(two.p50)} / ${f2(two.p99)} | ${(Math.max(one.loaderCpuMax, two.loaderCpuMax) * 100).toFixed(0)} % | ${(Math.min(one.rateAchievedMin, two.rateAchievedMin) * 100).toFixed(1)} % |`,
    )
  }
  lines.push(
    '',
    '| kind | rate limit | API µs/req | Redis µs/req (script) | Redis commands/req | p50 ms | p99 ms |',
    '|---|---|--:|--:|---|--:|--:|',
  )
  for (const [kind, setups] of Object.entries(report.overhead)) {
    for (const [name, s] of Object.entries(setups)) {
      lines.push(
        `| ${KINDS[kind as Kind].title} | ${name === 'redis' ? `Redis, lease ${options.lease}` : name === 'redis-exact' ? 'Redis, lease 1' : name === 'memory' ? 'in memory' : 'off'} | ${f0(s.cpuUsPerRequest)} | ${f2(s.redisUsPerRequest)} (${f2(s.redisScriptUsPerRequest)}) | ${calls(s.redisCallsPerRequest)} | ${f2(s.p50)} | ${f2(s.p99)} |`,
      )
    }
  }
  const { idle } = report
  lines.push(
    '',
    `idle, per second: API-only instance ${f0(idle.apiOnly?.apiUsPerSecond ?? Number.NaN)} µs (db ${f0(idle.apiOnly?.dbUsPerSecond ?? Number.NaN)}); with the webhook worker ${f0(idle.withWorker?.apiUsPerSecond ?? Number.NaN)} µs (db ${f0(idle.withWorker?.dbUsPerSecond ?? Number.NaN)}, Redis ${f0(idle.withWorker?.redisUsPerSecond ?? Number.NaN)})`,
    `load average before ${report.machine.loadAverageBefore.map((l) => l.toFixed(2)).join(' ')}, after ${report.machine.loadAverageAfter.map((l) => l.toFixed(2)).join(' ')}; ${report.minutes.toFixed(1)} min`,
    'generator CPU max: the busiest load generator’s share of one core in any round; rate reached min: the lowest achieved/asked rate of any generator in any round (below ~97 %, something saturated and the row is not a paced comparison).',
    '',
  )
  console.log(lines.join('\n'))
}

function checks(report: Report) {
  const result: Array<{ name: string; met: boolean; hard: boolean; detail: string }> = []
  for (const [kind, { one, two, half }] of Object.entries(report.scaling)) {
    const title = KINDS[kind as Kind].title
    const ratio = two.cpuUsPerRequest / one.cpuUsPerRequest
    const paced = one.paced.rounds > 0 && two.paced.rounds > 0
    const pacedRatio = two.paced.cpuUsPerRequest / one.paced.cpuUsPerRequest
    result.push({
      name: `${title}: CPU per request, two instances within 10 % of one (rounds served at the asked rate)`,
      met: paced && Math.abs(pacedRatio - 1) <= 0.1,
      hard: false, // a figure, not a correctness check: a busy machine may miss it
      detail: paced
        ? `×${pacedRatio.toFixed(3)} over ${one.paced.rounds} + ${two.paced.rounds} rounds (${f0(one.paced.cpuUsPerRequest)} → ${two.paced.perInstance.map(f0).join(' / ')} µs); all rounds ×${ratio.toFixed(3)}`
        : `no round of ${one.paced.rounds === 0 ? 'one' : 'two'} served the asked rate; all rounds ×${ratio.toFixed(3)} (${f0(one.cpuUsPerRequest)} → ${two.perInstance.map(f0).join(' / ')} µs)`,
    })
    result.push({
      name: `${title}: CPU per request, two instances within 10 % of one alone at the same load per process (half the rate)`,
      met: Math.abs(two.cpuUsPerRequest / half.cpuUsPerRequest - 1) <= 0.1,
      hard: false,
      detail: `×${(two.cpuUsPerRequest / half.cpuUsPerRequest).toFixed(3)} (${f0(half.cpuUsPerRequest)} → ${two.perInstance.map(f0).join(' / ')} µs)`,
    })
    const loader = Math.max(one.loaderCpuMax, two.loaderCpuMax)
    result.push({
      name: `${title}: the load generators are not the limit (each under 70 % of a core)`,
      met: loader < 0.7,
      hard: false,
      detail: `busiest at ${(loader * 100).toFixed(0)} % of a core`,
    })
    const reached = Math.min(one.rateAchievedMin, two.rateAchievedMin)
    result.push({
      name: `${title}: the asked rate was served in every round (≥ ${PACED * 100} %)`,
      met: reached >= PACED,
      hard: false,
      detail: `${(reached * 100).toFixed(1)} % at worst${reached < PACED ? ' (the service, starved of CPU by other work, fell behind)' : ''}`,
    })
  }
  const { sharing } = report
  const worst = Math.max(...sharing.revocationDelaysMs)
  result.push({
    name: `a key revoked through A is refused by B within ${sharing.boundMs} ms`,
    met: worst < sharing.boundMs,
    hard: true,
    detail: `${sharing.revocationDelaysMs.map((ms) => ms.toFixed(0)).join(', ')} ms`,
  })
  result.push({
    name: 'one budget across two instances with REDIS_URL (burst 20: 20–22 of 30 served; the control without: 30)',
    met: sharing.sharedBudget.ok >= 20 && sharing.sharedBudget.ok <= 22 && sharing.separateBudget.ok === 30,
    hard: true,
    detail: `${sharing.sharedBudget.ok} with, ${sharing.separateBudget.ok} without`,
  })
  return result
}

main().catch((error: unknown) => {
  log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  process.exitCode = 1
})
