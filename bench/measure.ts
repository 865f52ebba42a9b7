// Measuring one scenario against a server: the load generator's rounds with the server's CPU and
// memory read from /proc meanwhile, and the same load against raw node:http answering alike.
import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { LoadResult, LoadSpec } from './load.js'
import {
  CLOCK_TICKS,
  cpuMsOf,
  cpuTicksOf,
  freePort,
  log,
  median,
  RESULTS,
  rssOf,
  spawnNode,
  stopProcess,
  waitForHttp,
} from './processes.js'
import { render } from './template.js'

export type Db = 'sqlite' | 'postgres'
export type Mode = 'serve' | 'api-only'

/** The core the server under test runs on, and the load generator's. */
export const SERVER_CORE = 0
export const LOAD_CORE = 1

/** What a measurement takes from the bench's options. */
export interface MeasureOptions {
  rounds: number
  warmup: number
  seconds: number
  connections: number
  engine: 'wrk' | 'autocannon'
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
export async function load(
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
  let dbTicksBefore = new Map<number, number>()
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
        dbTicksBefore = new Map(backendPids.map((pid) => [pid, cpuTicksOf(pid)]))
      } else {
        const serverMs = cpuMsOf(serverPids) - cpuBefore
        const dbMs = backendCpuMsSince(dbTicksBefore)
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
export interface Measured {
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

export interface ScenarioResult extends Measured {
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
  /**
   * The least code doing the same database work (bench/minimal-server.mjs: same driver, same
   * settings, no framework), measured right after raw; the anchor of a request's cost.
   */
  minimal?: Measured
  /** Our req/s over the minimal server's. */
  minimalRatio?: number
}

/** The scenarios bench/minimal-server.mjs serves. */
export const MINIMAL_SCENARIOS: ReadonlySet<string> = new Set(['me', 'list', 'list-deep', 'create', 'patch'])

/**
 * The CPU the backends used since `before` (ticks by pid). A backend that ended meanwhile is left
 * out, not counted as going back to 0: another server's pool closes its idle connections while this
 * one is measured (the minimal server's, whose rounds alternate with ours).
 */
function backendCpuMsSince(before: ReadonlyMap<number, number>): number {
  let ticks = 0
  for (const [pid, then] of before) {
    const now = cpuTicksOf(pid)
    if (now >= then) {
      ticks += now - then
    }
  }
  return (ticks * 1000) / CLOCK_TICKS
}

/** The raw baseline counts only when its server was the limit: ≥ 95 % of its core. */
export const RAW_MIN_BUSY = 0.95

export interface Request {
  method: LoadSpec['method']
  path: string
  /** The status every answer under load must have. */
  status: number
  body?: string
  ids?: string[]
  headers: Record<string, string>
}

/** A server under load: its URL, its process (for its CPU) and what else to count with it. */
export interface MeasureTarget {
  url: string
  pid: number | undefined
  /** The PostgreSQL backends' pids, read before each round: their CPU is the request's too. */
  beforeEach?: () => Promise<number[]>
}

export async function measure(
  options: MeasureOptions,
  taskset: boolean,
  target: MeasureTarget,
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
  const answeredBefore = await answeredByStatus(target.url)
  const results = await load(spec, taskset, target.pid, target.beforeEach ?? (async () => []))
  const answered = statusesSince(answeredBefore, await answeredByStatus(target.url))
  for (const result of results) {
    if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
      const statuses = { ...result.statuses, ...answered }
      throw new Error(
        `${label}: ${result.non2xx} error statuses (${JSON.stringify(statuses)}), ${result.errors} errors, ${result.timeouts} timeouts; one more request now: ${await sampleAnswer(target.url, request)}`,
      )
    }
  }
  // wrk counts only statuses ≥ 400: a 304 that turned into 200s would measure full pages unseen.
  // The server's own count tells (a server without /metrics has none to check).
  const others = Object.entries(answered).filter(([status]) => status !== String(request.status))
  if (others.length > 0) {
    throw new Error(
      `${label}: answered ${JSON.stringify(answered)} under load, expected only ${request.status}; one more request now: ${await sampleAnswer(target.url, request)}`,
    )
  }
  const summary = summarize(results, [loadBefore, os.loadavg()[0] ?? 0])
  log(
    `  ${label.padEnd(28)} ${Math.round(summary.rps).toString().padStart(6)} req/s  p50 ${summary.p50.toFixed(2)} ms  p99 ${summary.p99.toFixed(2)} ms  rss ${(summary.rss / 2 ** 20).toFixed(0)} MiB  cpu ${summary.cpuUsPerRequest.toFixed(0)} µs/req${summary.dbCpuUsPerRequest > 0 ? ` (db ${summary.dbCpuUsPerRequest.toFixed(0)})` : ''}  core ${(summary.busy * 100).toFixed(0)} %, ${summary.engine} ${(summary.generatorBusy * 100).toFixed(0)} %`,
  )
  return summary
}

/** Medians over rounds (the peak for RSS). */
function summarize(results: Round[], loadAverage: [number, number]): Measured {
  return {
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
    loadAverage,
  }
}

/**
 * Servers measured round by round in turn (A B A B …), each round with its warm-up, so that a drift
 * of the machine or the database through the run (a cache warming, a checkpoint) falls on all of
 * them alike; each summary is over that server's rounds.
 */
export async function measureAlternately(
  options: MeasureOptions,
  taskset: boolean,
  servers: ReadonlyArray<{ target: MeasureTarget; label: string }>,
  request: Request,
): Promise<Measured[]> {
  const measured: Measured[][] = servers.map(() => [])
  for (let round = 1; round <= options.rounds; round++) {
    for (const [index, { target, label }] of servers.entries()) {
      measured[index]?.push(await measure(options, taskset, target, request, `${label} (round ${round})`, 1))
    }
  }
  return measured.map((rounds) =>
    summarize(
      rounds.flatMap((one) => one.rounds),
      [rounds[0]?.loadAverage[0] ?? 0, rounds.at(-1)?.loadAverage[1] ?? 0],
    ),
  )
}

/** One answer of the server, as the raw baseline will repeat it. */
export interface Captured {
  status: number
  headers: Array<[string, string]>
  body: Buffer
}

/** Headers node:http writes itself (or that describe the connection, not the answer). */
const OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length'])

/** Sends one request of the scenario, its templates filled with n = 0. */
async function send(base: string, request: Request, tag: string): Promise<Response> {
  const first = render(request.path, request.body, request.ids ?? [], `${tag}${randomBytes(3).toString('hex')}`, 0)
  return fetch(`${base}${first.path}`, {
    method: request.method,
    headers: { ...request.headers, ...(first.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(first.body === undefined ? {} : { body: first.body }),
  })
}

/**
 * The server's answers so far by status, from its own http_requests_total (wrk counts error
 * statuses, not which), its /metrics requests left out; empty for a server without /metrics
 * (raw node:http, the minimal server).
 */
async function answeredByStatus(base: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>()
  try {
    const response = await fetch(`${base}/metrics`)
    const text = response.ok ? await response.text() : ''
    for (const [, labels = '', value] of text.matchAll(/^http_requests_total\{([^}]*)\} (\d+)$/gm)) {
      const status = /status="(\d+)"/.exec(labels)?.[1]
      if (status !== undefined && !labels.includes('route="/metrics"')) {
        counts.set(status, (counts.get(status) ?? 0) + Number(value))
      }
    }
  } catch {
    // No metrics: the statuses stay unknown.
  }
  return counts
}

/** The answers between two counts, by status. */
function statusesSince(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const statuses: Record<string, number> = {}
  for (const [status, count] of after) {
    const more = count - (before.get(status) ?? 0)
    if (more > 0) {
      statuses[status] = more
    }
  }
  return statuses
}

/** The status and the start of the body of one more request: wrk counts error statuses, not which. */
async function sampleAnswer(base: string, request: Request): Promise<string> {
  try {
    const res = await send(base, request, 'sample')
    return `${res.status} ${(await res.text()).slice(0, 300)}`
  } catch (error) {
    return String(error)
  }
}

/** Sends one request of the scenario and checks its status and body; returns the answer. */
export async function probe(base: string, label: string, request: Request): Promise<Captured> {
  const res = await send(base, request, 'probe')
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== request.status) {
    throw new Error(`${label}: status ${res.status}, expected ${request.status}: ${body.toString().slice(0, 300)}`)
  }
  return { status: res.status, headers: [...res.headers].filter(([name]) => !OWN_HEADERS.has(name)), body }
}

/** Raw node:http (bench/raw-server.mjs) answering every request with `answer`, measured with the same load. */
export async function measureRaw(
  options: MeasureOptions,
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
  const baseline = await startBaseline(['bench/raw-server.mjs', file], taskset, cleanups)
  try {
    // The same path, headers and bodies as ours: the same bytes on the wire both ways.
    const result = await measure(options, taskset, { url: baseline.base, pid: baseline.pid }, request, label)
    return { ...result, valid: result.busy >= RAW_MIN_BUSY }
  } finally {
    await baseline.stop()
    rmSync(file, { force: true })
  }
}

/** A baseline server (a script taking its port last) on the server's core, once it answers HTTP. */
async function startBaseline(argv: string[], taskset: boolean, cleanups: Array<() => Promise<void>>) {
  const port = await freePort()
  const server = spawnNode([...argv, String(port)], SERVER_CORE, taskset, process.env)
  const stop = () => stopProcess(server)
  cleanups.push(stop)
  let serverErr = ''
  server.stderr?.on('data', (chunk) => {
    serverErr = (serverErr + chunk).slice(-4000)
  })
  const base = `http://127.0.0.1:${port}`
  try {
    // Any answer will do (the minimal server's is a 401 without a key).
    await waitForHttp(`${base}/`, server, () => serverErr)
  } catch (error) {
    await stop()
    throw error
  }
  return { base, pid: server.pid, stop }
}

/**
 * The minimal same-work server (bench/minimal-server.mjs) on the same database, started beside ours
 * (on the same core, idle while the other is measured) and checked on one answer: it has no /metrics.
 */
export async function startMinimal(
  taskset: boolean,
  database: { url: string; secret: string; backends: (() => Promise<number[]>) | undefined },
  request: Request,
  label: string,
  cleanups: Array<() => Promise<void>>,
): Promise<{ target: MeasureTarget; stop: () => Promise<void> }> {
  const baseline = await startBaseline(['bench/minimal-server.mjs', database.url, database.secret], taskset, cleanups)
  await probe(baseline.base, label, request).catch(async (error: unknown) => {
    await baseline.stop()
    throw error
  })
  const target = { url: baseline.base, pid: baseline.pid }
  return { target: database.backends ? { ...target, beforeEach: database.backends } : target, stop: baseline.stop }
}
