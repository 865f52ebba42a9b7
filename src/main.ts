#!/usr/bin/env node
// Process entry: checks the Node version, sets the V8 heap settings a server needs, then hands
// argv to the CLI.
import v8 from 'node:v8'
import { checkNodeVersion } from './runtime.js'

// Before any module that loads better-sqlite3's binary: on Node 20 it would crash the process.
const runtime = checkNodeVersion(process.versions.node)
if (!runtime.ok) {
  process.stderr.write(`${runtime.message}\n`)
  process.exit(1)
}
if (runtime.warning !== undefined) {
  process.stderr.write(`${runtime.warning}\n`)
}

/**
 * Measured under the bench's load (docs/performance.md, "RSS"): V8 pretenures allocation sites
 * whose objects survived a few scavenges (start-up, the first requests), after which pg's row
 * objects and strings of every page were kept until a full collection: 3.4 MB promoted per
 * scavenge instead of 0.5, and 20 % more CPU per page. And it lets the old generation reach four
 * times the live heap before collecting it (220 MB RSS); 1.5 times keeps a server near 145 MB at
 * the same CPU. Both flags are read at each collection, so setting them here, before any
 * application module is loaded, takes effect; a flag given on the command line or in
 * NODE_OPTIONS wins.
 */
const HEAP_FLAGS = ['--no-allocation-site-pretenuring', '--heap-growing-percent=50']

const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' ').replaceAll('_', '-')
for (const flag of HEAP_FLAGS) {
  const name = flag.replace(/^--(no-)?/, '').split('=')[0] ?? flag
  if (!given.includes(name)) {
    v8.setFlagsFromString(flag)
  }
}

/**
 * V8 sizes the young generation from the machine's memory: on a 24 GiB host Node 24 gives a server
 * a 64 MiB young generation from start-up on and 96–128 MiB under load (Node 20 stopped at 32).
 * Capped at 8 MiB semi-spaces (16 MiB in all), `serve` on SQLite idles at 138 MiB instead of 183
 * and peaks at 158 instead of 208 under the list and /me load (PostgreSQL: 160 instead of 256), at
 * no more CPU per request (docs/performance.md, "RSS": `npm run bench:rss`, interleaved runs).
 * V8 reads this limit once, when it creates the heap, so v8.setFlagsFromString is too late: for
 * the long-running commands, when neither the command line nor NODE_OPTIONS sets it (any value
 * wins; `--max-semi-space-size=0` is V8's own sizing), this process replaces itself once with the
 * same command plus the flag (process.execve: same PID, open files and signals; about one node
 * start-up, before any application module is loaded). Where execve is missing (Windows), it runs
 * as it is.
 */
const SEMI_SPACE_FLAG = '--max-semi-space-size=8'
const LONG_RUNNING = new Set(['serve', 'worker'])

if (
  LONG_RUNNING.has(process.argv[2] ?? '') &&
  !given.includes('max-semi-space-size') &&
  typeof process.execve === 'function'
) {
  const [script, ...args] = process.argv.slice(1)
  if (script !== undefined) {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, SEMI_SPACE_FLAG, script, ...args])
  }
}

const { runCli } = await import('./cli/cli.js')

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`contacts-api: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exitCode = 1
  },
)
