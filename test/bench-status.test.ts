// The bench's measurement (bench/measure.ts) against a node:http server that keeps the service's
// http_requests_total: a scenario whose answers are not the status it expects fails the run, even
// a success status that wrk does not count as an error (a 304 turned into 200s).
import { spawnSync } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { measure } from '../bench/measure.js'

const hasWrk = spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined
const OPTIONS = { rounds: 1, warmup: 0.5, seconds: 1, connections: 2, engine: 'wrk' as const }

let server: Server | undefined
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())))

/** Answers 200 to everything, and counts its answers as the service's /metrics does. */
async function serveTwoHundreds(): Promise<string> {
  let answered = 0
  let metricsAnswered = 0
  server = createServer((request, response) => {
    if (request.url === '/metrics') {
      response.end(
        `http_requests_total{method="GET",route="/x",status="200"} ${answered}\n` +
          `http_requests_total{method="GET",route="/metrics",status="200"} ${metricsAnswered++}\n`,
      )
      return
    }
    answered++
    response.end('{}')
  })
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

describe.skipIf(!hasWrk)('a measurement', () => {
  it('fails when the server answered another status than the scenario expects', async () => {
    const url = await serveTwoHundreds()
    const request = { method: 'GET' as const, path: '/x', status: 304, headers: {} }
    await expect(measure(OPTIONS, false, { url, pid: process.pid }, request, 'polling')).rejects.toThrow(
      /^polling: answered \{"200":\d+\} under load, expected only 304/,
    )
  })

  it('passes when every answer has the expected status, its own /metrics requests left out', async () => {
    const url = await serveTwoHundreds()
    const request = { method: 'GET' as const, path: '/x', status: 200, headers: {} }
    const measured = await measure(OPTIONS, false, { url, pid: process.pid }, request, 'steady')
    expect(measured.rounds).toHaveLength(1)
  })
})
