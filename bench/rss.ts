// `npm run bench:rss`: where a server's memory goes, idle and under load, and what node flags change
// it (method and options: bench/README.md#rss).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { freePort } from '../test/processes.js'
import { type SeedResult, seedPostgres, seedSqlite } from './seed.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const RESULTS = path.join(ROOT, 'bench', 'results')
const SERVER_CORE = 0
const LOAD_CORE = 1
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
const MiB = 1024 * 1024

const { values } = parseArgs({
  options: {
    db: { type: 'string', default: 'sqlite,postgres' },
    contacts: { type: 'string', default: '20000' },
    seconds: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '2' },
    modes: { type: 'string', default: 'serve,api-only' },
    variants: { type: 'string', default: 'default' },
  },
})
const dbs = (values.db ?? '').split(',') as Array<'sqlite' | 'postgres'>
const modes = (values.modes ?? '').split(',') as Array<'serve' | 'api-only'>
const variants = (values.variants ?? '').split(';').map((v) => v.trim())
const seconds = Number(values.seconds)
const rounds = Number(values.rounds)

const log = (text: string) => process.stderr.write(`${text}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')

/** `Name: 123 kB` lines of a /proc file, in bytes. */
function procKb(file: string): Record<string, number> {
  const out: Record<string, number> = {}
  for (const match of readFileSync(file, 'utf8').matchAll(/^(\w+):\s+(\d+) kB$/gm)) {
    out[match[1] ?? ''] = Number(match[2]) * 1024
  }
  return out
}

function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
}

/** The V8 heap by space (committed bytes) and the external memory, from the server's /metrics. */
async function heapOf(base: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text()
  const out: Record<string, number> = {}
  for (const match of text.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\d+)/gm)) {
    out[match[1] ?? ''] = Number(match[2])
  }
  out.external = Number(/^nodejs_external_memory_bytes (\d+)/m.exec(text)?.[1] ?? 0)
  out.heapUsed = Number(/^nodejs_heap_size_used_bytes (\d+)/m.exec(text)?.[1] ?? 0)
  return out
}

interface Snapshot {
  rss: number
  anon: number
  file: number
  v8: number
  young: number
  old: number
  code: number
  large: number
  external: number
  heapUsed: number
}

async function snapshot(pid: number, base: string): Promise<Snapshot> {
  const heap = await heapOf(base)
  const smaps = procKb(`/proc/${pid}/smaps_rollup`)
  const rss = smaps.Rss ?? 0
  const anon = smaps.Anonymous ?? 0
  const spaces = Object.entries(heap).filter(([name]) => name !== 'external' && name !== 'heapUsed')
  const sum = (names: string[]) => spaces.filter(([n]) => names.includes(n)).reduce((a, [, v]) => a + v, 0)
  return {
    rss,
    anon,
    file: rss - anon,
    v8: spaces.reduce((a, [, v]) => a + v, 0),
    young: sum(['new']),
    old: sum(['old', 'trusted']),
    code: sum(['code']),
    large: sum(['large_object', 'new_large_object', 'code_large_object', 'trusted_large_object']),
    external: heap.external ?? 0,
    heapUsed: heap.heapUsed ?? 0,
  }
}

/** wrk from core 1 for `secs` seconds; the answers and the server's CPU time per answer. */
async function load(pid: number, url: string, key: string, secs: number): Promise<{ rps: number; cpuUs: number }> {
  const args = [
    '-c',
    String(LOAD_CORE),
    'wrk',
    '-t1',
    '-c50',
    `-d${secs}s`,
    '--timeout',
    '10s',
    '-H',
    `Authorization: Bearer ${key}`,
    url,
  ]
  const before = cpuMs(pid)
  const out = execFileSync('taskset', args, { encoding: 'utf8' })
  const cpu = cpuMs(pid) - before
  if (/Non-2xx|Socket errors/.test(out)) {
    throw new Error(`errors under load at ${url}:\n${out}`)
  }
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
  return { rps: requests / secs, cpuUs: (cpu * 1000) / requests }
}

interface Run {
  db: string
  mode: string
  variant: string
  round: number
  idle: Snapshot
  loaded: Snapshot
  peak: number
  list: { rps: number; cpuUs: number }
  me: { rps: number; cpuUs: number }
  load: string
}

async function runOne(
  db: string,
  mode: 'serve' | 'api-only',
  variant: string,
  round: number,
  env: NodeJS.ProcessEnv,
  seed: SeedResult,
): Promise<Run> {
  const port = await freePort()
  const tokens = variant === 'default' ? [] : variant.split(' ')
  // `NAME=value` tokens of a variant are environment variables (MALLOC_ARENA_MAX=2), the rest node flags.
  const flags = tokens.filter((t) => !/^[A-Z_]+=/.test(t))
  const variantEnv = Object.fromEntries(tokens.filter((t) => /^[A-Z_]+=/.test(t)).map((t) => t.split('=')))
  const args = ['-c', String(SERVER_CORE), process.execPath, ...flags, 'dist/main.js', 'serve']
  const server: ChildProcess = spawn('taskset', mode === 'api-only' ? [...args, '--api-only'] : args, {
    cwd: ROOT,
    env: { ...env, ...variantEnv, PORT: String(port), ...(mode === 'api-only' ? { WEBHOOK_WORKER: 'off' } : {}) },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  server.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000)
  })
  const base = `http://127.0.0.1:${port}`
  const pid = server.pid ?? 0
  try {
    for (let i = 0; ; i++) {
      if (server.exitCode !== null || i > 300) {
        throw new Error(`server did not start: ${stderr}`)
      }
      try {
        await (await fetch(`${base}/healthz`)).arrayBuffer()
        break
      } catch {
        await sleep(100)
      }
    }
    await sleep(2000)
    const idle = await snapshot(pid, base)
    const key = seed.big.key
    await load(pid, `${base}/api/v1/contacts?limit=50`, key, 2) // warm-up
    const list = await load(pid, `${base}/api/v1/contacts?limit=50`, key, seconds)
    const me = await load(pid, `${base}/api/v1/me`, key, Math.max(1, Math.round(seconds / 2)))
    const loaded = await snapshot(pid, base)
    const peak = procKb(`/proc/${pid}/status`).VmHWM ?? 0
    return { db, mode, variant, round, idle, loaded, peak, list, me, load: loadavg() }
  } finally {
    const exited = new Promise((resolve) => server.once('exit', resolve))
    server.kill('SIGTERM')
    await exited
  }
}

async function prepare(db: 'sqlite' | 'postgres', cleanups: Array<() => Promise<void>>) {
  const plan = { bigContacts: Number(values.contacts), deepPosition: 1, smallAccounts: 10, contactsPerSmallAccount: 20 }
  const secret = randomBytes(32).toString('hex')
  if (db === 'sqlite') {
    const dir = path.join(RESULTS, 'data')
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `rss-${process.pid}.sqlite`)
    cleanups.push(async () => {
      for (const suffix of ['', '-wal', '-shm', '-journal']) {
        rmSync(`${file}${suffix}`, { force: true })
      }
    })
    return { seed: await seedSqlite(file, plan), env: { DATABASE_URL: `sqlite:${file}`, SECRET: secret } }
  }
  const adminUrl =
    process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  const name = `bench_rss_${process.pid}_${randomBytes(3).toString('hex')}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`create database ${name}`)
  await admin.end()
  cleanups.push(async () => {
    const drop = new pg.Client({ connectionString: adminUrl })
    await drop.connect()
    await drop.query(`drop database if exists ${name} with (force)`)
    await drop.end()
  })
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return { seed: await seedPostgres(url.toString(), plan), env: { DATABASE_URL: url.toString(), SECRET: secret } }
}

const mib = (bytes: number) => (bytes / MiB).toFixed(0)
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2
}

function report(runs: Run[]): string {
  const head =
    '| database | process | node flags | RSS idle | peak (VmHWM) | at end of load: file-backed | anonymous | V8 young | V8 old | V8 code | V8 large objects | external | native rest | CPU µs/req list | CPU µs/req /me | list req/s |'
  const lines = [head, `|${'---|'.repeat(16)}`]
  const groups = new Map<string, Run[]>()
  for (const run of runs) {
    const key = `${run.db}|${run.mode}|${run.variant}`
    groups.set(key, [...(groups.get(key) ?? []), run])
  }
  for (const [key, group] of groups) {
    const [db, mode, variant] = key.split('|')
    const m = (f: (r: Run) => number) => median(group.map(f))
    lines.push(
      `| ${db} | ${mode === 'serve' ? 'serve' : 'serve --api-only'} | ${variant} | ${mib(m((r) => r.idle.rss))} | ${mib(
        m((r) => r.peak),
      )} | ${mib(m((r) => r.loaded.file))} | ${mib(m((r) => r.loaded.anon))} | ${mib(m((r) => r.loaded.young))} | ${mib(
        m((r) => r.loaded.old),
      )} | ${mib(m((r) => r.loaded.code))} | ${mib(m((r) => r.loaded.large))} | ${mib(m((r) => r.loaded.external))} | ${mib(
        m((r) => r.loaded.anon - r.loaded.v8),
      )} | ${m((r) => r.list.cpuUs).toFixed(0)} | ${m((r) => r.me.cpuUs).toFixed(0)} | ${m((r) => r.list.rps).toFixed(0)} |`,
    )
  }
  return lines.join('\n')
}

async function main(): Promise<void> {
  const cleanups: Array<() => Promise<void>> = []
  const runs: Run[] = []
  const started = new Date().toISOString()
  const loadBefore = loadavg()
  try {
    for (const db of dbs) {
      log(`seeding ${db} (${values.contacts} contacts) ...`)
      const { seed, env } = await prepare(db, cleanups)
      const serverEnv = {
        ...process.env,
        ...env,
        HOST: '127.0.0.1',
        RATE_LIMIT_PER_SECOND: '0',
        NODE_ENV: 'production',
      }
      for (let round = 1; round <= rounds; round++) {
        for (const mode of modes) {
          for (const variant of variants) {
            const run = await runOne(db, mode, variant, round, serverEnv, seed)
            runs.push(run)
            log(
              `${db} ${mode} [${variant}] round ${round}: idle ${mib(run.idle.rss)} MiB, peak ${mib(run.peak)} MiB, list ${run.list.cpuUs.toFixed(0)} µs/req, /me ${run.me.cpuUs.toFixed(0)} µs/req (load ${run.load})`,
            )
          }
        }
      }
    }
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((error) => log(`cleanup: ${(error as Error).message}`))
    }
  }
  const summary = `${report(runs)}\n\nMiB; medians of ${rounds} round(s); Node ${process.versions.node}, ${os.cpus().length} cores; load average ${loadBefore} before, ${loadavg()} after.`
  process.stdout.write(`${summary}\n`)
  mkdirSync(RESULTS, { recursive: true })
  writeFileSync(
    path.join(RESULTS, `rss-${started.replaceAll(':', '-')}.json`),
    JSON.stringify({ started, runs }, null, 2),
  )
}

await main()
