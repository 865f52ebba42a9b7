// `contacts-api serve --api-only` (an API process in ≤ 100 MB): the API, its OpenAPI
// document, the error catalogue and the probes are served; the web app and Swagger UI are not,
// and neither they nor the heavy modules only they use are ever loaded. Real processes on a real
// port, each with a preload (test/fixtures/record-modules.mjs) that records every module it loads;
// the full `serve` is the control: the same recorder must see the web app and Swagger UI there.
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { startServerProcess } from './processes.js'

const RECORDER = path.resolve(import.meta.dirname, 'fixtures', 'record-modules.mjs')

/** Modules an API-only process must not load: the web app's own, Swagger UI, and what only they use. */
const WEB_ONLY = [
  /\/(src|dist)\/web\//,
  /\/node_modules\/@fastify\/swagger-ui\//,
  /\/node_modules\/@fastify\/(helmet|cookie|formbody|multipart)\//,
  /\/node_modules\/@node-rs\/argon2/,
  /\/node_modules\/csv-(parse|stringify)\//,
]

interface Server {
  base: string
  /** SIGTERM, wait for the exit, and return the URLs of every module the process loaded. */
  stopAndListModules(): Promise<string[]>
  child: ChildProcess
}

/** `serve` with `args` (test/processes.ts), with a preload that records every module it loads. */
async function start(dir: string, env: NodeJS.ProcessEnv, args: string[]): Promise<Server> {
  const modulesFile = path.join(dir, `modules-${args.join('')}-${env.WEBHOOK_WORKER ?? ''}.txt`)
  const server = await startServerProcess({ ...env, RECORD_MODULES_FILE: modulesFile }, 'serve', {
    nodeArgs: ['--import', RECORDER],
    args,
  })
  return {
    base: server.base,
    child: server.child,
    async stopAndListModules() {
      expect(await server.stop()).toBe(0)
      return readFileSync(modulesFile, 'utf8').split('\n')
    },
  }
}

describe('contacts-api serve --api-only', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-api-only-'))
  const env = {
    ...process.env,
    DATABASE_URL: `sqlite:${path.join(dir, 'contacts.sqlite')}`,
    LOG_LEVEL: 'warn',
    WEBHOOK_WORKER: 'off',
    REDIS_URL: '',
  }
  let apiOnly: Server
  let full: Server
  let key = ''

  beforeAll(async () => {
    // Together, on a new SQLite file: both migrate it at once (test/sqlite-migrate-race.test.ts).
    // The full serve runs the webhook worker, as by default: the control for the worker's modules.
    ;[apiOnly, full] = await Promise.all([
      start(dir, env, ['--api-only']),
      start(dir, { ...env, WEBHOOK_WORKER: 'on' }, []),
    ])
    const out: string[] = []
    expect(
      await runCli(['accounts', 'create', '--name', 'Acme', '--json'], env, { out: (t) => out.push(t), err: () => {} }),
    ).toBe(0)
    key = JSON.parse(out[0] ?? '{}').api_key.secret
  }, 120_000)
  afterAll(() => {
    apiOnly?.child.kill('SIGKILL')
    full?.child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  it('serves the API, the OpenAPI document, the error catalogue and the probes', async () => {
    const me = await fetch(`${apiOnly.base}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })
    expect(me.status).toBe(200)
    expect(((await me.json()) as { name: string }).name).toBe('Acme')
    const created = await fetch(`${apiOnly.base}/api/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ada@example.com' }),
    })
    expect(created.status).toBe(201)
    const document = await fetch(`${apiOnly.base}/api/v1/openapi.json`)
    expect(document.status).toBe(200)
    expect(Object.keys(((await document.json()) as { paths: object }).paths)).toContain('/api/v1/contacts')
    // Problem types point at the catalogue (`/docs/errors#code`), so it stays.
    expect((await fetch(`${apiOnly.base}/docs/errors`)).status).toBe(200)
    expect((await fetch(`${apiOnly.base}/healthz`)).status).toBe(200)
    expect((await fetch(`${apiOnly.base}/readyz`)).status).toBe(200)
  })

  it('answers 404 problems for the web app and Swagger UI, which the full serve has', async () => {
    for (const page of ['/', '/sign-in', '/app', '/assets/app.css', '/docs', '/docs/static/index.html']) {
      const res = await fetch(`${apiOnly.base}${page}`, { redirect: 'manual' })
      expect(res.status, page).toBe(404)
      expect(res.headers.get('content-type'), page).toMatch(/^application\/problem\+json/)
      expect(((await res.json()) as { code: string }).code, page).toBe('not_found')
    }
    expect((await fetch(`${apiOnly.base}/sign-in`, { method: 'POST' })).status).toBe(404)
    expect((await fetch(`${full.base}/`, { redirect: 'manual' })).status).toBe(302)
    expect((await fetch(`${full.base}/sign-in`)).status).toBe(200)
    expect((await fetch(`${full.base}/docs/static/index.html`)).status).toBe(200)
  })

  it('is an option of serve alone', async () => {
    const errors: string[] = []
    expect(await runCli(['migrate', '--api-only'], env, { out: () => {}, err: (t) => errors.push(t) })).toBe(2)
    expect(errors.join('')).toContain('--api-only does not apply to "migrate"')
  })

  it('never loads the web app, Swagger UI, argon2 or the CSV libraries; the full serve loads what it serves, and no more', async () => {
    const [lean, whole] = await Promise.all([apiOnly.stopAndListModules(), full.stopAndListModules()])
    const matching = (modules: string[], pattern: RegExp) => modules.filter((url) => pattern.test(url))
    // The recorder sees the API's modules in both (else an empty list would pass).
    for (const modules of [lean, whole]) {
      expect(matching(modules, /\/(src|dist)\/contacts\/contacts\.routes\./)).toHaveLength(1)
    }
    for (const pattern of WEB_ONLY) {
      expect(matching(lean, pattern), String(pattern)).toEqual([])
    }
    expect(matching(whole, /\/(src|dist)\/web\/web\.routes\./)).toHaveLength(1)
    expect(matching(whole, /\/node_modules\/@fastify\/swagger-ui\//).length).toBeGreaterThan(0)
    // Loaded at first use (a sign-in, an import, an export), not with the app: none happened here.
    expect(matching(whole, /\/node_modules\/(@node-rs\/argon2|csv-parse|csv-stringify)/)).toEqual([])
    // The delivery worker (and the undici that its node:http import brings) only where it runs (src/server.ts).
    expect(matching(lean, /\/(src|dist)\/webhooks\/delivery-worker\./)).toEqual([])
    expect(matching(whole, /\/(src|dist)\/webhooks\/delivery-worker\./)).toHaveLength(1)
    // Loaded only when REDIS_URL is set (src/deps.ts), and it is not here.
    for (const modules of [lean, whole]) {
      expect(matching(modules, /\/node_modules\/ioredis\//)).toEqual([])
    }
  })
})
