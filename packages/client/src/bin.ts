#!/usr/bin/env node
// `npx @contacts-api/client listen --forward-to URL` and `… trigger EVENT_TYPE` (commands.ts).
import { runCommand } from './commands.js'

const stop = new AbortController()
// Ctrl-C ends listen with exit 0; a second one ends the process at once.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => stop.abort())
}
process.exitCode = await runCommand(
  'contacts-api-client',
  process.argv.slice(2),
  process.env,
  { out: (text) => process.stdout.write(`${text}\n`), err: (text) => process.stderr.write(`${text}\n`) },
  stop.signal,
)
