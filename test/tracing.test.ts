// OpenTelemetry over OTLP/HTTP (JSON), against a real receiver in the test and a real server
// process: spans named by route template, an incoming traceparent continued, database statements
// as children, a webhook attempt's span as the traceparent its receiver gets, the trace id in the log
// lines; and an exporter that cannot reach its collector costs requests nothing.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { freePort, type ServerProcess, startServerProcess } from './processes.js'
import { httpSignUp } from './web-client.js'
import { startReceiver, type WebhookReceiver } from './webhook-receiver.js'

/** A new account's API key, made by the CLI on the database the server will use. */
async function accountKey(name: string, env: Record<string, string>): Promise<string> {
  let out = ''
  await runCli(['accounts', 'create', '--name', name, '--json'], env, { out: (text) => (out += text), err: () => {} })
  return (JSON.parse(out) as { api_key: { secret: string } }).api_key.secret
}

interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>
}

/** A collector: every span of every POST /v1/traces (OTLP/HTTP with JSON bodies). */
async function startCollector() {
  const spans: OtlpSpan[] = []
  const server = http.createServer((request, response) => {
    let body = ''
    request.on('data', (chunk) => {
      body += chunk
    })
    request.on('end', () => {
      if (request.url === '/v1/traces') {
        const parsed = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> }
        for (const resource of parsed.resourceSpans) {
          for (const scope of resource.scopeSpans) {
            spans.push(...scope.spans)
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(resolve)),
  }
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes?.find((a) => a.key === key)?.value
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue))
}

async function until<T>(read: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (value !== undefined) {
      return value
    }
    if (Date.now() > deadline) {
      throw new Error('not seen in time')
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('tracing over OTLP/HTTP', () => {
  let dir: string
  let collector: Awaited<ReturnType<typeof startCollector>>
  let server: ServerProcess
  let receiver: WebhookReceiver
  let key: string
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tracing-'))
    collector = await startCollector()
    receiver = await startReceiver()
    const env = {
      DATABASE_URL: `sqlite:${path.join(dir, 'db.sqlite')}`,
      SECRET: randomBytes(32).toString('hex'),
      LOG_LEVEL: 'info',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'contacts-api-test',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    }
    key = await accountKey('Traced', env)
    server = await startServerProcess(env)
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
    await collector?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const api = (url: string, init: RequestInit = {}) =>
    fetch(`${server.base}/api/v1${url}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
    })

  it('a request is a server span named by its route, continuing the caller’s trace, its statements its children', async () => {
    const traceId = randomBytes(16).toString('hex')
    const parentId = randomBytes(8).toString('hex')
    const writeTrace = randomBytes(16).toString('hex')
    const created = await api('/contacts', {
      method: 'POST',
      body: JSON.stringify({ email: 'traced@example.com' }),
      headers: { traceparent: `00-${writeTrace}-${randomBytes(8).toString('hex')}-01` },
    })
    const { id } = (await created.json()) as { id: string }
    const res = await api(`/contacts/${id}`, { headers: { traceparent: `00-${traceId}-${parentId}-01` } })
    expect(res.status).toBe(200)
    const span = await until(() =>
      collector.spans.find((s) => s.traceId === traceId && s.name === 'GET /api/v1/contacts/{id}'),
    )
    expect(span.parentSpanId).toBe(parentId)
    expect(attribute(span, 'http.response.status_code')).toBe(200)
    expect(attribute(span, 'http.route')).toBe('/api/v1/contacts/:id')
    const children = await until(() => {
      const found = collector.spans.filter((s) => s.parentSpanId === span.spanId)
      return found.length > 0 ? found : undefined
    })
    expect(children.map((s) => s.name)).toContain('select contacts')
    // A write's statements too, its precompiled ones included.
    const write = await until(() =>
      collector.spans.find((s) => s.traceId === writeTrace && s.name === 'POST /api/v1/contacts'),
    )
    const written = await until(() => {
      const names = collector.spans.filter((s) => s.parentSpanId === write.spanId).map((s) => s.name)
      return names.includes('insert contacts') ? names : undefined
    })
    expect(written).toContain('insert events')
    const patchTrace = randomBytes(16).toString('hex')
    await api(`/contacts/${id}`, {
      method: 'PATCH',
      body: JSON.stringify({ first_name: 'Traced' }),
      headers: { traceparent: `00-${patchTrace}-${randomBytes(8).toString('hex')}-01` },
    })
    await until(() => collector.spans.find((s) => s.traceId === patchTrace && s.name === 'update contacts'))
    // The log line of the request names the trace.
    await until(() => (server.output().includes(`"trace_id":"${traceId}"`) ? true : undefined))
  })

  it('a webhook attempt is a client span, and its receiver gets that span as traceparent', async () => {
    const endpoint = await api('/webhook_endpoints', {
      method: 'POST',
      body: JSON.stringify({ url: `${receiver.url}/hooks` }),
    })
    expect(endpoint.status).toBe(201)
    await api('/contacts', { method: 'POST', body: JSON.stringify({ email: 'hooked@example.com' }) })
    const [delivery] = await receiver.waitFor(1, 10_000)
    const [, traceId, spanId] =
      /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(delivery?.headers.traceparent)) ?? []
    const span = await until(() => collector.spans.find((s) => s.spanId === spanId))
    expect(span).toMatchObject({ traceId, name: 'webhook delivery' })
    expect(attribute(span, 'http.response.status_code')).toBe(200)
  })

  it('no statement is a trace of its own (the worker polls and the outcome writes are not traced)', async () => {
    // Whatever ran so far (worker polls every 50 ms, deliveries, the purge at start).
    await new Promise((resolve) => setTimeout(resolve, 500))
    const roots = collector.spans.filter((s) => !s.parentSpanId).map((s) => s.name)
    expect(roots.length).toBeGreaterThan(0)
    expect(roots.filter((name) => /^(select|insert|update|delete|begin|commit)\b/.test(name))).toEqual([])
  })

  it('a CSV import runs in a span of its own, its statements its children', async () => {
    const { web, accountId } = await httpSignUp(server.base, 'importer@example.com', 'Imports')
    await web.get(`/app/${accountId}/contacts/import`)
    const started = await web.upload(
      `/app/${accountId}/contacts/import`,
      'a.csv',
      'email,name\nimported@example.com,Imported\n',
    )
    expect(started.status).toBe(303)
    const importId = /imports\/(imp_[0-9A-Za-z]+)/.exec(started.location ?? '')?.[1]
    const span = await until(() =>
      collector.spans.find((s) => s.name === 'csv import' && attribute(s, 'import.id') === importId),
    )
    expect(span.parentSpanId ?? '').toBe('')
  })
})

describe('tracing off', () => {
  // prom-client loads @opentelemetry/api (for exemplars) whenever it is installed; the SDK is what
  // costs memory and start-up time.
  it('loads no OpenTelemetry SDK unless OTEL_EXPORTER_OTLP_ENDPOINT is set', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tracing-off-'))
    // Every module the process resolves whose name is OpenTelemetry's, said on stderr.
    const hook = path.join(dir, 'hook.mjs')
    writeFileSync(
      hook,
      `import { registerHooks } from 'node:module'
registerHooks({ resolve(specifier, context, next) {
  if (specifier.includes('@opentelemetry')) process.stderr.write('LOADED ' + specifier + '\\n')
  return next(specifier, context)
} })
`,
    )
    const base = { DATABASE_URL: `sqlite:${path.join(dir, 'db.sqlite')}`, SECRET: randomBytes(32).toString('hex') }
    try {
      for (const [env, loads] of [
        [base, false],
        // The control: the same check sees the SDK when tracing is on.
        [{ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` }, true],
      ] as const) {
        const server = await startServerProcess(env, 'serve', { nodeArgs: ['--import', hook] })
        const res = await fetch(`${server.base}/healthz`)
        expect(res.status).toBe(200)
        await server.stop()
        expect(server.output().includes('LOADED @opentelemetry/sdk-node'), JSON.stringify(Object.keys(env))).toBe(loads)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

/** The otel_spans_dropped_total series of a server's /metrics, by reason. */
async function spansDropped(base: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text()
  return Object.fromEntries(
    [...text.matchAll(/^otel_spans_dropped_total\{reason="(\w+)"\} (\d+)$/gm)].map(([, reason, n]) => [
      reason,
      Number(n),
    ]),
  )
}

describe('tracing with its collector down or stuck', () => {
  // A collector that takes the connection and never answers: the batch in flight holds the queue.
  let stuck: http.Server
  beforeAll(async () => {
    stuck = http.createServer(() => {})
    await new Promise<void>((resolve) => stuck.listen(0, '127.0.0.1', resolve))
  })
  afterAll(async () => {
    stuck.closeAllConnections()
    await new Promise((resolve) => stuck.close(resolve))
  })

  it.each([
    ['down', async () => `http://127.0.0.1:${await freePort()}`, 'export_failed'],
    ['stuck', async () => `http://127.0.0.1:${(stuck.address() as AddressInfo).port}`, 'queue_full'],
  ] as const)(
    'requests answer as usual while it is %s, the spans lost counted',
    async (_, endpoint, reason) => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tracing-down-'))
      const env = {
        DATABASE_URL: `sqlite:${path.join(dir, 'db.sqlite')}`,
        SECRET: randomBytes(32).toString('hex'),
        OTEL_EXPORTER_OTLP_ENDPOINT: await endpoint(),
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_BSP_MAX_QUEUE_SIZE: '16',
        // The exporter gives up on a batch after this (its retries included): the drop is counted sooner.
        OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      }
      const key = await accountKey('Down', env)
      const server = await startServerProcess(env)
      try {
        // Start-up's statements may have filled the small queue already: the count must grow.
        const before = await spansDropped(server.base)
        expect(Object.keys(before).sort()).toEqual(['export_failed', 'queue_full'])
        for (let i = 0; i < 50; i++) {
          const res = await fetch(`${server.base}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })
          expect(res.status).toBe(200)
        }
        await until(async () => ((await spansDropped(server.base))[reason] ?? 0) > (before[reason] ?? 0) || undefined)
      } finally {
        await server.stop()
        rmSync(dir, { recursive: true, force: true })
      }
    },
    60_000,
  )
})
