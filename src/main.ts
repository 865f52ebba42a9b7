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
