// The noisy neighbour, CSV edition: CSV imports and exports against another tenant's reads or writes
// (method and options: bench/README.md#import-neighbour).
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { Worker } from 'node:worker_threads'
import { freePort } from '../test/processes.js'
import { httpSignUp } from '../test/web-client.js'

const { values: args } = parseArgs({
  options: {
    root: { type: 'string', default: process.cwd() },
    imports: { type: 'string', default: '3' },
    exports: { type: 'string', default: '3' },
    rows: { type: 'string', default: '10000' },
    'idle-seconds': { type: 'string', default: '5' },
    'database-url': { type: 'string' },
    built: { type: 'boolean', default: false },
    /** B writes (a PATCH of one of its contacts, a new first name each time) instead of reading a list page. */
    'b-writes': { type: 'boolean', default: false },
    /** Node flags for the server, space-separated (e.g. "--trace-gc" or "--cpu-prof --cpu-prof-dir=DIR"). */
    'server-flags': { type: 'string', default: '' },
  },
})
const root = path.resolve(args.root)
const rows = Number(args.rows)

const dataDir = mkdtempSync(path.join(tmpdir(), 'import-neighbour-'))
const port = await freePort()
const base = `http://127.0.0.1:${port}`
const env = {
  ...process.env,
  PORT: String(port),
  DATABASE_URL: args['database-url'] ?? `sqlite:${path.join(dataDir, 'contacts.sqlite')}`,
  SECRET: 'bench-secret-0123456789abcdef0123456789abcdef',
  RATE_LIMIT_PER_SECOND: '0',
  IMPORTS_PER_HOUR: '10000',
  LOG_LEVEL: 'warn',
}

/**
 * Loaded into the server with --import: every 10 ms timer tick measures the main thread's CPU since
 * the previous tick (process.threadCpuUsage, Node 23.9+), and on SIGUSR2 writes the longest such
 * stretch since the last signal to PROBE_FILE. A block of the event loop in CPU, not wall time: a
 * process that waits for a core at a high load does not inflate it.
 */
const probeFile = path.join(dataDir, 'loop-cpu.json')
const LOOP_CPU_PROBE = `
import { writeFileSync } from 'node:fs'
let last = process.threadCpuUsage()
let longest = 0
setInterval(() => {
  const now = process.threadCpuUsage()
  longest = Math.max(longest, (now.user - last.user + now.system - last.system) / 1000)
  last = now
}, 10).unref()
process.on('SIGUSR2', () => {
  writeFileSync(${JSON.stringify(probeFile)}, JSON.stringify({ longest }))
  longest = 0
})
`

function cli(argv: string[], flags: string[] = []): ChildProcess {
  const main = args.built ? ['dist/main.js'] : ['--import', 'tsx', 'src/main.ts']
  return spawn(process.execPath, [...flags, ...main, ...argv], {
    cwd: root,
    env,
    stdio: 'pipe',
  })
}

async function run(argv: string[]): Promise<string> {
  const child = cli(argv)
  let out = ''
  child.stdout?.on('data', (chunk) => {
    out += chunk
  })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) {
    throw new Error(`${argv.join(' ')} exited ${code}: ${out}`)
  }
  return out
}

const server = cli(
  ['serve'],
  [
    '--import',
    `data:text/javascript,${encodeURIComponent(LOOP_CPU_PROBE)}`,
    ...args['server-flags'].split(' ').filter(Boolean),
  ],
)
let serverLog = ''
server.stdout?.on('data', (chunk) => {
  serverLog += chunk
})
await new Promise<void>((resolve, reject) => {
  let log = ''
  const timer = setTimeout(() => reject(new Error(`no start: ${log}`)), 60_000)
  const hear = (chunk: Buffer) => {
    log += chunk
    if (log.includes('listening on')) {
      clearTimeout(timer)
      resolve()
    }
  }
  server.stdout?.on('data', hear)
  server.stderr?.on('data', hear)
})

// Tenant A: a person signed up in the web app. Tenant B: an account with an API key and 200 contacts.
const { web: a, accountId: accountA } = await httpSignUp(base, 'a@example.com', 'A')
const keyB = (JSON.parse(await run(['accounts', 'create', '--name', 'B', '--json'])) as { api_key: { secret: string } })
  .api_key.secret
const authB = { authorization: `Bearer ${keyB}` }
for (let i = 0; i < 200; i++) {
  await fetch(`${base}/api/v1/contacts`, {
    method: 'POST',
    headers: { ...authB, 'content-type': 'application/json' },
    body: JSON.stringify({ email: `b${i}@example.com`, first_name: `B ${i}`, tags: ['b'] }),
  })
}

const contactB = (
  (await (await fetch(`${base}/api/v1/contacts?limit=1`, { headers: authB })).json()) as {
    contacts: Array<{ id: string }>
  }
).contacts[0]?.id

/** A file of `rows` new contacts, about 400 bytes a row (4 MB for 10,000). */
function csvFile(round: number): string {
  const lines = ['email,first_name,last_name,company,job_title,tags,custom_fields']
  const pad = 'x'.repeat(180)
  for (let i = 0; i < rows; i++) {
    lines.push(
      `a${round}-${i}@example.com,First ${i},Last ${i},Company ${i % 97},Title ${pad},tag${i % 7};bulk,"{""n"":${i},""note"":""${pad.slice(0, 60)}""}"`,
    )
  }
  return lines.join('\n')
}

/**
 * The server's CPU time so far (ms), its main thread's (the event loop's: /proc/PID/task/PID) and the
 * whole process's (worker threads and V8's helpers included). Unlike latencies, these do not grow
 * with the machine's load; /proc counts in clock ticks (10 ms).
 */
function serverCpu(): { mainMs: number; processMs: number } {
  const ticks = (file: string) => {
    const fields = readFileSync(file, 'utf8').split(') ')[1]?.split(' ') ?? []
    return (Number(fields[11]) + Number(fields[12])) * 10
  }
  return { mainMs: ticks(`/proc/${server.pid}/task/${server.pid}/stat`), processMs: ticks(`/proc/${server.pid}/stat`) }
}

async function loopLag(): Promise<{ maxMs: number; cpuMs: number }> {
  const text = await (await fetch(`${base}/metrics`)).text()
  const max = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1]
  rmSync(probeFile, { force: true })
  server.kill('SIGUSR2')
  let probe: { longest: number } | undefined
  for (let i = 0; i < 200 && !probe; i++) {
    await sleep(10)
    try {
      probe = JSON.parse(readFileSync(probeFile, 'utf8')) as { longest: number }
    } catch {}
  }
  return { maxMs: Number(max) * 1000, cpuMs: probe?.longest ?? Number.NaN }
}

/**
 * Tenant B's client, on a thread of its own: one list read (or with --b-writes one PATCH) at a time, a 5 ms pause between,
 * until told to stop; then it posts every latency (ms). Run on this script's event loop, B's
 * timings also counted A's client work here (building each 4 MB file, reading 12 MB exports).
 */
const B_CLIENT = `
const { parentPort, workerData } = require('node:worker_threads')
let over = false
parentPort.once('message', () => { over = true })
;(async () => {
  const samples = []
  while (!over) {
    const started = performance.now()
    const res = await fetch(workerData.url, workerData.patch
      ? { method: 'PATCH', headers: { authorization: workerData.authorization, 'content-type': 'application/json' }, body: JSON.stringify({ first_name: 'B ' + samples.length }) }
      : { headers: { authorization: workerData.authorization } })
    await res.arrayBuffer()
    samples.push(performance.now() - started)
    if (res.status !== 200) {
      parentPort.postMessage({ error: 'B got ' + res.status })
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  parentPort.postMessage({ samples })
})()
`

/** B's sequential list reads until `done` settles; latencies in ms. */
async function measureB(done: Promise<unknown>): Promise<number[]> {
  const client = new Worker(B_CLIENT, {
    eval: true,
    workerData: {
      url: args['b-writes'] ? `${base}/api/v1/contacts/${contactB}` : `${base}/api/v1/contacts?limit=50`,
      authorization: authB.authorization,
      patch: args['b-writes'],
    },
  })
  const answer = new Promise<{ samples?: number[]; error?: string }>((resolve, reject) => {
    client.once('message', resolve)
    client.once('error', reject)
  })
  await Promise.race([done.catch(() => {}), answer])
  client.postMessage('stop')
  const { samples, error } = await answer
  await client.terminate()
  if (error || !samples) {
    throw new Error(error ?? 'no samples')
  }
  return samples
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
let cpuMark = { mainMs: 0, processMs: 0 }
/** The server's CPU since the last call, as text: the main thread's share of the process's. */
function cpuSince(): string {
  const now = serverCpu()
  const main = now.mainMs - cpuMark.mainMs
  const all = now.processMs - cpuMark.processMs
  cpuMark = now
  return `server CPU ${all} ms, main thread ${main} ms (${all > 0 ? Math.round((100 * main) / all) : 0} %)`
}

function summary(name: string, samples: number[], lag: { maxMs: number; cpuMs: number }, extra = '') {
  const sorted = [...samples].sort((x, y) => x - y)
  const line = `${name.padEnd(12)} ${cpuSince()} | B requests ${String(sorted.length).padStart(5)}  p50 ${pct(sorted, 50).toFixed(1).padStart(7)} ms  p99 ${pct(sorted, 99).toFixed(1).padStart(7)} ms  max ${(sorted.at(-1) ?? 0).toFixed(1).padStart(7)} ms  longest loop block ${lag.maxMs.toFixed(1).padStart(7)} ms (CPU ${lag.cpuMs.toFixed(1)} ms)  load ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]} ${extra}`
  console.log(line)
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

console.log(
  `server: ${root}${args.built ? ' (dist)' : ''} (${env.DATABASE_URL.startsWith('sqlite') ? 'SQLite' : 'PostgreSQL'}), ${rows} rows per import, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
)
await loopLag()
cpuSince()
summary('idle', await measureB(sleep(Number(args['idle-seconds']) * 1000)), await loopLag())

async function importLoop(): Promise<string> {
  const took: string[] = []
  for (let round = 0; round < Number(args.imports); round++) {
    const file = csvFile(round)
    const started = performance.now()
    await a.get(`/app/${accountA}/contacts/import`)
    let res = await a.upload(`/app/${accountA}/contacts/import`, 'big.csv', file)
    if (res.status === 303 && res.location) {
      const job = res.location
      do {
        await sleep(100)
        res = await a.get(job)
      } while (res.refresh)
    }
    if (!res.body.includes('Import finished')) {
      throw new Error(`import ${round} failed: ${res.status} ${res.body.slice(0, 500)}`)
    }
    took.push(`${((performance.now() - started) / 1000).toFixed(1)} s`)
  }
  return `(imports of ${(csvFile(0).length / 1e6).toFixed(1)} MB took ${took.join(', ')})`
}
await loopLag()
cpuSince()
const imports = importLoop()
const underImport = await measureB(imports)
summary('A importing', underImport, await loopLag(), await imports)

async function exportLoop(): Promise<string> {
  const took: string[] = []
  for (let round = 0; round < Number(args.exports); round++) {
    const started = performance.now()
    const res = await a.get(`/app/${accountA}/contacts/export.csv`)
    took.push(`${((performance.now() - started) / 1000).toFixed(1)} s, ${(res.body.length / 1e6).toFixed(1)} MB`)
  }
  return `(exports of ${rows * Number(args.imports)} contacts took ${took.join('; ')})`
}
await loopLag()
cpuSince()
const exports = exportLoop()
summary('A exporting', await measureB(exports), await loopLag(), await exports)

const gcPauses = [...serverLog.matchAll(/(Scavenge|Mark-Compact)[^\n]*?MB, ([\d.]+) \/ [\d.]+ ms/g)]
  .map((m) => [m[1], Number(m[2])] as const)
  .sort((x, y) => y[1] - x[1])
if (gcPauses.length > 0) {
  console.log(
    `longest GC pauses (--trace-gc): ${gcPauses
      .slice(0, 5)
      .map(([kind, ms]) => `${kind} ${ms} ms`)
      .join(', ')}`,
  )
}
server.kill('SIGTERM')
await new Promise((resolve) => server.once('exit', resolve))
rmSync(dataDir, { recursive: true, force: true })
