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
 * V8 pretenures allocation sites whose objects survived start-up, after which every page's short-lived
 * rows were kept until a full collection; and it lets the old generation grow to four times the live
 * heap. Both flags are read at each collection, so setting them here takes effect; a flag given on
 * the command line or in NODE_OPTIONS wins. Measurements: docs/performance.md, "V8 heap settings".
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
 * V8 sizes the young generation from the machine's memory, far beyond what a server needs; capped, it
 * takes much less memory at no more CPU (docs/performance.md, "RSS and the API-only process"). V8
 * reads the limit only when it creates the heap, so the long-running commands re-execute themselves
 * once with the flag (process.execve: same PID), unless the command line or NODE_OPTIONS sets it.
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

const args = process.argv.slice(2)
// `scan` runs in pre-commit hooks: it loads its own few modules, not the server's that cli.js imports.
const run: Promise<number> =
  args[0] === 'scan'
    ? import('./cli/scan.js').then(({ runScan }) => runScan(args.slice(1)))
    : import('./cli/cli.js').then(({ runCli }) => runCli(args))

run.then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`contacts-api: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exitCode = 1
  },
)
