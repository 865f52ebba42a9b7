// Two builds of the service (or one build with two settings) side by side: both servers on the
// server core, each loaded at the same time by its own wrk on the load core, so whatever the host
// does to the core falls on both alike. Compares their CPU per request over the same seconds; an
// A/A run (the same build twice) shows the method's own spread (bench/README.md#side-by-side).
//
//   node --import tsx bench/side-by-side.ts --a=DIR --b=DIR [--a-env=NAME=VALUE,…] [--b-env=…]
//     [--path=/api/v1/me] [--rounds=4] [--seconds=15] [--connections=50]
import { spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { LOAD_CORE, SERVER_CORE } from './measure.js'
import {
  canPin,
  cpuTicksOf,
  freePort,
  log,
  median,
  parseFlags,
  ROOT,
  spawnNode,
  stopProcess,
  waitForHttp,
} from './processes.js'
import { seedSqlite } from './seed.js'

const flags = parseFlags(process.argv.slice(2), [
  'a',
  'b',
  'a-env',
  'b-env',
  'path',
  'rounds',
  'seconds',
  'connections',
])
const roots = { a: path.resolve(flags.get('a') ?? ROOT), b: path.resolve(flags.get('b') ?? ROOT) }
const envOf = (side: 'a' | 'b'): Record<string, string> =>
  Object.fromEntries(
    (flags.get(`${side}-env`) ?? '')
      .split(',')
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  )
const urlPath = flags.get('path') ?? '/api/v1/me'
const rounds = Number(flags.get('rounds') ?? 4)
const seconds = Number(flags.get('seconds') ?? 15)
const connections = Number(flags.get('connections') ?? 50)

interface Load {
  requests: number
  non2xx: number
}

/** wrk on the load core for `duration` seconds; its count of answers and of non-2xx ones. */
function wrk(url: string, key: string, duration: number, taskset: boolean): Promise<Load> {
  const args = ['-t1', `-c${connections}`, `-d${duration}s`, '-H', `Authorization: Bearer ${key}`, url]
  const child = taskset ? spawn('taskset', ['-c', String(LOAD_CORE), 'wrk', ...args]) : spawn('wrk', args)
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', () =>
      resolve({
        requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? 0),
        non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
      }),
    )
  })
}

async function main(): Promise<void> {
  for (const root of Object.values(roots)) {
    if (!existsSync(path.join(root, 'dist', 'main.js'))) {
      throw new Error(`${root}/dist/main.js is missing: run \`npm run build\` there first`)
    }
  }
  const taskset = canPin()
  const dir = mkdtempSync(path.join(os.tmpdir(), 'side-by-side-'))
  const seeded = path.join(dir, 'seed.sqlite')
  const seed = await seedSqlite(seeded, {
    bigContacts: 600,
    deepPosition: 300,
    smallAccounts: 2,
    contactsPerSmallAccount: 5,
  })
  const ratios: number[] = []
  try {
    for (let round = 1; round <= rounds; round++) {
      // Each side its own copy of the same data.
      const servers = await Promise.all(
        (['a', 'b'] as const).map(async (side) => {
          const file = path.join(dir, `${side}.sqlite`)
          for (const suffix of ['-wal', '-shm']) {
            rmSync(file + suffix, { force: true })
          }
          copyFileSync(seeded, file)
          const port = await freePort()
          const env = {
            ...process.env,
            DATABASE_URL: `sqlite:${file}`,
            SECRET: 'side-by-side-secret-side-by-side-secret',
            PORT: String(port),
            HOST: '127.0.0.1',
            RATE_LIMIT_PER_SECOND: '0',
            NODE_ENV: 'production',
            WEBHOOK_WORKER: 'off',
            ...envOf(side),
          }
          const child = spawnNode(
            ['dist/main.js', 'serve', '--api-only'],
            SERVER_CORE,
            taskset,
            env,
            false,
            roots[side],
          )
          let stderr = ''
          child.stderr?.on('data', (chunk) => {
            stderr = (stderr + chunk).slice(-4000)
          })
          const url = `http://127.0.0.1:${port}${urlPath}`
          await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, () => stderr)
          return { side, child, url }
        }),
      )
      try {
        await Promise.all(servers.map(({ url }) => wrk(url, seed.big.key, 3, taskset)))
        const before = servers.map(({ child }) => cpuTicksOf(child.pid))
        const loads = await Promise.all(servers.map(({ url }) => wrk(url, seed.big.key, seconds, taskset)))
        const cpu = servers.map(({ child }, i) => cpuTicksOf(child.pid) - (before[i] as number))
        const [a, b] = loads.map((load, i) => {
          if (load.requests === 0 || load.non2xx > 0) {
            throw new Error(`side ${servers[i]?.side}: ${load.non2xx} non-2xx answers of ${load.requests}`)
          }
          return { rps: load.requests / seconds, usPerRequest: ((cpu[i] as number) * 10_000) / load.requests }
        }) as [{ rps: number; usPerRequest: number }, { rps: number; usPerRequest: number }]
        // The same CPU buys 1 / (µs per request) requests: A's throughput against B's at equal CPU.
        const ratio = b.usPerRequest / a.usPerRequest - 1
        ratios.push(ratio)
        log(
          `round ${round}: A ${a.rps.toFixed(0)} req/s, ${a.usPerRequest.toFixed(1)} µs CPU/req | ` +
            `B ${b.rps.toFixed(0)} req/s, ${b.usPerRequest.toFixed(1)} µs CPU/req | A's throughput at equal CPU ${(100 * ratio).toFixed(1)} %`,
        )
      } finally {
        await Promise.all(servers.map(({ child }) => stopProcess(child)))
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const pct = (value: number) => `${value >= 0 ? '+' : ''}${(100 * value).toFixed(1)} %`
  console.log(
    `GET ${urlPath}: A's throughput against B's at equal CPU, ${rounds} rounds: median ${pct(median(ratios))} ` +
      `(${ratios.map(pct).join(', ')})`,
  )
}

main().catch((error: unknown) => {
  log(`side-by-side failed: ${error instanceof Error ? error.message : String(error)}`)
  process.exitCode = 1
})
