// Leaked-key reports (docs/key-safety.md): GitHub's partner format, signed with ECDSA P-256. A
// reported key of ours is revoked at once (or only flagged with notify), audited and named on its
// account's API & Webhooks page; every refused report changes nothing.
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { shownKey, signUp, type WebClient } from '../../test/web-client.js'
import { eventually } from '../../test/webhook-processes.js'
import { listAudit } from '../audit/audit.js'
import { runCli } from '../cli/cli.js'
import { dispatchEvents } from '../webhooks/delivery-dispatch.js'
import { hashApiKey } from './api-key.js'
import { parseScanningKeys } from './secret-scanning.js'

const REPORT = '/api/v1/secret_scanning/report'
const github = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
const stranger = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
const KEY_ID = '90a421169f0a406205f1563a953312f0be898d3c7b6c06b681aa86a874555f4a'

/** SECRET_SCANNING_PUBLIC_KEYS' file, as GitHub publishes it. */
function publicKeysFile(): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'scanning-keys-')), 'keys.json')
  const pem = github.publicKey.export({ type: 'spki', format: 'pem' }).toString()
  writeFileSync(file, JSON.stringify({ public_keys: [{ key_identifier: KEY_ID, key: pem, is_current: true }] }))
  return file
}

/** What `read` returns once it is not empty (test/webhook-processes.ts eventually), or after 5 s whatever it returns then. */
async function settled<T>(read: () => Promise<T[]>): Promise<T[]> {
  let found: T[] = []
  await eventually(async () => {
    found = await read()
    return found.length > 0
  }, 5000)
  return found
}

const signed = (body: string, key: KeyObject = github.privateKey) =>
  sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64')

describe.each(testDialects())('leaked-key reports on %s', (dialect) => {
  let t: TestHarness
  let notifying: TestHarness
  const keysFile = publicKeysFile()
  beforeAll(async () => {
    t = await createTestHarness({ dialect, env: { SECRET_SCANNING_PUBLIC_KEYS: keysFile } })
    notifying = await createTestHarness({
      dialect,
      env: { SECRET_SCANNING_PUBLIC_KEYS: keysFile, SECRET_SCANNING_ACTION: 'notify' },
    })
  })
  afterAll(async () => {
    await t.close()
    await notifying.close()
  })

  const report = (h: TestHarness, body: string, headers: Record<string, string> = {}) =>
    h.app.inject({
      method: 'POST',
      url: REPORT,
      payload: body,
      headers: {
        'content-type': 'application/json',
        'github-public-key-identifier': KEY_ID,
        'github-public-key-signature': signed(body),
        ...headers,
      },
    })
  const works = async (h: TestHarness, key: string) =>
    (await h.app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${key}` } }))
      .statusCode === 200

  /** Signs up, and issues a key from the web app's keys page (`test`: the test mode's). */
  async function webKey(h: TestHarness, email: string, test = false) {
    const owner = await signUp(h.app, email)
    const home = `/app/${owner.accountId}${test ? '/test' : ''}`
    await owner.client.get(`${home}/settings/api`)
    const res = await owner.client.post(`${home}/settings/api/keys`, {
      name: 'CI deploy',
      scope: 'full',
      expires: 'never',
    })
    const location = String(res.headers.location)
    const key = shownKey((await owner.client.get(location)).body) as string
    const id = /keys\/(key_\w+)\/created/.exec(location)?.[1] as string
    return { ...owner, key, id, home }
  }
  const page = (client: WebClient, home: string) => client.get(`${home}/settings/api`)

  it('revokes a reported key at once, labels every token, audits it and names it on the keys page', async () => {
    const owner = await webKey(t, 'leak-owner@example.com')
    const test = await webKey(t, 'leak-test@example.com', true)
    const unknown = `service_live_${'A'.repeat(32)}`
    const body = JSON.stringify([
      { token: owner.key, type: 'contacts_api_key', url: 'https://github.com/o/r/blob/abc/.env', source: 'content' },
      { token: test.key, type: 'contacts_api_key', url: 'https://gist.github.com/x', source: 'gist' },
      { token: unknown, type: 'contacts_api_key', url: 'https://example.com', source: 'content' },
      { token: 'ghp_not_ours', type: 'other', url: '', source: 'content' },
    ])
    const res = await report(t, body)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json()).toEqual([
      { token_hash: hashApiKey(owner.key), token_type: 'contacts_api_key', label: 'true_positive' },
      { token_hash: hashApiKey(test.key), token_type: 'contacts_api_key', label: 'true_positive' },
      { token_hash: hashApiKey(unknown), token_type: 'contacts_api_key', label: 'false_positive' },
      { token_hash: hashApiKey('ghp_not_ours'), token_type: 'other', label: 'false_positive' },
    ])
    expect(await works(t, owner.key)).toBe(false)
    expect(await works(t, test.key)).toBe(false)

    const audit = await listAudit(t.db, owner.accountId, 10)
    expect(
      audit
        .filter((e) => e.action !== 'api_key.created')
        .map(({ action, actorUserId, detail }) => ({ action, actorUserId, detail })),
    ).toEqual([
      {
        action: 'api_key.revoked',
        actorUserId: null,
        detail: { name: 'CI deploy', reason: 'exposed', source: 'content' },
      },
      {
        action: 'api_key.exposed',
        actorUserId: null,
        detail: { name: 'CI deploy', url: 'https://github.com/o/r/blob/abc/.env', source: 'content', action: 'revoke' },
      },
    ])
    const shown = await page(owner.client, owner.home)
    expect(shown.body).toContain('was found in public at <a href="https://github.com/o/r/blob/abc/.env"')
    expect(shown.body).toContain('It was revoked at once')
    expect(shown.body).toContain('Key revoked: found in public')
    expect(shown.body).toContain('a leaked-key report')
    // Announced to each key's account and mode: an api_key.exposed event, which webhooks may subscribe to.
    const exposedEvents = async (accountId: string, test: boolean) => {
      const reader = await t.createKey({ id: accountId, name: '', key: '', keyId: '' }, { test })
      // On PostgreSQL the feed serves an event once every older transaction has ended
      // (src/events/feed-position.ts): under a busy pooler, a moment after the commit.
      return settled(async () => {
        const feed = await t.app.inject({
          method: 'GET',
          url: '/api/v1/events?type=api_key.exposed',
          headers: { authorization: `Bearer ${reader}` },
        })
        expect(feed.statusCode, feed.body).toBe(200)
        return feed.json().events as unknown[]
      })
    }
    const [event, ...more] = await exposedEvents(owner.accountId, false)
    expect(more).toEqual([])
    expect(event).toMatchObject({
      object: 'event',
      type: 'api_key.exposed',
      livemode: true,
      data: {
        object: { object: 'api_key', id: owner.id, name: 'CI deploy', livemode: true, revoked_at: expect.any(String) },
        source_url: 'https://github.com/o/r/blob/abc/.env',
      },
    })
    expect(JSON.stringify(event)).not.toContain(owner.key)
    const [testEvent] = await exposedEvents(test.accountId, true)
    expect(testEvent).toMatchObject({ livemode: false, data: { object: { id: test.id, livemode: false } } })
    // The same report again: labels alike, nothing new revoked, the banner stays.
    expect((await report(t, body)).json()).toEqual(res.json())
  })

  it('queues the api_key.exposed event to an endpoint subscribed to it, not to one of contact events', async () => {
    const h = await createTestHarness({
      dialect,
      env: { SECRET_SCANNING_PUBLIC_KEYS: keysFile, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
    })
    try {
      const acme = await h.createAccount()
      const endpoint = async (events: string[]) => {
        const res = await h.inject(acme, {
          method: 'POST',
          url: '/api/v1/webhook_endpoints',
          payload: { url: 'http://127.0.0.1:9/hooks', events },
        })
        expect(res.statusCode, res.body).toBe(201)
        return res.json().id as string
      }
      const keyHook = await endpoint(['api_key.exposed'])
      const contactHook = await endpoint(['contact.created'])
      const leaked = await h.createKey(acme)
      const body = JSON.stringify([
        { token: leaked, type: 'contacts_api_key', url: 'https://x.test/a', source: 'content' },
      ])
      expect((await report(h, body)).statusCode).toBe(200)
      const deliveries = await settled(async () => {
        await dispatchEvents(h.db, new Date())
        return h.db.selectFrom('webhook_deliveries').select(['endpoint_id', 'event_type']).execute()
      })
      expect(deliveries).toEqual([{ endpoint_id: keyHook, event_type: 'api_key.exposed' }])
      expect(deliveries.some((d) => d.endpoint_id === contactHook)).toBe(false)
    } finally {
      await h.close()
    }
  })

  it('with SECRET_SCANNING_ACTION=notify flags the key and leaves it working', async () => {
    const owner = await webKey(notifying, 'leak-notify@example.com')
    const body = JSON.stringify([
      { token: owner.key, type: 'contacts_api_key', url: 'javascript:alert(1)', source: 'content' },
    ])
    expect((await report(notifying, body)).json()).toEqual([
      { token_hash: hashApiKey(owner.key), token_type: 'contacts_api_key', label: 'true_positive' },
    ])
    expect(await works(notifying, owner.key)).toBe(true)
    const shown = await page(owner.client, owner.home)
    expect(shown.body).toContain('It still works: roll it now')
    // Only http(s) URLs become links; another is shown as text.
    expect(shown.body).not.toContain('href="javascript:')
    expect(shown.body).toContain('was found in public at javascript:alert(1)')
  })

  it('a key revoked before it was reported stays revoked once, and the banner says it already was', async () => {
    const owner = await webKey(t, 'leak-earlier@example.com')
    await owner.client.get(`${owner.home}/settings/api/keys/${owner.id}/revoke`)
    const revoked = await owner.client.post(`${owner.home}/settings/api/keys/${owner.id}/revoke`, {})
    expect(revoked.statusCode, revoked.body.slice(0, 300)).toBe(303)
    // The page tells the two apart by time (revoked before the report, or at it): a later millisecond.
    await new Promise((resolve) => setTimeout(resolve, 2))
    const body = JSON.stringify([
      { token: owner.key, type: 'contacts_api_key', url: 'https://example.com/x', source: 'content' },
    ])
    expect((await report(t, body)).json()).toEqual([
      { token_hash: hashApiKey(owner.key), token_type: 'contacts_api_key', label: 'true_positive' },
    ])
    const actions = (await listAudit(t.db, owner.accountId, 10)).map((entry) => entry.action)
    expect(actions.filter((action) => action === 'api_key.revoked')).toHaveLength(1)
    expect(actions).toContain('api_key.exposed')
    const shown = await page(owner.client, owner.home)
    expect(shown.body).toContain('It had been revoked already.')
    expect(shown.body).not.toContain('It was revoked at once')
  })

  it('takes a long URL (kept cut short) and a token named twice once', async () => {
    const owner = await webKey(t, 'leak-long@example.com')
    const url = `https://example.com/${'x'.repeat(5000)}`
    const entry = { token: owner.key, type: 'contacts_api_key', url, source: 'content' }
    const res = await report(t, JSON.stringify([entry, entry]))
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().map((label: { label: string }) => label.label)).toEqual(['true_positive', 'true_positive'])
    const audit = await listAudit(t.db, owner.accountId, 10)
    const exposed = audit.filter((e) => e.action === 'api_key.exposed')
    expect(exposed).toHaveLength(1)
    expect(String(exposed[0]?.detail.url)).toHaveLength(2048)
  })

  it('refuses unsigned, badly signed, oversized and malformed reports, and changes nothing', async () => {
    const owner = await webKey(t, 'leak-refused@example.com')
    const body = JSON.stringify([{ token: owner.key, type: 'contacts_api_key', url: '', source: 'content' }])
    const refusals = [
      [{ 'github-public-key-signature': '' }, 401],
      [{ 'github-public-key-signature': signed(body, stranger.privateKey) }, 401],
      [{ 'github-public-key-identifier': 'unknown' }, 401],
      [{ 'github-public-key-signature': signed(`${body} `) }, 401],
      [{ 'github-public-key-signature': 'bm90IGEgc2lnbmF0dXJl' }, 401],
    ] as const
    for (const [headers, status] of refusals) {
      const res = await report(t, body, headers)
      expect(res.statusCode, JSON.stringify(headers)).toBe(status)
      expect(res.json()).toMatchObject({ code: 'invalid_signature' })
    }
    const big = JSON.stringify([{ token: owner.key, type: 'x', url: 'x'.repeat(1024 * 1024), source: 'content' }])
    expect((await report(t, big)).statusCode).toBe(413)
    const many = JSON.stringify(Array.from({ length: 10_000 }, () => ({ token: owner.key, type: 'x' })))
    expect((await report(t, many)).json()).toMatchObject({ status: 400, code: 'invalid_request' })
    for (const malformed of ['{"token":"x"}', '[{"type":"x"}]', '[1]', 'not json']) {
      expect((await report(t, malformed)).json(), malformed).toMatchObject({ status: 400, code: 'invalid_request' })
    }
    expect(await works(t, owner.key)).toBe(true)
    expect((await listAudit(t.db, owner.accountId, 10)).map((e) => e.action)).toEqual(['api_key.created'])
  })
})

describe('keys report-leak, on the command line', () => {
  it('revokes a leaked key; a string that is no key exits 2; neither is printed back', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'report-leak-'))
    const env = { DATABASE_URL: `sqlite:${path.join(dir, 'contacts.sqlite')}`, LOG_LEVEL: 'silent' }
    const lines: string[] = []
    const cli = (args: string[]) =>
      runCli(args, env, { out: (text) => lines.push(text), err: (text) => lines.push(text) })
    try {
      expect(await cli(['accounts', 'create', '--name', 'Leaky', '--json'])).toBe(0)
      const { api_key: created } = JSON.parse(lines.pop() ?? '{}')
      // SECRET_SCANNING_ACTION holds without a keys file: only flagged.
      const notify = { ...env, SECRET_SCANNING_ACTION: 'notify' }
      expect(
        await runCli(['keys', 'report-leak', created.secret], notify, {
          out: (x) => lines.push(x),
          err: (x) => lines.push(x),
        }),
      ).toBe(0)
      expect(lines.pop()).toMatch(/^Flagged /)
      const unknown = `service_live_${'B'.repeat(32)}`
      expect(await cli(['keys', 'report-leak', unknown])).toBe(2)
      expect(await cli(['keys', 'report-leak', created.secret])).toBe(0)
      const printed = lines.join('\n')
      expect(printed).toMatch(new RegExp(`Revoked ${created.id} \\(Default\\)`))
      expect(printed).not.toContain(created.secret.slice(-8))
      expect(printed).not.toContain('B'.repeat(32))
      expect(await cli(['keys', 'list', '--account', created.account_id, '--json'])).toBe(0)
      const { api_keys: keys } = JSON.parse(lines.pop() ?? '{}')
      expect(keys).toEqual([expect.objectContaining({ id: created.id, status: 'revoked' })])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('leaked-key reports without SECRET_SCANNING_PUBLIC_KEYS', () => {
  it('the route does not exist', async () => {
    const t = await createTestHarness({ dialect: 'sqlite' })
    try {
      const res = await t.app.inject({
        method: 'POST',
        url: REPORT,
        payload: '[]',
        headers: { 'content-type': 'application/json' },
      })
      expect(res.statusCode).toBe(404)
    } finally {
      await t.close()
    }
  })
})

describe('SECRET_SCANNING_PUBLIC_KEYS, read', () => {
  const pem = github.publicKey.export({ type: 'spki', format: 'pem' }).toString()
  const file = (keys: Array<{ key_identifier: string; key: string }>) => JSON.stringify({ public_keys: keys })
  it('refuses a private key, a repeated identifier and an unreadable key, naming the key', () => {
    const privatePem = github.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
    expect(() => parseScanningKeys(file([{ key_identifier: 'a', key: privatePem }]))).toThrow(
      /key a is not a PEM public key/,
    )
    expect(() =>
      parseScanningKeys(
        file([
          { key_identifier: 'a', key: pem },
          { key_identifier: 'a', key: pem },
        ]),
      ),
    ).toThrow(/a appears twice/)
    const broken = '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----'
    expect(() => parseScanningKeys(file([{ key_identifier: 'b', key: broken }]))).toThrow(/key b cannot be read/)
    expect(parseScanningKeys(file([{ key_identifier: 'a', key: pem }])).size).toBe(1)
  })
})
