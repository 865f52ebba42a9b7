// Two builds of the service (or one build with two settings) side by side: both servers on the
// server core, each loaded at the same time by its own wrk on the load core, so whatever the host
// does to the core falls on both alike. Compares their CPU per request over the same seconds; an
// A/A run (the same build twice) shows the method's own spread (bench/README.md#side-by-side).
//
//   node --import tsx bench/side-by-side.ts --a=DIR --b=DIR [--a-env=NAME=VALUE,…] [--b-env=…]
//     [--path=/api/v1/me] [--rounds=4] [--seconds=15] [--connections=50]
import type { ChildProcess } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { type Measured, measure, probe, type Request, SERVER_CORE } from './measure.js'
import { canPin, log, median, parseFlags, ROOT, startService, stopProcess } from './processes.js'
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
  // The seed and each side's copy of it: removed at the end, on a failure and on a signal.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'side-by-side-'))
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    process.once(signal, () => {
      void stopAll().finally(() => {
        rmSync(dir, { recursive: true, force: true })
        process.exit(code)
      })
    })
  }
  const taskset = canPin()
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
    const request: Request = {
      method: 'GET',
      path: urlPath,
      status: 200,
      headers: { authorization: `Bearer ${seed.big.key}` },
    }
    const start = async (side: 'a' | 'b') => {
      // Each side its own copy of the same data.
      const file = path.join(dir, `${side}.sqlite`)
      for (const suffix of ['-wal', '-shm']) {
        rmSync(file + suffix, { force: true })
      }
      copyFileSync(seeded, file)
      const { child, base } = await startService({
        root: roots[side],
        core: SERVER_CORE,
        taskset,
        databaseUrl: `sqlite:${file}`,
        secret: 'side-by-side-secret-side-by-side-secret',
        apiOnly: true,
        env: env[side],
        track: (started) => running.add(started),
      })
      await probe(base, `side ${side}`, request)
      return { side, child, base }
    }
    // One round each, measured at once; measure() checks every answer's status by the server's count.
    const once = { rounds: 1, warmup: 3, seconds, connections, engine: 'wrk' as const }
    for (let round = 1; round <= rounds; round++) {
      // Started, and their loads started, in turn A B, then B A: whatever the order favours falls on both.
      const order = round % 2 === 1 ? (['a', 'b'] as const) : (['b', 'a'] as const)
      const servers = [await start(order[0]), await start(order[1])]
      const measured = await Promise.all(
        servers.map(({ side, child, base }) =>
          measure(once, taskset, { url: base, pid: child.pid }, request, `${side.toUpperCase()} round ${round}`),
        ),
      )
      const [a, b] = (order[0] === 'a' ? measured : [...measured].reverse()) as [Measured, Measured]
      await stopAll()
      // The same CPU buys 1 / (µs per request) requests: A's throughput against B's at equal CPU.
      const ratio = b.cpuUsPerRequest / a.cpuUsPerRequest - 1
      ratios.push(ratio)
      log(`round ${round}: A's throughput at equal CPU ${(100 * ratio).toFixed(1)} %`)
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
