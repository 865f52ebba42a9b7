// The SDK's session through a validating proxy: Prism (`prism proxy --errors`) in front of the real
// server checks every request and response against the served OpenAPI document. Opt-in (Prism takes
// a few seconds to start): `npm run sdk:prism` (SDK_PRISM=1).
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestHarness, type TestAccount, type TestHarness } from '../../../test/harness.js'
import { freePort } from '../../../test/processes.js'
import { staticResolver } from '../../../test/static-resolver.js'
import { ApiError, createClient, type FetchLike } from '../src/index.js'

const enabled = process.env.SDK_PRISM === '1'

describe.skipIf(!enabled)('the SDK through Prism (prism proxy --errors)', () => {
  let t: TestHarness
  let acme: TestAccount
  let prism: ChildProcess
  let prismOutput = ''
  let base = ''
  const dir = mkdtempSync(path.join(tmpdir(), 'sdk-prism-'))
  const violations: string[] = []

  beforeAll(async () => {
    t = await createTestHarness({
      dialect: 'sqlite',
      resolve: staticResolver({ 'hooks.example.com': ['93.184.216.34'] }),
    })
    acme = await t.createAccount('Acme')
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    const upstream = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    const document = path.join(dir, 'openapi.json')
    writeFileSync(document, (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).body)
    const port = await freePort()
    const bin = path.join(
      path.dirname(createRequire(import.meta.url).resolve('@stoplight/prism-cli/package.json')),
      'dist/index.js',
    )
    prism = spawn(
      process.execPath,
      [bin, 'proxy', '--errors', document, upstream, '-p', String(port), '-h', '127.0.0.1'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Prism did not start: ${prismOutput}`)), 60_000)
      const read = (chunk: Buffer) => {
        prismOutput += chunk
        if (prismOutput.includes('Prism is listening')) {
          clearTimeout(timer)
          resolve()
        }
      }
      prism.stdout?.on('data', read)
      prism.stderr?.on('data', read)
      prism.once('exit', (code) => reject(new Error(`Prism exited (${code}): ${prismOutput}`)))
    })
    base = `http://127.0.0.1:${port}`
  }, 90_000)
  afterAll(async () => {
    prism?.kill()
    await t?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** fetch that writes down every violation Prism reports (its `sl-violations` header or its own error body). */
  const checked: FetchLike = async (request) => {
    const response = await fetch(request)
    const where = `${request.method} ${new URL(request.url).pathname}${new URL(request.url).search} → ${response.status}`
    const header = response.headers.get('sl-violations')
    if (header) {
      violations.push(`${where}: ${header}`)
    }
    const body = await response.clone().text()
    if (body.includes('stoplight.io/prism/errors')) {
      violations.push(`${where}: ${body}`)
    }
    return response
  }

  it('reports no violation on any request of the session', async () => {
    const sdk = createClient({ baseUrl: base, apiKey: acme.key, fetch: checked, maxRetries: 0 })
    /** One step; an error Prism generated (already in `violations`) does not end the session. */
    const step = async <T>(run: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await run()
      } catch (error) {
        if (error instanceof ApiError && String(error.problem.type).includes('stoplight.io/prism')) {
          return undefined
        }
        throw error
      }
    }
    const expectError = async (run: () => Promise<unknown>, status: number) => {
      const error = await step(run).catch((e: unknown) => e)
      if (error !== undefined) {
        expect(error).toBeInstanceOf(ApiError)
        expect((error as ApiError).status).toBe(status)
      }
    }
    const walk = async (items: AsyncIterable<unknown>) => {
      for await (const _ of items) {
        // every page, `after` included
      }
    }
    await step(() => sdk.me())
    const ada = await step(() => sdk.contacts.create({ email: 'ada@example.com', first_name: 'Ada', tags: ['vip'] }))
    const adaId = ada?.id ?? 'con_01JAAAAAAAAAAAAAAAAAAAAAAA'
    const grace = { email: 'grace@example.com', tags: ['vip'] }
    await step(() => sdk.contacts.create(grace, { idempotencyKey: 'prism-key-1' }))
    await step(() => sdk.contacts.create(grace, { idempotencyKey: 'prism-key-1' })) // the replay
    await step(() => sdk.contacts.list()) // every optional parameter omitted
    await step(() => sdk.contacts.list({ limit: 1, order: 'desc', tag: 'vip' }))
    await step(() => walk(sdk.contacts.all({ limit: 1, order: 'asc' })))
    await step(() => sdk.contacts.get(adaId))
    await step(() => sdk.contacts.update(adaId, { last_name: 'Lovelace', custom_fields: { plan: 'pro' } }))
    await step(() => sdk.contacts.upsert({ email: 'ada@example.com', company: 'Analytical Engines' }))
    await step(() => sdk.contacts.upsert({ email: 'new@example.com' }))
    await expectError(() => sdk.contacts.get('con_01JAAAAAAAAAAAAAAAAAAAAAAA'), 404)
    await expectError(() => sdk.contacts.create({ email: 'ada@example.com' }), 409)
    await expectError(() => createClient({ baseUrl: base, apiKey: 'service_live_nope', fetch: checked }).me(), 401)
    await step(() => sdk.events.list())
    const events = await step(() => sdk.events.list({ limit: 2 }))
    await step(() => walk(sdk.events.all({ limit: 2 })))
    await step(() => sdk.events.get(events?.events[0]?.id ?? 'evt_01JAAAAAAAAAAAAAAAAAAAAAAA'))
    const endpoint = await step(() => sdk.webhookEndpoints.create({ url: 'https://hooks.example.com/in' }))
    const endpointId = endpoint?.id ?? 'we_01JAAAAAAAAAAAAAAAAAAAAAAA'
    await step(() => sdk.webhookEndpoints.get(endpointId))
    await step(() => sdk.webhookEndpoints.update(endpointId, { description: 'CRM sync' }))
    await step(() => sdk.webhookEndpoints.list())
    await step(() => sdk.webhookEndpoints.list({ limit: 10 }))
    await step(() => sdk.webhookEndpoints.rollSecret(endpointId))
    const delivery = await step(() => sdk.webhookEndpoints.test(endpointId))
    await step(() => sdk.webhookEndpoints.deliveries.list(endpointId))
    await step(() => sdk.webhookEndpoints.deliveries.list(endpointId, { limit: 10 }))
    await step(() => sdk.webhookEndpoints.deliveries.get(endpointId, delivery?.id ?? 'wd_01JAAAAAAAAAAAAAAAAAAAAAAA'))
    await step(() => sdk.webhookEndpoints.delete(endpointId))
    await step(() => sdk.contacts.delete(adaId))
    expect(violations).toEqual([])
  })
})
