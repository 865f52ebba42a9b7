// The webhook benches' receiver: plain node:http answering every POST 200 "ok", recording each
// delivery's lag and receipt; GET /__stats, POST /__reset (bench/README.md#webhooks).
import { createServer } from 'node:http'

const port = Number(process.argv[2])
const MAX = 4_000_000
const lags = new Float64Array(MAX)
let count = 0
let firstAt = 0
let lastAt = 0
let bad = 0
let byPath = {}

const percentile = (sorted, p) =>
  sorted.length === 0
    ? null
    : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]

createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/__stats') {
    const sorted = lags.slice(0, Math.min(count, MAX)).sort()
    const body = JSON.stringify({
      count,
      bad,
      firstAt,
      lastAt,
      byPath,
      lag: {
        p50: percentile(sorted, 50),
        p90: percentile(sorted, 90),
        p99: percentile(sorted, 99),
        max: percentile(sorted, 100),
      },
    })
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(body)
    return
  }
  if (request.method === 'POST' && request.url === '/__reset') {
    count = 0
    bad = 0
    firstAt = 0
    lastAt = 0
    byPath = {}
    response.end('reset')
    request.resume()
    return
  }
  const chunks = []
  request.on('data', (chunk) => chunks.push(chunk))
  request.on('end', () => {
    const now = Date.now()
    let timestamp = Number.NaN
    try {
      timestamp = Date.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')).timestamp)
    } catch {
      // counted as bad below
    }
    if (Number.isFinite(timestamp) && request.headers['webhook-signature']) {
      if (count < MAX) {
        lags[count] = now - timestamp
      }
      count++
      firstAt ||= now
      lastAt = now
      byPath[request.url] = (byPath[request.url] ?? 0) + 1
    } else {
      bad++
    }
    response.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 })
    response.end('ok')
  })
}).listen(port, '127.0.0.1')
