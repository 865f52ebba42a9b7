// `npm run bench:noisy`: one tenant's abuse against another's latency (method and options:
// bench/README.md#noisy-neighbour).
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { freePort } from '../test/processes.js'

const args = Object.fromEntries(
  process.argv.slice(2).map((arg) => {
    const [key, value] = arg.replace(/^--/, '').split('=')
    return [key, value ?? '']
  }),
)
const kind = args.db === 'postgres' ? 'postgres' : 'sqlite'
const seconds = Number(args.seconds ?? 10)
const contacts = Number(args.contacts ?? 100_000)
const root = path.resolve(args.root ?? path.join(import.meta.dirname, '..'))
const abuses = (args.abuses ?? 'q,idem,trickle,import').split(',')
const pgUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/noisy_bench'
const secret = randomBytes(32).toString('hex')
const ATTACK_PREFIX = 'r9-'

interface Seeded {
  a: { accountId: string; key: string }
  bKey: string
  databaseUrl: string
}

async function seed(): Promise<Seeded> {
  const { seedSqlite, seedPostgres } = (await import(path.join(root, 'bench/seed.ts'))) as typeof import('./seed.js')
  const plan = { bigContacts: contacts, deepPosition: contacts, smallAccounts: 1, contactsPerSmallAccount: 1000 }
  let databaseUrl: string
  let seeded: Awaited<ReturnType<typeof seedSqlite>>
  if (kind === 'sqlite') {
    const file = path.join(os.tmpdir(), `noisy-${process.pid}.sqlite`)
    rmSync(file, { force: true })
    seeded = await seedSqlite(file, plan)
    databaseUrl = `sqlite:${file}`
  } else {
    const admin = new pg.Client({ connectionString: pgUrl.replace(/\/[^/]+$/, '/postgres') })
    await admin.connect()
    const name = new URL(pgUrl).pathname.slice(1)
    await admin.query(`drop database if exists ${name} with (force)`)
    await admin.query(`create database ${name}`)
    await admin.end()
    seeded = await seedPostgres(pgUrl, plan)
    databaseUrl = pgUrl
  }
  return { a: seeded.big, bKey: seeded.smallKeys[0] ?? '', databaseUrl }
}

function startServer(databaseUrl: string, port: number): ChildProcess {
  return spawn(process.execPath, [path.join(root, 'dist/main.js'), 'serve'], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      SECRET: secret,
      LOG_LEVEL: 'warn',
      WEBHOOK_WORKER: 'off',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
}

async function waitForHttp(url: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    try {
      await (await fetch(url)).arrayBuffer()
      return
    } catch {
      await sleep(100)
    }
  }
  throw new Error(`no answer from ${url}`)
}

/** A's late contacts that all match the attack prefix: created last, so they sit late in id order. */
async function addAttackContacts(base: string, key: string): Promise<void> {
  for (let i = 0; i < 2100; i += 50) {
    await Promise.all(
      Array.from({ length: 50 }, (_, j) =>
        fetch(`${base}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ email: `${ATTACK_PREFIX}${i + j}@attacker.test` }),
        }).then((r) => r.arrayBuffer()),
      ),
    )
    await sleep(600) // under A's rate limit (100/s, burst 200)
  }
}

interface Percentiles {
  p50: number
  p99: number
  n: number
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0

/** B's probe: /me and a list page in turn, one at a time, a request every 20 ms. */
async function probe(base: string, key: string, forSeconds: number): Promise<{ me: Percentiles; list: Percentiles }> {
  const times = { me: [] as number[], list: [] as number[] }
  const until = performance.now() + forSeconds * 1000
  let turn = 0
  while (performance.now() < until) {
    const which = turn++ % 2 === 0 ? 'me' : 'list'
    const url = which === 'me' ? `${base}/api/v1/me` : `${base}/api/v1/contacts?limit=50`
    const started = performance.now()
    const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
    await res.arrayBuffer()
    if (res.status !== 200) {
      throw new Error(`B got ${res.status} from ${url}`)
    }
    times[which].push(performance.now() - started)
    await sleep(20)
  }
  const summary = (values: number[]) => {
    const sorted = [...values].sort((x, y) => x - y)
    return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: sorted.length }
  }
  return { me: summary(times.me), list: summary(times.list) }
}

/** An abuse in a child process (autocannon or the trickler below), for the probe's duration. */
function abuse(name: string, base: string, key: string): ChildProcess | undefined {
  const autocannon = path.join(root, 'node_modules/autocannon/autocannon.js')
  const auth = ['-H', `authorization=Bearer ${key}`]
  const time = ['-d', String(seconds + 2)]
  switch (name) {
    case 'q':
      return spawn(
        process.execPath,
        [autocannon, '-j', '-c', '8', ...time, ...auth, `${base}/api/v1/contacts?limit=100&q=${ATTACK_PREFIX}`],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      )
    case 'idem': {
      const custom = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, 'x'.repeat(90)]))
      const body = JSON.stringify({ email: '[<id>]@flood.test', custom_fields: custom })
      return spawn(
        process.execPath,
        [
          autocannon,
          '-c',
          '8',
          ...time,
          ...auth,
          '-m',
          'POST',
          '-H',
          'content-type=application/json',
          '-H',
          'idempotency-key=[<id>]',
          '-b',
          body,
          '-I',
          '-j',
          `${base}/api/v1/contacts/upsert`,
        ],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      )
    }
    case 'flood':
      // As many GET /me as 16 connections carry: past A's rate limit they are 429s, each one
      // authenticated and so an entry of A's request log (docs/request-log.md).
      return spawn(process.execPath, [autocannon, '-j', '-c', '16', ...time, ...auth, `${base}/api/v1/me`], {
        stdio: ['ignore', 'pipe', 'ignore'],
      })
    case 'trickle':
      return spawn(process.execPath, ['-e', TRICKLER, base, String(seconds + 2)], { stdio: 'ignore' })
    case 'longpoll':
      return spawn(
        process.execPath,
        ['-e', LONG_POLLER, base, key, String(LONG_POLLS), String(seconds + 2 + LONG_POLL_RAMP_S)],
        {
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      )
    default:
      return undefined
  }
}

// 400 sockets, each writing its request line and headers one byte a second.
const TRICKLER = `
const net = require('node:net')
const url = new URL(process.argv[1])
const seconds = Number(process.argv[2])
const text = 'GET /api/v1/me HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer ' + 'x'.repeat(200) + '\\r\\n\\r\\n'
for (let i = 0; i < 400; i++) {
  const socket = net.connect(Number(url.port), url.hostname)
  socket.on('error', () => {})
  let at = 0
  const timer = setInterval(() => { if (at < text.length) socket.write(text[at++]) }, 1000)
  socket.on('close', () => clearInterval(timer))
}
setTimeout(() => process.exit(0), seconds * 1000)
`

// A's long polls of its events feed: opened at 90 a second (under A's rate limit), each polling
// again when answered, until the end; then its totals as one JSON line (as autocannon's).
const LONG_POLLS = 1000
const LONG_POLL_RAMP_S = Math.ceil(LONG_POLLS / 90) + 1
const LONG_POLLER = `
const http = require('node:http')
const [base, key, count, seconds] = process.argv.slice(1)
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity })
const headers = { authorization: 'Bearer ' + key }
const get = (path) => new Promise((resolve) => {
  const req = http.get(base + path, { agent, headers }, (res) => {
    let body = ''
    res.on('data', (c) => { body += c })
    res.on('end', () => resolve({ status: res.statusCode, body }))
  })
  req.on('error', () => resolve({ status: 0, body: '' }))
})
const totals = { '2xx': 0, non2xx: 0, duration: Number(seconds), statuses: {} }
const end = Date.now() + Number(seconds) * 1000
;(async () => {
  const start = JSON.parse((await get('/api/v1/events?from=now')).body).next_cursor
  for (let i = 0; i < Number(count); i++) {
    ;(async () => {
      let cursor = start
      while (Date.now() < end) {
        const res = await get('/api/v1/events?wait=30&after=' + encodeURIComponent(cursor))
        totals.statuses[res.status] = (totals.statuses[res.status] ?? 0) + 1
        if (res.status === 200) { totals['2xx']++; cursor = JSON.parse(res.body).next_cursor } else { totals.non2xx++; await new Promise((r) => setTimeout(r, 1000)) }
      }
    })()
    if (i % 90 === 89) await new Promise((r) => setTimeout(r, 1000))
  }
  setTimeout(() => { console.log(JSON.stringify(totals)); process.exit(0) }, Math.max(0, end - Date.now()))
})()
`

async function main(): Promise<void> {
  const seeded = await seed()
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const server = startServer(seeded.databaseUrl, port)
  try {
    await waitForHttp(`${base}/healthz`)
    await addAttackContacts(base, seeded.a.key)
    await sleep(2000)
    const rows: Array<[string, { me: Percentiles; list: Percentiles }]> = []
    const aServed: string[] = []
    await probe(base, seeded.bKey, 2) // warm-up
    rows.push(['idle', await probe(base, seeded.bKey, seconds)])
    for (const name of abuses) {
      const child = abuse(name, base, seeded.a.key)
      if (!child) {
        console.log(`(${name}: not run by this bench)`)
        continue
      }
      let out = ''
      child.stdout?.on('data', (chunk) => {
        out += chunk
      })
      const exited = new Promise((resolve) => child.once('exit', resolve))
      // The long polls open over LONG_POLLS / 90 seconds: probe once they all wait.
      await sleep(name === 'longpoll' ? LONG_POLL_RAMP_S * 1000 : 1000)
      rows.push([name, await probe(base, seeded.bKey, seconds)])
      // autocannon stops by itself a second later and prints its totals: what A got served.
      await Promise.race([exited, sleep(5000)])
      child.kill('SIGKILL')
      const served = /^\{.*\}$/m.exec(out)?.[0]
      if (served) {
        const totals = JSON.parse(served) as {
          '2xx': number
          non2xx: number
          duration: number
          statuses?: Record<string, number>
        }
        const statuses = totals.statuses ? ` (statuses ${JSON.stringify(totals.statuses)})` : ''
        aServed.push(
          `${name}: A got ${totals['2xx']} answered (${(totals['2xx'] / totals.duration).toFixed(1)}/s), ${totals.non2xx} refused, in ${totals.duration.toFixed(0)} s${statuses}`,
        )
      }
      await sleep(2500) // A's rate-limit window and the server's sockets settle
    }
    const idle = rows[0]?.[1]
    const fmt = (ms: number) => ms.toFixed(1).padStart(7)
    console.log(
      `\nnoisy neighbour, ${kind}, A has ${contacts} contacts, ${seconds} s per row, load avg ${os.loadavg()[0]?.toFixed(2)}, root ${root}`,
    )
    console.log('abuse     | B /me p50 | p99     | B list p50 | p99     | B p99 < 50 ms and < 3× idle')
    for (const [name, result] of rows) {
      const ok =
        idle &&
        result.me.p99 < 50 &&
        result.list.p99 < 50 &&
        result.me.p99 < 3 * Math.max(idle.me.p99, 1) &&
        result.list.p99 < 3 * Math.max(idle.list.p99, 1)
      console.log(
        `${name.padEnd(9)} | ${fmt(result.me.p50)}   | ${fmt(result.me.p99)} | ${fmt(result.list.p50)}    | ${fmt(result.list.p99)} | ${ok ? 'pass' : 'FAIL'} (n=${result.me.n + result.list.n})`,
      )
    }
    for (const line of aServed) {
      console.log(line)
    }
  } finally {
    server.kill('SIGTERM')
  }
}

await main()
