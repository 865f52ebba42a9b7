// The load generator, in its own process (pinned to its own core by bench/run.ts), for one scenario:
// a warm-up run, then the line {"warm":true} on stdout; after a line on stdin (the parent pins
// what it must meanwhile), `rounds` measured runs, each result as one JSON line on stdout.
// Latencies are recorded here with sub-millisecond precision (autocannon's own histogram rounds to
// whole milliseconds).
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'

export interface LoadSpec {
  url: string
  method: 'GET' | 'POST' | 'PATCH'
  path: string
  headers: Record<string, string>
  /** Request bodies: none, a new unique contact per request, or a change to one of `ids` per request. */
  body: 'none' | 'create' | 'patch'
  ids?: string[]
  connections: number
  /** Paced load: requests per second from all connections together (autocannon's overallRate). */
  rate?: number
  warmupSeconds: number
  rounds: number
  seconds: number
}

export interface LoadResult {
  requests: number
  seconds: number
  rps: number
  /** Milliseconds, over 2xx responses. */
  p50: number
  p99: number
  mean: number
  non2xx: number
  errors: number
  timeouts: number
  statuses: Record<string, number>
}

const MAX_SAMPLES = 5_000_000

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) {
    return Number.NaN
  }
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[index] as number
}

async function runLoad(spec: LoadSpec, seconds: number): Promise<LoadResult> {
  const tag = randomBytes(4).toString('hex')
  let n = 0
  const setupRequest = (request: { method?: string; path?: string; body?: string }) => {
    n++
    if (spec.body === 'create') {
      request.body = JSON.stringify({
        email: `bench.${tag}.${n}@example.com`,
        first_name: 'Bench',
        last_name: `Load ${n}`,
        tags: ['bench'],
        custom_fields: { source: 'autocannon', n },
      })
    } else if (spec.body === 'patch') {
      const ids = spec.ids ?? []
      request.path = `${spec.path}/${ids[n % ids.length]}`
      request.body = JSON.stringify({ job_title: `Title ${tag} ${n}` })
    }
    return request
  }
  const headers = { ...spec.headers, ...(spec.body === 'none' ? {} : { 'content-type': 'application/json' }) }
  const samples = new Float64Array(MAX_SAMPLES)
  let count = 0
  const started = performance.now()
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: seconds,
    ...(spec.rate ? { overallRate: spec.rate } : {}),
    requests: [{ method: spec.method, path: spec.path, headers, setupRequest }],
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
    requests: result.requests.total,
    seconds: elapsed,
    // 2xx per second: an error page must not count as throughput.
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
  if (spec.warmupSeconds > 0) {
    await runLoad(spec, spec.warmupSeconds)
  }
  process.stdout.write('{"warm":true}\n')
  await new Promise((resolve) => process.stdin.once('data', resolve))
  process.stdin.pause()
  for (let round = 0; round < spec.rounds; round++) {
    process.stdout.write(`${JSON.stringify(await runLoad(spec, spec.seconds))}\n`)
  }
}

// The spec as JSON in argv[2] (bench/run.ts imports only the types).
main(JSON.parse(process.argv[2] ?? '{}') as LoadSpec).catch((error: unknown) => {
  process.stderr.write(`load: ${String(error)}\n`)
  process.exitCode = 1
})
