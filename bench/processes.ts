// What the benches share about processes: their CPU time and memory from /proc, pinning to a core,
// starting and stopping a server, and `--name=value` flags.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository's root, and where the benches write their results. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const RESULTS = path.join(ROOT, 'bench', 'results')

/** USER_HZ: /proc counts CPU time in ticks of 10 ms. */
export const CLOCK_TICKS = 100

export const log = (text: string) => process.stderr.write(`${text}\n`)
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** CPU time (user + system) of a process in clock ticks; 0 once it is gone (a backend that ended). */
export function cpuTicksOf(pid: number | undefined): number {
  try {
    // utime and stime are fields 14 and 15; the command name before them may contain spaces.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ')
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return 0
  }
}

/** CPU time (user + system) of processes in ms (0 where /proc is missing). */
export const cpuMsOf = (pids: number[]): number =>
  (pids.reduce((ticks, pid) => ticks + cpuTicksOf(pid), 0) * 1000) / CLOCK_TICKS

/** Resident set size of a process in bytes, from /proc (0 where /proc is missing). */
export function rssOf(pid: number | undefined): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1]
    return kb ? Number(kb) * 1024 : 0
  } catch {
    return 0
  }
}

/** Whether processes can be pinned to cores: taskset exists and there are two cores at least. */
export function canPin(): boolean {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' })
    return os.availableParallelism() >= 2
  } catch {
    return false
  }
}

/** Pins every thread of a running process to one core. */
export const pinTo = (core: number, pid: number) =>
  execFileSync('taskset', ['-a', '-cp', String(core), String(pid)], { stdio: 'ignore' })

/** Spawns node with these arguments, on `core` when taskset is available. */
export function spawnNode(
  args: string[],
  core: number,
  taskset: boolean,
  env: NodeJS.ProcessEnv,
  pipes = false,
  cwd = ROOT,
): ChildProcess {
  const [command, commandArgs] = taskset
    ? ['taskset', ['-c', String(core), process.execPath, ...args]]
    : [process.execPath, args]
  return spawn(command, commandArgs, { cwd, env, stdio: pipes ? 'pipe' : ['ignore', 'ignore', 'pipe'] })
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

export async function waitForHttp(url: string, child: ChildProcess, stderr: () => string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) {
      throw new Error(`server exited (${child.exitCode}): ${stderr()}`)
    }
    try {
      const res = await fetch(url)
      await res.arrayBuffer()
      return
    } catch {
      await sleep(100)
    }
  }
  throw new Error(`no answer from ${url} within 30 s: ${stderr()}`)
}

/**
 * A build's server as the benches run it (`ROOT/dist/main.js serve`, production, no rate limit) on a
 * free port of 127.0.0.1, pinned to `core`; `--api-only` with WEBHOOK_WORKER=off for the lean API
 * process. `track` gets the process before it answers, so a failed start is stopped with the rest.
 */
export async function startService(options: {
  root: string
  core: number
  taskset: boolean
  databaseUrl: string
  secret: string
  apiOnly: boolean
  track: (child: ChildProcess) => void
  nodeArgs?: string[]
  env?: Record<string, string>
}): Promise<{ child: ChildProcess; base: string }> {
  const port = await freePort()
  const child = spawnNode(
    [...(options.nodeArgs ?? []), 'dist/main.js', 'serve', ...(options.apiOnly ? ['--api-only'] : [])],
    options.core,
    options.taskset,
    {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      SECRET: options.secret,
      PORT: String(port),
      HOST: '127.0.0.1',
      RATE_LIMIT_PER_SECOND: '0',
      NODE_ENV: 'production',
      ...(options.apiOnly ? { WEBHOOK_WORKER: 'off' } : {}),
      ...options.env,
    },
    false,
    options.root,
  )
  options.track(child)
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000)
  })
  const base = `http://127.0.0.1:${port}`
  await waitForHttp(`${base}/healthz`, child, () => stderr)
  return { child, base }
}

/** SIGTERM, then SIGKILL if the process has not exited 15 s later. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
  await exited
  clearTimeout(timer)
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** `--name=value` and `--name` (read as 'true') arguments; anything else, or an unknown name, throws. */
export function parseFlags(argv: string[], known: readonly string[]): Map<string, string> {
  const flags = new Map<string, string>()
  for (const arg of argv) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg)
    if (!match?.[1]) {
      throw new Error(`unknown argument ${arg}`)
    }
    flags.set(match[1], match[2] ?? 'true')
  }
  for (const flag of flags.keys()) {
    if (!known.includes(flag)) {
      throw new Error(`unknown option --${flag} (known: ${known.map((k) => `--${k}`).join(' ')})`)
    }
  }
  return flags
}
