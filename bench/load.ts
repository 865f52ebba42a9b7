// The load generator for one scenario, in its own process, speaking JSON lines to bench/run.ts
// (protocol and engines: bench/README.md#load).
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { isDynamic, render } from './template.js'

export interface LoadSpec {
  url: string
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  /** A template (bench/template.ts): `{n}`, `{tag}`, `{id}`. */
  path: string
  headers: Record<string, string>
  /** A JSON body template (bench/template.ts), or none. */
  body?: string
  /** What `{id}` takes, round robin. */
  ids?: string[]
  connections: number
  /** Paced load: requests per second from all connections together (autocannon's overallRate). */
  rate?: number
  /** wrk unless paced or wrk is missing. */
  engine?: 'wrk' | 'autocannon'
  warmupSeconds: number
  rounds: number
  seconds: number
}

export interface LoadResult {
  engine: 'wrk' | 'autocannon'
  /** The load generator's CPU time over the measured time (wrk only): near 1, it was the limit. */
  generatorBusy: number
  /** Every answer, and the answers below 400 (wrk) or 2xx (autocannon). */
  requests: number
  ok: number
  /** The measured time, s (wrk's own, from the first connection to the last answer). */
  seconds: number
  /** Good answers per second: an error page must not count as throughput. */
  rps: number
  /** Milliseconds. */
  p50: number
  p99: number
  mean: number
  non2xx: number
  errors: number
  timeouts: number
  statuses: Record<string, number>
}

let wrkPresent: boolean | undefined
export function hasWrk(): boolean {
  wrkPresent ??= spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined
  return wrkPresent
}

const lua = (value: string) => JSON.stringify(value) // a JSON string is a valid Lua string literal here

/** The Lua script of one wrk run: the request (static, or built per request) and a JSON summary line. */
function wrkScript(spec: LoadSpec, tag: string): string {
  const headers = { ...spec.headers, ...(spec.body === undefined ? {} : { 'content-type': 'application/json' }) }
  const lines = [`wrk.method = ${lua(spec.method)}`]
  for (const [name, value] of Object.entries(headers)) {
    lines.push(`wrk.headers[${lua(name)}] = ${lua(value)}`)
  }
  if (isDynamic(spec.path, spec.body)) {
    // {tag} is filled here; {n} and {id} per request. gsub's replacement is a function, so no
    // character of an id or a number is read as a pattern.
    const fill = (text: string) => lua(text.replaceAll('{tag}', tag))
    lines.push(
      `local ids = {${(spec.ids ?? []).map(lua).join(',')}}`,
      `local path_t = ${fill(spec.path)}`,
      `local body_t = ${spec.body === undefined ? 'nil' : fill(spec.body)}`,
      'local n = 0',
      'local function fill(text, id)',
      '  return (text:gsub("{n}", function() return tostring(n) end):gsub("{id}", function() return id end))',
      'end',
      'request = function()',
      '  n = n + 1',
      '  local id = #ids > 0 and ids[(n % #ids) + 1] or "{id}"',
      '  return wrk.format(nil, fill(path_t, id), nil, body_t and fill(body_t, id) or nil)',
      'end',
    )
  } else if (spec.body !== undefined) {
    lines.push(`wrk.body = ${lua(render(spec.path, spec.body, [], tag, 0).body ?? '')}`)
  }
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format(\'\\nWRK_JSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"mean_us":%f}\\n\',',
    '    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,',
    '    latency:percentile(50), latency:percentile(99), latency.mean))',
    'end',
  )
  return `${lines.join('\n')}\n`
}

interface WrkJson {
  requests: number
  duration_us: number
  connect: number
  read: number
  write: number
  status: number
  timeout: number
  p50_us: number
  p99_us: number
  mean_us: number
}

/** The wrk running now, if any: stopped with this process when its parent goes away. */
let wrkGroup: number | undefined

async function runWrk(spec: LoadSpec, seconds: number): Promise<LoadResult> {
  const tag = randomBytes(4).toString('hex')
  const script = path.join(os.tmpdir(), `bench-wrk-${process.pid}-${tag}.lua`)
  writeFileSync(script, wrkScript(spec, tag))
  // wrk takes whole seconds; the URL's path is the static request's (a dynamic one sets its own).
  const url = `${spec.url}${isDynamic(spec.path, spec.body) ? '/' : spec.path}`
  const args = ['-t1', `-c${spec.connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--timeout', '10s']
  // Through bash, whose `times` prints its children's CPU time (user, system) after wrk exits:
  // how busy wrk itself was, so a raw run that falls short says whether wrk or the machine was the limit.
  const child = spawn(
    'bash',
    ['-c', 'wrk "$@"; code=$?; times; exit $code', 'wrk', ...args, '--latency', '-s', script, url],
    // Its own process group, so wrk goes with the shell when the load stops early.
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  )
  wrkGroup = child.pid
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  child.stderr.on('data', (chunk) => {
    out += chunk
  })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  wrkGroup = undefined
  rmSync(script, { force: true })
  const line = /WRK_JSON (\{.*\})/.exec(out)?.[1]
  if (code !== 0 || !line) {
    throw new Error(`wrk failed (exit ${code}): ${out.slice(-2000)}`)
  }
  const r = JSON.parse(line) as WrkJson
  const measured = r.duration_us / 1e6
  // `times`: the shell's own line, then its children's: "0m1.234s 0m0.567s".
  const children = out.trim().split('\n').at(-1) ?? ''
  const cpuSeconds = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]))
  const ok = r.requests - r.status
  return {
    engine: 'wrk',
    generatorBusy: cpuSeconds.length === 2 ? ((cpuSeconds[0] ?? 0) + (cpuSeconds[1] ?? 0)) / measured : Number.NaN,
    requests: r.requests,
    ok,
    seconds: measured,
    rps: ok / measured,
    p50: r.p50_us / 1000,
    p99: r.p99_us / 1000,
    mean: r.mean_us / 1000,
    non2xx: r.status,
    errors: r.connect + r.read + r.write,
    timeouts: r.timeout,
    statuses: {},
  }
}

const MAX_SAMPLES = 5_000_000

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) {
    return Number.NaN
  }
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[index] as number
}

async function runAutocannon(spec: LoadSpec, seconds: number): Promise<LoadResult> {
  const tag = randomBytes(4).toString('hex')
  let n = 0
  const dynamic = isDynamic(spec.path, spec.body)
  const staticBody = render(spec.path, spec.body, [], tag, 0).body
  const setupRequest = (request: { method?: string; path?: string; body?: string }) => {
    if (dynamic) {
      n++
      const next = render(spec.path, spec.body, spec.ids ?? [], tag, n)
      request.path = next.path
      if (next.body !== undefined) {
        request.body = next.body
      }
    }
    return request
  }
  const headers = { ...spec.headers, ...(spec.body === undefined ? {} : { 'content-type': 'application/json' }) }
  const samples = new Float64Array(MAX_SAMPLES)
  let count = 0
  const started = performance.now()
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: seconds,
    ...(spec.rate ? { overallRate: spec.rate } : {}),
    requests: [
      {
        method: spec.method,
        path: spec.path,
        headers,
        ...(staticBody === undefined ? {} : { body: staticBody }),
        setupRequest,
      },
    ],
  })
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (statusCode >= 200 && statusCode < 300 && count < MAX_SAMPLES) {
      samples[count++] = responseTime
    }
  })
  const result = await instance
  const elapsed = (performance.now() - started) / 1000
  const sorted = samples.subarray(0, count).sort()
  let sum = 0
  for (const value of sorted) {
    sum += value
  }
  const statuses: Record<string, number> = {}
  for (const [status, { count: c }] of Object.entries(result.statusCodeStats ?? {})) {
    statuses[status] = c
  }
  return {
    engine: 'autocannon',
    generatorBusy: Number.NaN,
    requests: result.requests.total,
    ok: count,
    seconds: elapsed,
    rps: count / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: count > 0 ? sum / count : Number.NaN,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statuses,
  }
}

async function main(spec: LoadSpec): Promise<void> {
  const engine = spec.rate !== undefined || spec.engine === 'autocannon' || !hasWrk() ? 'autocannon' : 'wrk'
  const run = engine === 'wrk' ? runWrk : runAutocannon
  if (spec.warmupSeconds > 0) {
    await run(spec, spec.warmupSeconds)
  }
  process.stdout.write('{"warm":true}\n')
  await new Promise((resolve) => process.stdin.once('data', resolve))
  for (let round = 0; round < spec.rounds; round++) {
    process.stdout.write(`${JSON.stringify({ start: round })}\n`)
    // The parent reads the server's CPU time on that line: give it the moment before the load starts.
    await new Promise((resolve) => setTimeout(resolve, 50))
    process.stdout.write(`${JSON.stringify(await run(spec, spec.seconds))}\n`)
  }
}

/** Stops the wrk running now, in its own process group (see runWrk), then this process. */
function stopLoad(code: number): never {
  try {
    if (wrkGroup !== undefined) {
      process.kill(-wrkGroup, 'SIGTERM')
    }
  } finally {
    process.exit(code)
  }
}

/**
 * The load stops with its parent instead of running out its rounds against servers that are gone:
 * when the parent's end closes this process's stdin (it finished, failed or was stopped), and on
 * Ctrl-C, which no longer reaches wrk in its own process group.
 */
function stopWithParent(): void {
  process.stdin.on('end', () => stopLoad(1))
  process.once('SIGINT', () => stopLoad(130))
  process.once('SIGTERM', () => stopLoad(143))
  // Read from the start, the warm-up included: a stream at rest never sees its end. Nothing is
  // lost: the parent writes its line only after the warm-up, once main() listens for it.
  process.stdin.resume()
}

// The spec as JSON in argv[2] (bench/run.ts imports only the types and hasWrk).
if (process.argv[1]?.endsWith(`${path.sep}load.ts`) && process.argv[2]) {
  stopWithParent()
  main(JSON.parse(process.argv[2]) as LoadSpec)
    .catch((error: unknown) => {
      process.stderr.write(`load: ${String(error)}\n`)
      process.exitCode = 1
    })
    // A flowing stdin would keep the process alive once the rounds are done.
    .finally(() => process.stdin.pause())
}
