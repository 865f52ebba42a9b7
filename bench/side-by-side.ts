// Two builds of the service (or one build with two settings) side by side: both servers on the
// server core, each loaded at the same time by its own wrk on the load core, so whatever the host
// does to the core falls on both alike. Compares their CPU per request over the same seconds; an
// A/A run (the same build twice) shows the method's own spread (bench/README.md#side-by-side).
//
//   node --import tsx bench/side-by-side.ts --a=DIR --b=DIR [--a-env=NAME=VALUE,…] [--b-env=…]
//     [--path=/api/v1/me] [--rounds=4] [--seconds=15] [--connections=50]
import { type ChildProcess, spawn } from 'node:child_process'
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

interface Options {
  roots: { a: string; b: string }
  env: { a: Record<string, string>; b: Record<string, string> }
  urlPath: string
  rounds: number
  seconds: number
  connections: number
}

/** The command line, checked: a bad value stops the run before anything starts. */
function parseOptions(argv: string[]): Options {
  const flags = parseFlags(argv, ['a', 'b', 'a-env', 'b-env', 'path', 'rounds', 'seconds', 'connections'])
  const count = (name: string, fallback: number): number => {
    const value = Number(flags.get(name) ?? fallback)
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`--${name} must be a whole number of at least 1 (got ${flags.get(name)})`)
    }
    return value
  }
  const envOf = (side: 'a' | 'b'): Record<string, string> =>
    Object.fromEntries(
      (flags.get(`${side}-env`) ?? '')
        .split(',')
        .filter(Boolean)
        .map((pair) => {
          const at = pair.indexOf('=')
          if (at < 1) {
            throw new Error(`--${side}-env takes NAME=value pairs separated by commas (got "${pair}")`)
          }
          return [pair.slice(0, at), pair.slice(at + 1)]
        }),
    )
  const urlPath = flags.get('path') ?? '/api/v1/me'
  if (!urlPath.startsWith('/')) {
    throw new Error(`--path must start with / (got ${urlPath})`)
  }
  return {
    roots: { a: path.resolve(flags.get('a') ?? ROOT), b: path.resolve(flags.get('b') ?? ROOT) },
    env: { a: envOf('a'), b: envOf('b') },
    urlPath,
    rounds: count('rounds', 4),
    seconds: count('seconds', 15),
    connections: count('connections', 50),
  }
}

interface Load {
  requests: number
  non2xx: number
}

/** wrk on the load core for `duration` seconds; its count of answers and of non-2xx ones. */
function wrk(url: string, key: string, duration: number, connections: number, taskset: boolean): Promise<Load> {
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

/** Every server started and not yet stopped: stopped on any failure and on SIGINT or SIGTERM. */
const running = new Set<ChildProcess>()

async function stopAll(): Promise<void> {
  await Promise.all([...running].map((child) => stopProcess(child)))
  running.clear()
}

async function main(): Promise<void> {
  const { roots, env, urlPath, rounds, seconds, connections } = parseOptions(process.argv.slice(2))
  for (const root of Object.values(roots)) {
    if (!existsSync(path.join(root, 'dist', 'main.js'))) {
      throw new Error(`${root}/dist/main.js is missing: run \`npm run build\` there first`)
    }
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void stopAll().finally(() => process.exit(130))
    })
  }
  const taskset = canPin()
  const dir = mkdtempSync(path.join(os.tmpdir(), 'side-by-side-'))
  const ratios: number[] = []
  try {
    // This checkout's seed: both builds must read its schema (the same migrations).
    const seeded = path.join(dir, 'seed.sqlite')
    const seed = await seedSqlite(seeded, {
      bigContacts: 600,
      deepPosition: 300,
      smallAccounts: 2,
      contactsPerSmallAccount: 5,
    })
    const start = async (side: 'a' | 'b') => {
      // Each side its own copy of the same data.
      const file = path.join(dir, `${side}.sqlite`)
      for (const suffix of ['-wal', '-shm']) {
        rmSync(file + suffix, { force: true })
      }
      copyFileSync(seeded, file)
      const port = await freePort()
      const child = spawnNode(
        ['dist/main.js', 'serve', '--api-only'],
        SERVER_CORE,
        taskset,
        {
          ...process.env,
          DATABASE_URL: `sqlite:${file}`,
          SECRET: 'side-by-side-secret-side-by-side-secret',
          PORT: String(port),
          HOST: '127.0.0.1',
          RATE_LIMIT_PER_SECOND: '0',
          NODE_ENV: 'production',
          WEBHOOK_WORKER: 'off',
          ...env[side],
        },
        false,
        roots[side],
      )
      running.add(child)
      let stderr = ''
      child.stderr?.on('data', (chunk) => {
        stderr = (stderr + chunk).slice(-4000)
      })
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, () => stderr)
      const url = `http://127.0.0.1:${port}${urlPath}`
      // wrk counts only 4xx and 5xx as errors: a redirect or any other answer than 2xx stops here.
      const answer = await fetch(url, { headers: { authorization: `Bearer ${seed.big.key}` }, redirect: 'manual' })
      await answer.arrayBuffer()
      if (answer.status < 200 || answer.status > 299) {
        throw new Error(`side ${side}: GET ${urlPath} answered ${answer.status}, not 2xx`)
      }
      return { side, child, url }
    }
    for (let round = 1; round <= rounds; round++) {
      const servers = [await start('a'), await start('b')]
      await Promise.all(servers.map(({ url }) => wrk(url, seed.big.key, 3, connections, taskset)))
      const before = servers.map(({ child }) => cpuTicksOf(child.pid))
      const loads = await Promise.all(servers.map(({ url }) => wrk(url, seed.big.key, seconds, connections, taskset)))
      const cpu = servers.map(({ child }, i) => cpuTicksOf(child.pid) - (before[i] as number))
      await stopAll()
      const [a, b] = loads.map((load, i) => {
        if (load.requests === 0 || load.non2xx > 0) {
          throw new Error(`side ${servers[i]?.side}: ${load.non2xx} answers of 400 or more of ${load.requests}`)
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
    }
  } finally {
    await stopAll()
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
