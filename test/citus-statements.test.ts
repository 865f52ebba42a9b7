// Every query on tenant data names its tenant (docs/design.md#identifiers-and-storage, docs/design.md#scale; docs/scale-out.md): a session that
// sends every API operation of the OpenAPI document, walks the web application, runs the webhook
// worker and the retention purges, and reads the events feed; every statement it sends to
// PostgreSQL is captured at the driver and checked. A statement on a distributed table must carry
// an equality on its distribution column (Citus routes it to one shard), unless it is one of the
// global queries listed by name in test/citus-statements.ts.
import { PGlite } from '@electric-sql/pglite'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hasAnyAccount } from '../src/accounts/accounts.store.js'
import { findApiKeyById } from '../src/api-keys/api-keys.store.js'
import { purgeExpiredEvents } from '../src/events/events.store.js'
import { purgeExpiredIdempotencyKeys } from '../src/idempotency/idempotency.js'
import { purgeFinishedImports } from '../src/imports/imports.store.js'
import { purgeSignInFailures, SIGN_IN_WINDOW_MS } from '../src/rate-limit/sign-in-throttle.js'
import { purgeExpiredRequestLogs } from '../src/request-logs/request-logs.store.js'
import { purgeExpiredDeliveries } from '../src/webhooks/deliveries.store.js'
import { startDeliveryWorker } from '../src/webhooks/delivery-worker.js'
import { placementOf, readCatalog } from './citus-plan.js'
import { type Distribution, GLOBAL_QUERIES, routingOf, type Statement } from './citus-statements.js'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'
import { signUp, webClient } from './web-client.js'
import { startReceiver } from './webhook-receiver.js'

const postgresDialects = testDialects().filter((dialect) => dialect !== 'sqlite')

/**
 * Captures every statement text the app sends, at the two drivers' query methods (node-postgres
 * for the server, PGlite in process), for the phase named by `phase.now`. It sees what reaches
 * those methods while it is installed: src/db/database.ts binds each new connection's `query` when
 * the connection opens, after this, so the named statements come through too (the capture test
 * below fails if a change ever hides them). It does not see PGlite's `exec` (only the harness's
 * TRUNCATE uses it), the parameters' values, or code paths the session does not run.
 */
function captureStatements() {
  const statements: Statement[] = []
  const phase = { now: 'migrations' }
  type Query = (this: unknown, ...args: unknown[]) => unknown
  const pgProto = pg.Client.prototype as unknown as { query: Query }
  const pgliteProto = PGlite.prototype as unknown as { query: Query }
  const pgQuery = pgProto.query
  const pgliteQuery = pgliteProto.query
  const record = (first: unknown) => {
    const text = typeof first === 'string' ? first : (first as { text?: unknown } | null)?.text
    if (typeof text === 'string') {
      statements.push({ phase: phase.now, text })
    }
  }
  pgProto.query = function (this: unknown, ...args: unknown[]) {
    record(args[0])
    return pgQuery.apply(this, args)
  }
  pgliteProto.query = function (this: unknown, ...args: unknown[]) {
    record(args[0])
    return pgliteQuery.apply(this, args)
  }
  return {
    statements,
    phase,
    restore() {
      pgProto.query = pgQuery
      pgliteProto.query = pgliteQuery
    },
  }
}

type Operation = { method: string; path: string }

/** Every operation of the served OpenAPI document. */
async function documentedOperations(t: TestHarness): Promise<Operation[]> {
  const document = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as {
    paths: Record<string, Record<string, unknown>>
  }
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((method) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map((method) => ({ method: method.toUpperCase(), path })),
  )
}

describe.each(postgresDialects)('every tenant statement names its account, on %s', (dialect) => {
  let capture: ReturnType<typeof captureStatements>
  let t: TestHarness
  let distribution: Distribution
  const sent = new Set<string>()

  beforeAll(async () => {
    capture = captureStatements()
    try {
      t = await createTestHarness({ dialect, env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_TIMEOUT_MS: '2000' } })
      capture.phase.now = 'catalog'
      const catalog = await readCatalog(t.deps.database)
      // The distributed tables of the plan (test/citus-plan.ts), as this schema has them.
      distribution = new Map(
        catalog.tables.flatMap((table): Array<[string, string]> => {
          const placement = placementOf(table)
          return placement?.kind === 'distributed' ? [[table.name, placement.column]] : []
        }),
      )
      capture.phase.now = 'session'
      await runSession(t, sent)
    } finally {
      capture.restore()
    }
  }, 120_000)
  afterAll(async () => {
    await t?.close()
  })

  it('the session sent every operation of the OpenAPI document', async () => {
    const missing = (await documentedOperations(t)).filter((op) => !sent.has(`${op.method} ${op.path}`))
    expect(missing).toEqual([])
  })

  it('captured the statements (the capture itself works)', () => {
    const session = capture.statements.filter((s) => s.phase === 'session')
    expect(session.length).toBeGreaterThan(300)
    expect(session.some((s) => /insert into "?contacts"?\b/.test(s.text))).toBe(true)
    expect(session.some((s) => /from "webhook_deliveries"/.test(s.text))).toBe(true)
  })

  it('every statement on a distributed table is routed by its account, or is a listed global query', () => {
    const unlisted = new Map<string, string>()
    const seen = new Set<string>()
    for (const statement of capture.statements) {
      const routing = routingOf(statement.text, distribution)
      if (routing.kind !== 'multi-shard') {
        continue
      }
      const global = GLOBAL_QUERIES.find((query) => query.matches(statement, routing.tables))
      if (global) {
        seen.add(global.name)
      } else {
        unlisted.set(routing.normalized, statement.phase)
      }
    }
    expect([...unlisted].map(([text, phase]) => `${phase}: ${text}`)).toEqual([])
    // Each listed query was met: the list holds no query the code no longer sends.
    const unmet = GLOBAL_QUERIES.filter((query) => !seen.has(query.name) && query.dialects.includes(dialect)).map(
      (query) => query.name,
    )
    expect(unmet).toEqual([])
  })
})

/** Drives the app as its users would, recording which documented operations it sent. */
async function runSession(t: TestHarness, sent: Set<string>): Promise<void> {
  const receiver = await startReceiver()
  const acme = await t.createAccount('Acme')
  const other = await t.createAccount('Other')
  // Two accounts' events wait before the worker starts: its first fan-out batch spans accounts.
  for (const account of [acme, other]) {
    await t.inject(account, {
      method: 'POST',
      url: '/api/v1/webhook_endpoints',
      payload: { url: `${receiver.url}/early` },
    })
    await t.inject(account, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'early@example.com' } })
  }
  const worker = startDeliveryWorker({
    db: t.db,
    clock: t.deps.clock,
    metrics: t.deps.metrics,
    log: { warn: () => {} },
    secretKey: t.deps.webhooks.secretKey,
    timeoutMs: t.deps.config.webhooks.timeoutMs,
    retryScheduleS: t.deps.config.webhooks.retryScheduleS,
    allowPrivateUrls: true,
    pollMs: 20,
  })
  try {
    await apiSession(t, acme, receiver.url, sent)
    // On the server the fan-out waits for the snapshot fence, which another suite's open
    // transaction can hold back for a while.
    await receiver.waitFor(6, 30_000)
    await webSession(t)
    // What `serve` runs at start and hourly (src/server.ts), and the CLI's `keys revoke KEY_ID`.
    const now = t.deps.clock.now()
    await purgeExpiredIdempotencyKeys(t.db, now)
    await purgeSignInFailures(t.db, now, SIGN_IN_WINDOW_MS)
    await purgeExpiredEvents(t.db, now, t.deps.config.eventRetentionDays)
    await purgeExpiredDeliveries(t.db, now, t.deps.config.eventRetentionDays)
    await purgeFinishedImports(t.db, now, t.deps.config.eventRetentionDays)
    await purgeExpiredRequestLogs(t.db, now, t.deps.config.requestLog.retentionDays)
    await findApiKeyById(t.db, acme.keyId, t.deps.config.keyPrefix)
    await hasAnyAccount(t.db)
    await t.app.inject({ method: 'GET', url: '/metrics' })
    for (const url of ['/healthz', '/readyz']) {
      sent.add(`GET ${url}`)
      expect((await t.app.inject({ method: 'GET', url })).statusCode).toBe(200)
    }
  } finally {
    await worker.stop()
    await receiver.close()
  }
}

async function apiSession(t: TestHarness, acme: TestAccount, hookUrl: string, sent: Set<string>): Promise<void> {
  const call = async (
    method: string,
    path: string,
    url: string,
    payload?: object,
    headers?: Record<string, string>,
  ) => {
    sent.add(`${method} /api/v1${path}`)
    const res = await t.inject(acme, {
      method: method as 'GET',
      url: `/api/v1${url}`,
      ...(payload ? { payload } : {}),
      ...(headers ? { headers } : {}),
    })
    expect(res.statusCode, `${method} ${url}: ${res.body.slice(0, 300)}`).toBeLessThan(400)
    return (res.body ? res.json() : {}) as Record<string, unknown> & { id: string }
  }
  await call('GET', '/me', '/me')
  const endpoint = await call('POST', '/webhook_endpoints', '/webhook_endpoints', { url: `${hookUrl}/hooks` })
  const ada = await call(
    'POST',
    '/contacts',
    '/contacts',
    { email: 'ada@example.com', tags: ['vip'] },
    {
      'idempotency-key': 'citus-1',
    },
  )
  await call(
    'POST',
    '/contacts',
    '/contacts',
    { email: 'ada@example.com', tags: ['vip'] },
    { 'idempotency-key': 'citus-1' },
  )
  for (const n of [1, 2, 3]) {
    await call('POST', '/contacts', '/contacts', { email: `c${n}@example.com`, first_name: `C${n}`, tags: ['t'] })
  }
  await call('POST', '/contacts/upsert', '/contacts/upsert', { email: 'ada@example.com', last_name: 'Lovelace' })
  await call('POST', '/contacts/upsert', '/contacts/upsert', { email: 'upserted@example.com' })
  await call('GET', '/contacts/{id}', `/contacts/${ada.id}`)
  await call('PATCH', '/contacts/{id}', `/contacts/${ada.id}`, { first_name: 'Ada', tags: ['vip', 'x'] })
  await call('POST', '/contacts/batch', '/contacts/batch', {
    operations: [
      { op: 'create', contact: { email: 'b1@example.com', first_name: 'B', tags: ['t'] } },
      { op: 'create', contact: { email: 'ada@example.com' } },
      { op: 'upsert', contact: { email: 'c1@example.com', company: 'Acme' } },
      { op: 'upsert', contact: { email: 'b2@example.com' } },
      { op: 'update', id: ada.id, contact: { job_title: 'Countess' } },
      { op: 'delete', id: 'con_unknown' },
    ],
  })
  for (const query of [
    '',
    '?limit=2',
    '?q=ada',
    '?tag=vip',
    '?q=c&tag=t',
    '?updated_after=2020-01-01T00:00:00.000Z',
    '?email=ada@example.com',
  ]) {
    const page = await call('GET', '/contacts', `/contacts${query}`)
    if (typeof page.next_cursor === 'string') {
      await call(
        'GET',
        '/contacts',
        `/contacts${query}${query ? '&' : '?'}after=${encodeURIComponent(page.next_cursor)}`,
      )
    }
  }
  const events = await call('GET', '/events', '/events?limit=2')
  if (typeof events.next_cursor === 'string') {
    await call('GET', '/events', `/events?limit=2&after=${encodeURIComponent(events.next_cursor)}`)
  }
  await call('GET', '/events', '/events?type=contact.created')
  const event = (events.events as Array<{ id: string }>)[0]
  await call('GET', '/events/{id}', `/events/${event?.id}`)
  const logs = await call('GET', '/request_logs', '/request_logs?limit=2')
  if (typeof logs.next_cursor === 'string') {
    await call('GET', '/request_logs', `/request_logs?limit=2&after=${encodeURIComponent(logs.next_cursor)}`)
  }
  await call(
    'GET',
    '/request_logs',
    '/request_logs?status=2xx&method=GET&path=/api/v1/contacts&created_after=2020-01-01T00:00:00Z',
  )
  const [logged] = logs.request_logs as Array<{ id: string }>
  await call('GET', '/request_logs/{id}', `/request_logs/${logged?.id}`)
  await call('GET', '/webhook_endpoints', '/webhook_endpoints')
  await call('GET', '/webhook_endpoints/{id}', `/webhook_endpoints/${endpoint.id}`)
  await call('PATCH', '/webhook_endpoints/{id}', `/webhook_endpoints/${endpoint.id}`, { description: 'CRM' })
  await call('POST', '/webhook_endpoints/{id}/roll_secret', `/webhook_endpoints/${endpoint.id}/roll_secret`, {})
  await call('POST', '/webhook_endpoints/{id}/test', `/webhook_endpoints/${endpoint.id}/test`, {})
  const deliveries = await call(
    'GET',
    '/webhook_endpoints/{id}/deliveries',
    `/webhook_endpoints/${endpoint.id}/deliveries`,
  )
  await call('GET', '/webhook_endpoints/{id}/deliveries', `/webhook_endpoints/${endpoint.id}/deliveries?status=pending`)
  const delivery = (deliveries.deliveries as Array<{ id: string }>)[0]
  await call(
    'GET',
    '/webhook_endpoints/{id}/deliveries/{delivery_id}',
    `/webhook_endpoints/${endpoint.id}/deliveries/${delivery?.id}`,
  )
  await call(
    'POST',
    '/webhook_endpoints/{id}/deliveries/{delivery_id}/retry',
    `/webhook_endpoints/${endpoint.id}/deliveries/${delivery?.id}/retry`,
    {},
  )
  await call(
    'GET',
    '/webhook_endpoints/{id}/deliveries/{delivery_id}/attempts',
    `/webhook_endpoints/${endpoint.id}/deliveries/${delivery?.id}/attempts`,
  )
  await call('POST', '/webhook_endpoints/{id}/recover', `/webhook_endpoints/${endpoint.id}/recover`, {
    since: '2020-01-01T00:00:00Z',
  })
  await call('DELETE', '/contacts/{id}', `/contacts/${ada.id}`)
  const spare = await call('POST', '/webhook_endpoints', '/webhook_endpoints', { url: `${hookUrl}/spare` })
  await call('DELETE', '/webhook_endpoints/{id}', `/webhook_endpoints/${spare.id}`)
}

/** Signs up, then walks every page the app links to from its own pages, and posts its main forms. */
async function webSession(t: TestHarness): Promise<void> {
  const { client, accountId } = await signUp(t.app, 'owner@example.com')
  const member = await signUp(t.app, 'member@example.com', 'Member Co')
  const app = `/app/${accountId}`
  const posts: Array<[string, string, Record<string, string>]> = [
    [`${app}/contacts/new`, `${app}/contacts`, { email: 'web@example.com', first_name: 'Web', tags: 'a, b' }],
    [`${app}/settings/api`, `${app}/settings/api/keys`, { name: 'Web key', scope: 'full', expires: 'never' }],
    [`${app}/settings/api/webhooks/new`, `${app}/settings/api/webhooks`, { url: 'http://127.0.0.1:9/x', events: '*' }],
    [`${app}/settings/members`, `${app}/settings/members`, { email: 'member@example.com', role: 'member' }],
    [`/app/accounts/new`, `/app/accounts`, { name: 'Second' }],
  ]
  let invitationLink: string | undefined
  for (const [page, url, fields] of posts) {
    await client.get(page)
    const res = await client.post(url, fields)
    expect(res.statusCode, `${url}: ${res.body.slice(0, 300)}`).toBeLessThan(400)
    if (url === `${app}/settings/members`) {
      // The invitation's link is shown once, on the page the form redirects to.
      const shown = await client.get(String(res.headers.location))
      invitationLink = /id="invitation-link" type="text" readonly value="([^"]+)"/.exec(shown.body)?.[1]
    }
  }
  // The invited person opens the link (found by its token's digest alone) and accepts it.
  expect(invitationLink).toBeDefined()
  const invitationPath = new URL(invitationLink as string).pathname
  expect((await member.client.get(invitationPath)).statusCode).toBe(200)
  expect((await member.client.post(`${invitationPath}/accept`, {})).statusCode).toBe(303)
  // A crawl of same-site links (GET only: every destructive action is a POST behind a confirmation page).
  const queue = ['/app', `${app}/contacts`, `${app}/contacts?q=web`, `${app}/settings/api`]
  const visited = new Set<string>()
  while (queue.length > 0 && visited.size < 80) {
    const url = queue.shift() as string
    if (visited.has(url)) {
      continue
    }
    visited.add(url)
    const res = await client.get(url)
    expect(res.statusCode, url).toBeLessThan(500)
    for (const [, href] of res.body.matchAll(/href="(\/app\/[^"#]*)"/g)) {
      const link = (href as string).replaceAll('&amp;', '&')
      if (!visited.has(link)) {
        queue.push(link)
      }
    }
  }
  expect(visited.size).toBeGreaterThan(10)
  // A CSV import (upsert by email), as the browser's multipart form sends it.
  await client.get(`${app}/contacts/import`)
  const boundary = '----citusBoundary'
  const imported = await t.app.inject({
    method: 'POST',
    url: `${app}/contacts/import`,
    headers: {
      cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      'content-type': `multipart/form-data; boundary=${boundary}`,
    },
    payload: [
      `--${boundary}\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n${client.csrf()}\r\n`,
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.csv"\r\nContent-Type: text/csv\r\n\r\n`,
      'email,first_name,tags\r\nweb@example.com,Webbed,a\r\nnew@example.com,New,b\r\n\r\n',
      `--${boundary}--\r\n`,
    ].join(''),
  })
  expect(imported.statusCode, imported.body.slice(0, 300)).toBeLessThan(400)
  // Confirmed actions on what the crawl found: edit and delete a contact, revoke a key.
  for (const url of visited) {
    if (/\/contacts\/con_\w+$/.test(url)) {
      await client.get(url)
      await client.post(url, { email: 'edited@example.com', first_name: 'Edited' })
    }
  }
  for (const url of visited) {
    if (/\/contacts\/con_\w+\/delete$/.test(url) || /\/keys\/key_\w+\/revoke$/.test(url)) {
      await client.get(url)
      await client.post(url, {})
    }
  }
  await client.post('/sign-out', {})
  await client.get('/sign-in')
  await client.post('/sign-in', { email: 'owner@example.com', password: 'wrong-password-here' })
  await client.post('/sign-in', { email: 'owner@example.com', password: 'correct-horse-battery' })
  await webClient(t.app).get('/sign-in')
}

describe('the routing check on statements written by hand', () => {
  const distribution: Distribution = new Map([
    ['accounts', 'id'],
    ['contacts', 'account_id'],
    ['contact_tags', 'account_id'],
  ])
  const kind = (text: string) => routingOf(text, distribution).kind

  it('routes statements tied to one account', () => {
    expect(kind('select * from "contacts" where "account_id" = $1 and "id" = $2')).toBe('router')
    expect(kind('select * from contacts where contacts.account_id in ($1)')).toBe('router')
    expect(kind('insert into "contacts" ("account_id", "id") values ($1, $2)')).toBe('router')
    expect(kind('select 1 from accounts where id = $1 for update')).toBe('router')
    expect(
      kind(
        'select c.id from contact_tags t join contacts c on c.account_id = t.account_id and c.id = t.contact_id where t.account_id = $1',
      ),
    ).toBe('router')
    expect(kind('select * from users where email_lower = $1')).toBe('none')
  })

  it('flags statements that would reach every shard', () => {
    expect(kind('select * from "contacts" where "id" = $1')).toBe('multi-shard')
    expect(kind('select * from contacts where account_id in ($1, $2)')).toBe('multi-shard')
    expect(kind('insert into contacts (id, body) values ($1, $2)')).toBe('multi-shard')
    expect(kind('select * from accounts limit 1')).toBe('multi-shard')
    expect(kind('delete from contacts where (account_id, id) in (select account_id, id from contacts limit $1)')).toBe(
      'multi-shard',
    )
    // Joined without the account: the second table is not tied to the first one's shard.
    expect(kind('select c.id from contact_tags t join contacts c on c.id = t.contact_id where t.account_id = $1')).toBe(
      'multi-shard',
    )
    // An account_id compared to something else than a parameter or another account_id.
    expect(kind('select * from contacts where account_id > $1')).toBe('multi-shard')
    expect(kind('select * from contacts where not_account_id = $1')).toBe('multi-shard')
  })
})
