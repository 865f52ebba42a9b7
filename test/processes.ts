// Real server processes for multi-process tests: spawn `serve` (built, or with tsx), wait until it listens.
import { type ChildProcess, spawn } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { type AddressInfo, createServer } from 'node:net'
import path from 'node:path'

export interface ServerProcess {
  child: ChildProcess
  base: string
  output(): string
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

/**
 * A port nobody listens on now, picked by the OS. (A random guess collided with another file's
 * server once in a while, since test files share the machine.)
 */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

let serveCommand: string[] | undefined

/**
 * The node arguments that run the CLI: `dist/main.js` when the build is up to date (every source
 * file no newer than its output; CI builds before testing), else `src/main.ts` through tsx, so that
 * `npm test` works on a fresh checkout and never runs stale code. A built start costs less than a
 * transpiling one, and the crash test restarts the server at every round.
 */
export function cliCommand(): string[] {
  serveCommand ??=
    isBuildCurrent('src', 'dist') && isBuildCurrent('packages/client/src', 'packages/client/dist')
      ? ['dist/main.js']
      : ['--import', 'tsx', 'src/main.ts']
  return serveCommand
}

function isBuildCurrent(sourceDir: string, outDir: string): boolean {
  const modified = (file: string) => statSync(file, { throwIfNoEntry: false })?.mtimeMs
  for (const entry of readdirSync(sourceDir, { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.ts') || entry.endsWith('.test.ts')) {
      continue
    }
    const built = modified(path.join(outDir, entry.replace(/\.ts$/, '.js')))
    if (built === undefined || built < (modified(path.join(sourceDir, entry)) ?? Number.POSITIVE_INFINITY)) {
      return false
    }
  }
  return true
}

/** Starts `serve` (or `worker`: webhook delivery with health and metrics only); resolves once it listens. */
export async function startServerProcess(
  env: Record<string, string | undefined>,
  role: 'serve' | 'worker' = 'serve',
  /**
   * Node's own flags (before the script), the command's arguments after the role, and the script
   * (default: this tree's CLI; another release's `dist/main.js` for an upgrade test).
   */
  { nodeArgs = [], args = [], script = cliCommand() }: { nodeArgs?: string[]; args?: string[]; script?: string[] } = {},
): Promise<ServerProcess> {
  const port = env.PORT ?? String(await freePort())
  const started = role === 'serve' ? 'listening on' : 'worker running'
  const child = spawn(process.execPath, [...nodeArgs, ...script, role, ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, PORT: port },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (chunk) => {
    output += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${role} did not start in 30 s: ${output}`)), 30_000)
    child.stderr?.on('data', (chunk) => {
      output += chunk
      if (output.includes(started)) {
        clearTimeout(timer)
        resolve()
      }
    })
    exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`${role} exited (${code}): ${output}`))
    })
  })
  return {
    child,
    base: `http://127.0.0.1:${port}`,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) {
        child.kill(signal)
      }
      return exited
    },
  }
}
