// `contacts-api listen --forward-to URL` and `contacts-api trigger EVENT_TYPE`: the integrator's
// loop on a laptop (docs/webhooks.md#receive-webhooks-on-your-laptop). Both are clients of the API,
// so they are the SDK's (packages/client/src/commands.ts), the same as `npx @contacts-api/client
// listen`; loaded only when run, so a serving process never loads the SDK.
import type { CliIo } from './io.js'

/** Runs `run` with a signal that Ctrl-C (SIGINT) or SIGTERM aborts, so listen ends with exit 0. */
export async function runUntilInterrupted(run: (stop: AbortSignal) => Promise<number>): Promise<number> {
  const stop = new AbortController()
  const interrupt = () => stop.abort()
  process.once('SIGINT', interrupt)
  process.once('SIGTERM', interrupt)
  try {
    return await run(stop.signal)
  } finally {
    process.off('SIGINT', interrupt)
    process.off('SIGTERM', interrupt)
  }
}

/** Runs listen or trigger; resolves with the exit code (listen: when `stop` aborts, 0). */
export async function runListen(
  command: 'listen' | 'trigger',
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: CliIo,
  stop: AbortSignal,
): Promise<number> {
  const { runCommand } = await import('@contacts-api/client')
  return runCommand('contacts-api', [command, ...argv], env, io, stop)
}
