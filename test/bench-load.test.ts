// The bench's load generator (bench/load.ts over wrk) against a recording node:http server: the
// requests are the scenario's (templates filled per request, ids in turn, headers, bodies), and
// what it reports is what the server answered (answers, error statuses). Not a speed test: the
// counts, not the rates, are asserted. Skipped where wrk is not installed (CI installs it).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createInterface } from 'node:readline'
import { afterEach, describe, expect, it } from 'vitest'
import type { LoadResult, LoadSpec } from '../bench/load.js'

const hasWrk = spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined

interface Seen {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
}

async function recordingServer(status: (n: number) => number) {
  const seen: Seen[] = []
  const server = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk) => {
      body += chunk
    })
    request.on('end', () => {
      seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body })
      response.writeHead(status(seen.length), { 'content-type': 'application/json' })
      response.end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { seen, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

let child: ChildProcess | undefined
afterEach(() => {
  child?.kill('SIGKILL')
})

/** Runs bench/load.ts for one round, as bench/run.ts does; returns its result. */
async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  child = spawn(process.execPath, ['--import', 'tsx', 'bench/load.ts', JSON.stringify(spec)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const results: LoadResult[] = []
  for await (const line of createInterface({ input: child.stdout as NodeJS.ReadableStream })) {
    const message = JSON.parse(line) as LoadResult | { warm: true } | { start: number }
    if ('warm' in message) {
      child.stdin?.write('go\n')
    } else if (!('start' in message)) {
      results.push(message)
    }
  }
  expect(results).toHaveLength(1)
  return results[0] as LoadResult
}

describe.skipIf(!hasWrk)('bench/load.ts with wrk', () => {
  it('fills {n}, {tag} and {id} per request, sends the headers and the JSON body, and counts what was answered', async () => {
    const { seen, server, url } = await recordingServer(() => 200)
    try {
      const result = await runLoad({
        url,
        method: 'PATCH',
        path: '/things/{id}?n={n}',
        headers: { authorization: 'Bearer k' },
        body: '{"email":"a.{tag}.{n}@example.com"}',
        ids: ['x1', 'x2', 'x3'],
        connections: 4,
        warmupSeconds: 0,
        rounds: 1,
        seconds: 1,
      })
      expect(result.engine).toBe('wrk')
      expect(seen.length).toBeGreaterThan(10)
      // wrk counts the answers it read within its time; the server may have answered a few more.
      expect(result.ok).toBeGreaterThan(0)
      expect(result.ok).toBeLessThanOrEqual(seen.length)
      expect(result.non2xx).toBe(0)
      expect(result.generatorBusy).toBeGreaterThan(0)
      for (const request of seen) {
        expect(request.method).toBe('PATCH')
        expect(request.headers.authorization).toBe('Bearer k')
        expect(request.headers['content-type']).toBe('application/json')
        expect(request.url).toMatch(/^\/things\/x[123]\?n=\d+$/)
        const n = /n=(\d+)/.exec(request.url)?.[1]
        expect(JSON.parse(request.body).email).toMatch(new RegExp(`^a\\.[0-9a-f]{8}\\.${n}@example\\.com$`))
      }
      // Unique per request, and the ids taken in turn.
      expect(new Set(seen.map((r) => r.body)).size).toBe(seen.length)
      expect(new Set(seen.map((r) => r.url.split('?')[0])).size).toBe(3)
    } finally {
      server.close()
    }
  })

  it('sends a static request as it is, and reports answers ≥ 400 as errors, not throughput', async () => {
    const { seen, server, url } = await recordingServer((n) => (n % 2 === 0 ? 500 : 200))
    try {
      const result = await runLoad({
        url,
        method: 'GET',
        path: '/api/v1/me',
        headers: { authorization: 'Bearer k' },
        connections: 2,
        warmupSeconds: 0,
        rounds: 1,
        seconds: 1,
      })
      expect(seen.every((r) => r.method === 'GET' && r.url === '/api/v1/me' && r.body === '')).toBe(true)
      expect(result.non2xx).toBeGreaterThan(0)
      expect(Math.abs(result.non2xx - result.ok)).toBeLessThanOrEqual(2)
      expect(result.rps).toBeCloseTo(result.ok / result.seconds)
    } finally {
      server.close()
    }
  })

  it('stops its wrk and exits when its parent closes the pipe in the middle of a round', async () => {
    const { seen, server, url } = await recordingServer(() => 200)
    try {
      const spec: LoadSpec = {
        url,
        method: 'GET',
        path: '/api/v1/me',
        headers: {},
        connections: 2,
        warmupSeconds: 0,
        rounds: 1,
        seconds: 60,
      }
      const load = spawn(process.execPath, ['--import', 'tsx', 'bench/load.ts', JSON.stringify(spec)], {
        stdio: ['pipe', 'pipe', 'inherit'],
      })
      child = load
      const lines = createInterface({ input: load.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]()
      expect((await lines.next()).value).toBe('{"warm":true}')
      load.stdin?.write('go\n')
      expect((await lines.next()).value).toBe('{"start":0}')
      while (seen.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 50))
      }

      // As when the bench fails or is stopped: its end closes the pipe.
      const exited = once(load, 'exit')
      load.stdin?.end()
      let timer: NodeJS.Timeout | undefined
      const ranOn = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the load generator ran on')), 10_000)
      })
      const [code] = (await Promise.race([exited, ranOn]).finally(() => clearTimeout(timer))) as [number | null]
      expect(code).toBe(1)
      // Its wrk went with it: the server's count stops moving.
      await new Promise((resolve) => setTimeout(resolve, 300))
      const settled = seen.length
      await new Promise((resolve) => setTimeout(resolve, 500))
      expect(seen.length).toBe(settled)
      expect(spawnSync('pgrep', ['-f', `bench-wrk-${load.pid}-`]).status).toBe(1)
    } finally {
      server.close()
    }
  })
})
