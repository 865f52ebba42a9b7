// The delivery engine end to end on every dialect: contacts written through the API, delivered by
// the worker to real local receivers, verified with the standardwebhooks package (a verifier
// nobody here wrote). Retries run on a manual clock: the test moves time, the worker follows.
import { readFileSync } from 'node:fs'
import { Webhook } from 'standardwebhooks'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact } from '../../test/helpers.js'
import { startReceiver, type WebhookReceiver } from '../../test/webhook-receiver.js'
import { startTestWorker, until } from '../../test/webhook-worker.js'
import { testTenant } from '../accounts/tenant.js'
import { manualClock } from '../lib/clock.js'
import { markDueIfEnabled, purgeExpiredDeliveries } from './deliveries.store.js'
import { recordAttempt } from './delivery-attempts.js'
import { type ClaimedDelivery, claimDeliveries } from './delivery-claim.js'
import { dispatchEvents } from './delivery-dispatch.js'
import type { DeliveryWorker } from './delivery-worker.js'
import { createEndpoint, retryEndpointDelivery, rollSecret, sendTestEvent } from './endpoint-lifecycle.js'
import type { CreateEndpointInput } from './endpoints.js'
import { encryptSecret, webhookSecretKey } from './secrets.js'
import type { WebhookDeliveriesTable } from './webhooks.table.js'

/** The service's version as package.json gives it: deliveries name it in their User-Agent. */
const manifestVersion = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version

const SCHEDULE = [5, 300]

describe.each(testDialects())('webhook delivery on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  let receiver: WebhookReceiver
  let worker: DeliveryWorker | undefined
  // Starts at the real time: receivers (standardwebhooks) refuse a timestamp minutes off.
  let clock = manualClock(new Date())

  beforeEach(async () => {
    clock = manualClock(new Date())
    t = await createTestHarness({
      dialect,
      clock,
      env: {
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_RETRY_SCHEDULE: SCHEDULE.join(','),
      },
    })
    acme = await t.createAccount()
    receiver = await startReceiver()
  })
  afterEach(async () => {
    await worker?.stop()
    worker = undefined
    await receiver.close()
    await t.close()
  })

  const startWorker = (options: { perEndpoint?: number; concurrency?: number } = {}) => {
    worker = startTestWorker(t, clock, options)
    return worker
  }
  const addEndpoint = (account: TestAccount, input: Partial<CreateEndpointInput> & { path?: string } = {}) => {
    const { path = '/hooks', ...rest } = input
    return createEndpoint(
      t.deps.webhooks,
      account.id,
      { url: `${receiver.url}${path}`, ...rest },
      undefined,
      clock.now(),
    )
  }
  const deliveries = (endpointId: string): Promise<WebhookDeliveriesTable[]> =>
    t.db.selectFrom('webhook_deliveries').selectAll().where('endpoint_id', '=', endpointId).orderBy('id').execute()
  const advance = (seconds: number) => {
    clock.advance(seconds * 1000)
    worker?.wake()
  }

  it('a test-mode endpoint receives test events only, and a live one live events only', async () => {
    const sandbox = await t.testMode(acme)
    const live = await addEndpoint(acme, { path: '/live' })
    const test = await createEndpoint(
      t.deps.webhooks,
      testTenant(acme.id).id,
      { url: `${receiver.url}/test` },
      undefined,
      clock.now(),
    )
    startWorker()
    await createContact(t, acme, { first_name: 'Live one' })
    await createContact(t, sandbox, { first_name: 'Test one' })
    await createContact(t, sandbox, { first_name: 'Test two' })
    const got = await receiver.waitFor(3)
    const bodies = (path: string, secret: string) =>
      got
        .filter((delivery) => delivery.path === path)
        .map(
          (delivery) =>
            new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>) as {
              livemode: boolean
              data: { object: { first_name: string; livemode: boolean } }
            },
        )
    const atLive = bodies('/live', live.secret)
    const atTest = bodies('/test', test.secret)
    expect(atLive.map((b) => [b.livemode, b.data.object.livemode, b.data.object.first_name])).toEqual([
      [true, true, 'Live one'],
    ])
    expect(atTest.map((b) => [b.livemode, b.data.object.livemode, b.data.object.first_name]).sort()).toEqual([
      [false, false, 'Test one'],
      [false, false, 'Test two'],
    ])
  })

  it('delivers each change once, signed per Standard Webhooks, with the event as body', async () => {
    const { endpoint, secret } = await addEndpoint(acme)
    startWorker()
    const contact = await createContact(t, acme, { email: 'ada@example.com' })
    await t.inject(acme, { method: 'PATCH', url: `/api/v1/contacts/${contact.id}`, payload: { first_name: 'Ada' } })
    await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${contact.id}` })
    const got = await receiver.waitFor(3)
    const events = (await t.inject(acme, { method: 'GET', url: '/api/v1/events' })).json().events as Array<{
      id: string
      type: string
      created_at: string
      data: unknown
    }>
    expect(got.map((d) => d.headers['webhook-id'])).toEqual(events.map((e) => e.id))
    for (const [i, delivery] of got.entries()) {
      const event = events[i]
      // Throws unless the signature, id and timestamp check out.
      const verified = new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>)
      expect(verified).toEqual({ type: event?.type, timestamp: event?.created_at, livemode: true, data: event?.data })
      expect(delivery.headers['content-type']).toBe('application/json')
      expect(delivery.headers['user-agent']).toBe(`ContactsAPI-Webhooks/${manifestVersion}`)
      expect(delivery.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
      expect(delivery.path).toBe('/hooks')
    }
    const rows = await until(
      () => deliveries(endpoint.id),
      (rows) => rows.length === 3 && rows.every((row) => row.status === 'succeeded'),
    )
    expect(rows.map((row) => [row.event_type, row.status, row.attempts, row.last_status_code])).toEqual([
      ['contact.created', 'succeeded', 1, 200],
      ['contact.updated', 'succeeded', 1, 200],
      ['contact.deleted', 'succeeded', 1, 200],
    ])
    expect(rows[0]?.last_response_excerpt).toBe('ok')
    // Nothing more arrives: each change once.
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(receiver.received).toHaveLength(3)
  })

  it('sends only the subscribed event types, and nothing to a disabled endpoint', async () => {
    const deletes = await addEndpoint(acme, { events: ['contact.deleted'], path: '/deletes' })
    const off = await addEndpoint(acme, { path: '/off' })
    await t.deps.webhooks.db
      .updateTable('webhook_endpoints')
      .set({ status: 'disabled', disabled_reason: 'manual' })
      .where('id', '=', off.endpoint.id)
      .execute()
    startWorker()
    const contact = await createContact(t, acme, { email: 'ada@example.com' })
    await t.inject(acme, { method: 'DELETE', url: `/api/v1/contacts/${contact.id}` })
    const [only] = await receiver.waitFor(1)
    expect(JSON.parse(only?.body ?? '').type).toBe('contact.deleted')
    expect(only?.path).toBe('/deletes')
    await new Promise((resolve) => setTimeout(resolve, 150))
    expect(receiver.received).toHaveLength(1)
    expect(await deliveries(off.endpoint.id)).toEqual([])
    expect(await deliveries(deletes.endpoint.id)).toHaveLength(1)
  })

  it('an endpoint gets the events written after its creation, not the backlog before it', async () => {
    await createContact(t, acme, { email: 'before@example.com' })
    clock.advance(1)
    const { endpoint } = await addEndpoint(acme)
    clock.advance(1)
    await createContact(t, acme, { email: 'after@example.com' })
    startWorker()
    const [first] = await receiver.waitFor(1)
    expect(JSON.parse(first?.body ?? '').data.object.email).toBe('after@example.com')
    expect(await deliveries(endpoint.id)).toHaveLength(1)
  })

  it.each([
    ['a 5xx', { status: 503, body: 'down' }, 503, null],
    ['a redirect, never followed', { status: 302, headers: { location: '/elsewhere' } }, 302, 'redirect not followed'],
    ['a dropped connection', 'close', null, 'connection reset'],
  ] as const)('retries after %s on the schedule, then succeeds', async (_name, answer, code, error) => {
    const { endpoint } = await addEndpoint(acme)
    receiver.answer(answer)
    startWorker()
    await createContact(t, acme, { email: 'ada@example.com' })
    await receiver.waitFor(1)
    const [failed] = await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'retrying',
    )
    expect(failed).toMatchObject({ status: 'retrying', attempts: 1, last_status_code: code, lease_expires_at: null })
    if (error !== null) {
      expect(failed?.last_error).toBe(error)
    }
    expect(Date.parse(failed?.next_attempt_at ?? '')).toBe(clock.now().getTime() + (SCHEDULE[0] ?? 0) * 1000)
    receiver.answer({ status: 204 })
    advance(4)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(receiver.received).toHaveLength(1) // not before its time
    advance(1)
    const got = await receiver.waitFor(2)
    expect(got.map((d) => d.path)).toEqual(['/hooks', '/hooks']) // the redirect's target never called
    expect(got[1]?.headers['webhook-id']).toBe(got[0]?.headers['webhook-id'])
    const [done] = await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'succeeded',
    )
    expect(done).toMatchObject({ status: 'succeeded', attempts: 2, last_status_code: 204, next_attempt_at: null })
  })

  it('a timeout and a refused connection are failures that retry', async () => {
    const { endpoint } = await addEndpoint(acme)
    const closed = await startReceiver()
    const refusedUrl = closed.url
    await closed.close()
    const refused = await createEndpoint(
      t.deps.webhooks,
      acme.id,
      { url: `${refusedUrl}/hooks` },
      undefined,
      clock.now(),
    )
    receiver.answer('hang')
    startWorker()
    await createContact(t, acme, { email: 'ada@example.com' })
    const rows = await until(
      async () => [...(await deliveries(endpoint.id)), ...(await deliveries(refused.endpoint.id))],
      (all) => all.length === 2 && all.every((row) => row.status === 'retrying'),
      4000,
    )
    expect(rows.map((row) => [row.status, row.last_error, row.last_status_code])).toEqual([
      ['retrying', 'timeout', null],
      ['retrying', 'connection refused', null],
    ])
    expect(rows[0]?.last_duration_ms).toBeGreaterThanOrEqual(900)
  })

  it('fails for good once retries are exhausted; a manual retry makes one more attempt', async () => {
    const { endpoint } = await addEndpoint(acme)
    receiver.answer({ status: 500 })
    startWorker()
    await createContact(t, acme, { email: 'ada@example.com' })
    await receiver.waitFor(1)
    await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'retrying',
    )
    advance(5)
    await receiver.waitFor(2)
    await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.attempts === 2,
    )
    advance(300)
    await receiver.waitFor(3)
    const [failed] = await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'failed',
    )
    expect(failed).toMatchObject({ status: 'failed', attempts: 3, next_attempt_at: null })
    advance(86_400)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(receiver.received).toHaveLength(3)

    receiver.answer({ status: 200 })
    await retryEndpointDelivery(t.deps.webhooks, acme.id, endpoint.id, failed?.id ?? '', undefined, clock.now())
    worker?.wake()
    await receiver.waitFor(4)
    const [retried] = await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'succeeded',
    )
    expect(retried).toMatchObject({ status: 'succeeded', attempts: 4 })
  })

  it('a 410 disables the endpoint at once (gone) and fails what was still to be sent', async () => {
    const { endpoint } = await addEndpoint(acme)
    receiver.answer({ status: 410 })
    await createContact(t, acme, { email: 'a@example.com' })
    await createContact(t, acme, { email: 'b@example.com' })
    // Both events fanned out before the first attempt: else the first 410 can disable the endpoint
    // before the second event has a row (seen through PgBouncer's pool of 3), and there is nothing
    // left to fail.
    await until(
      async () => {
        await dispatchEvents(t.db, clock.now())
        return deliveries(endpoint.id)
      },
      (rows) => rows.length === 2,
    )
    startWorker({ perEndpoint: 1 })
    const rows = await until(
      () => deliveries(endpoint.id),
      (rows) => rows.length === 2 && rows.every((row) => row.status === 'failed'),
    )
    expect(rows.map((row) => row.status)).toEqual(['failed', 'failed'])
    const stored = await t.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', endpoint.id)
      .executeTakeFirst()
    expect(stored).toMatchObject({ status: 'disabled', disabled_reason: 'gone' })
    expect(receiver.received).toHaveLength(1)
  })

  it("the fan-out's mark: an endpoint disabled since it was read is left as it is, and said", async () => {
    // dispatchEvents fails a new delivery's row when this says no (delivery-dispatch.ts).
    const { endpoint } = await addEndpoint(acme)
    const dueAt = (id: string) =>
      t.db.selectFrom('webhook_endpoints').select('due_at').where('id', '=', id).executeTakeFirstOrThrow()
    const later = new Date(clock.now().getTime() + 60_000).toISOString()
    const sooner = clock.now().toISOString()
    const mark = (at: string) => t.db.transaction().execute((trx) => markDueIfEnabled(trx, acme.id, endpoint.id, at))
    expect(await mark(later)).toBe(true)
    expect(await dueAt(endpoint.id)).toEqual({ due_at: later })
    // Only ever earlier, and still "enabled" when it moves nothing.
    expect(await mark(new Date(clock.now().getTime() + 120_000).toISOString())).toBe(true)
    expect(await dueAt(endpoint.id)).toEqual({ due_at: later })
    await t.db.updateTable('webhook_endpoints').set({ status: 'disabled' }).where('id', '=', endpoint.id).execute()
    expect(await mark(sooner)).toBe(false)
    expect(await dueAt(endpoint.id)).toEqual({ due_at: later })
  })

  it('only 5 days of failures disable an endpoint (failing); a success in between starts the count again', async () => {
    const { endpoint } = await addEndpoint(acme)
    receiver.answer({ status: 500 })
    startWorker()
    const endpointRow = () =>
      t.db.selectFrom('webhook_endpoints').selectAll().where('id', '=', endpoint.id).executeTakeFirstOrThrow()
    await createContact(t, acme, { email: 'a@example.com' })
    await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'retrying',
    )
    expect((await endpointRow()).failing_since).toBe(clock.now().toISOString())
    clock.advance(4 * 86_400_000)
    await createContact(t, acme, { email: 'b@example.com' })
    await until(
      () => deliveries(endpoint.id),
      (rows) => rows[1]?.status === 'retrying',
    )
    expect((await endpointRow()).status).toBe('enabled')
    clock.advance(86_400_000)
    await createContact(t, acme, { email: 'c@example.com' })
    await until(endpointRow, (row) => row.status === 'disabled')
    expect(await endpointRow()).toMatchObject({ status: 'disabled', disabled_reason: 'failing' })
    expect((await deliveries(endpoint.id)).every((row) => row.status === 'failed')).toBe(true)
  })

  it('a roll with overlap signs with both secrets until the overlap ends; without one, with the new only', async () => {
    const { endpoint, secret: first } = await addEndpoint(acme)
    const rolled = await rollSecret(t.deps.webhooks, acme.id, endpoint.id, 3600, undefined, clock.now())
    startWorker()
    await createContact(t, acme, { email: 'a@example.com' })
    const [both] = await receiver.waitFor(1)
    const headers = both?.headers as Record<string, string>
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2)
    expect(() => new Webhook(first).verify(both?.body ?? '', headers)).not.toThrow()
    expect(() => new Webhook(rolled.secret).verify(both?.body ?? '', headers)).not.toThrow()

    const now = await rollSecret(t.deps.webhooks, acme.id, endpoint.id, 0, undefined, clock.now())
    await createContact(t, acme, { email: 'b@example.com' })
    const [, single] = await receiver.waitFor(2)
    const singleHeaders = single?.headers as Record<string, string>
    expect(singleHeaders['webhook-signature']?.split(' ')).toHaveLength(1)
    expect(() => new Webhook(now.secret).verify(single?.body ?? '', singleHeaders)).not.toThrow()
    expect(() => new Webhook(rolled.secret).verify(single?.body ?? '', singleHeaders)).toThrow()
  })

  it('a test event goes to the endpoint whatever it subscribes to', async () => {
    const { endpoint, secret } = await addEndpoint(acme, { events: ['contact.deleted'] })
    startWorker()
    const delivery = await sendTestEvent(t.deps.webhooks, acme.id, endpoint.id, undefined, clock.now())
    worker?.wake()
    const [got] = await receiver.waitFor(1)
    const body = new Webhook(secret).verify(got?.body ?? '', got?.headers as Record<string, string>)
    expect(body).toEqual({
      type: 'webhook.test',
      timestamp: clock.now().toISOString(),
      livemode: true,
      data: { object: { object: 'webhook_endpoint', id: endpoint.id } },
    })
    expect(got?.headers['webhook-id']).toBe(delivery.event_id)
  })

  it("one account's hanging endpoint does not delay another account's deliveries", async () => {
    const bob = await t.createAccount('Bob')
    const slow = await startReceiver()
    slow.answer('hang')
    try {
      await createEndpoint(t.deps.webhooks, acme.id, { url: `${slow.url}/slow` }, undefined, clock.now())
      await addEndpoint(bob, { path: '/bob' })
      startWorker({ perEndpoint: 2, concurrency: 8 })
      for (let i = 0; i < 20; i++) {
        await createContact(t, acme, { email: `a${i}@example.com` })
      }
      const started = Date.now()
      await createContact(t, bob, { email: 'bob@example.com' })
      await receiver.waitFor(1, 2000)
      expect(Date.now() - started).toBeLessThan(800) // well within the hanging endpoint's 1 s timeout
      expect(slow.received.length).toBeLessThanOrEqual(2) // its cap: two attempts at a time
    } finally {
      await worker?.stop()
      worker = undefined
      await slow.close()
    }
  })

  it('deliveries claimed ahead start as slots free, and a stopping worker gives the unstarted back', async () => {
    const { endpoint } = await addEndpoint(acme)
    receiver.answer({ status: 200, delayMs: 300 })
    for (let i = 0; i < 4; i++) {
      await createContact(t, acme, { email: `ahead${i}@example.com` })
    }
    startWorker({ perEndpoint: 1 })
    // One under way, one claimed ahead (its lease set), the others still due.
    const claimed = await until(
      () => deliveries(endpoint.id),
      (rows) => rows.filter((row) => row.lease_expires_at !== null).length === 2,
    )
    expect(claimed.filter((row) => row.lease_expires_at !== null)).toHaveLength(2)
    await receiver.waitFor(1)
    expect(receiver.received).toHaveLength(1) // never two at once to it
    await worker?.stop()
    worker = undefined
    const afterStop = await deliveries(endpoint.id)
    // Only attempted deliveries were recorded; the one claimed ahead is due again, for any worker.
    expect(afterStop.filter((row) => row.lease_expires_at !== null)).toEqual([])
    expect(afterStop.filter((row) => row.status === 'succeeded').length).toBe(receiver.received.length)
    receiver.answer({ status: 200 })
    startWorker()
    await receiver.waitFor(4, 3000)
    expect(
      (
        await until(
          () => deliveries(endpoint.id),
          (rows) => rows.every((row) => row.status === 'succeeded'),
        )
      ).map((row) => row.status),
    ).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded'])
  })

  it('over a random interleaving of two accounts, no event reaches the other account', async () => {
    const bob = await t.createAccount('Bob')
    await addEndpoint(acme, { path: '/acme' })
    await addEndpoint(bob, { path: '/bob' })
    startWorker()
    const written = new Map<string, string>()
    let seed = 7
    for (let i = 0; i < 40; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      const account = seed % 2 ? acme : bob
      const contact = await createContact(t, account, { email: `c${i}@example.com` })
      written.set(contact.id, account === acme ? '/acme' : '/bob')
    }
    const got = await receiver.waitFor(40)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(receiver.received).toHaveLength(40)
    for (const delivery of got) {
      const id = JSON.parse(delivery.body).data.object.id as string
      expect(delivery.path).toBe(written.get(id))
    }
  })

  it('counts attempts by outcome, the lag to the first attempt and the queue depth in /metrics', async () => {
    const { endpoint } = await addEndpoint(acme)
    const metric = async (name: string): Promise<number> => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body
      const line = text.split('\n').find((l) => l.startsWith(`${name} `))
      return Number(line?.split(' ')[1] ?? Number.NaN)
    }
    const before = {
      succeeded: await metric('webhook_deliveries_total{outcome="succeeded"}'),
      lag: await metric('webhook_delivery_lag_seconds_count'),
    }
    await createContact(t, acme, { email: 'a@example.com' })
    await createContact(t, acme, { email: 'b@example.com' })
    receiver.answer({ status: 500 })
    startWorker()
    await until(
      () => deliveries(endpoint.id),
      (rows) => rows.length === 2 && rows.every((row) => row.status === 'retrying'),
    )
    expect(await metric('webhook_queue_depth')).toBe(2)
    receiver.answer({ status: 200 })
    advance(5)
    await until(
      () => deliveries(endpoint.id),
      (rows) => rows.length === 2 && rows.every((row) => row.status === 'succeeded'),
    )
    expect(await metric('webhook_deliveries_total{outcome="succeeded"}')).toBe((before.succeeded || 0) + 2)
    expect(await metric('webhook_deliveries_total{outcome="retrying"}')).toBeGreaterThanOrEqual(2)
    // The lag counts first attempts only: two deliveries, two observations, retries not again.
    expect(await metric('webhook_delivery_lag_seconds_count')).toBe((before.lag || 0) + 2)
    expect(await metric('webhook_queue_depth')).toBe(0)
  })

  it('an endpoint whose secret was sealed under another SECRET gets failures it can see, not a stall', async () => {
    const { endpoint } = await addEndpoint(acme)
    await t.db
      .updateTable('webhook_endpoints')
      .set({ secret: encryptSecret('whsec_c2VjcmV0', webhookSecretKey('another SECRET')) })
      .where('id', '=', endpoint.id)
      .execute()
    startWorker()
    await createContact(t, acme, { email: 'a@example.com' })
    const [row] = await until(
      () => deliveries(endpoint.id),
      (rows) => rows[0]?.status === 'retrying',
    )
    expect(row).toMatchObject({ status: 'retrying', attempts: 1, last_error: 'signing secret unreadable' })
    expect(receiver.received).toEqual([]) // never sent unsigned
  })

  it('an attempt whose lease was taken over records nothing and changes nothing, even a 410', async () => {
    const { endpoint } = await addEndpoint(acme)
    await createContact(t, acme, { email: 'a@example.com' })
    // On the PostgreSQL server another suite's open transaction can hold the feed back a moment.
    await until(
      async () => {
        await dispatchEvents(t.db, clock.now())
        return deliveries(endpoint.id)
      },
      (rows) => rows.length === 1,
    )
    const claim = await claimDeliveries(t.db, { accountId: acme.id, id: endpoint.id }, clock.now(), 1, 40_000)
    const [claimed] = claim?.deliveries ?? []
    expect(claimed).toBeDefined()
    // The lease ran out and another worker took the delivery over.
    clock.advance(41_000)
    const takeover = await claimDeliveries(t.db, { accountId: acme.id, id: endpoint.id }, clock.now(), 1, 40_000)
    expect(takeover?.deliveries.map((d) => d.id)).toEqual([claimed?.id])
    const gone = { ok: false, statusCode: 410, durationMs: 5, excerpt: '', error: null }
    const policy = { scheduleS: SCHEDULE, random: () => 0.5 }
    const late = await recordAttempt(t.db, claimed as ClaimedDelivery, clock.now(), gone, policy, clock.now())
    expect(late).toEqual({ status: 'stale', disabled: null })
    const stored = await t.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', endpoint.id)
      .executeTakeFirst()
    expect(stored).toMatchObject({ status: 'enabled', failing_since: null })
    const [row] = await deliveries(endpoint.id)
    expect(row).toMatchObject({ attempts: 0, lease_expires_at: takeover?.deliveries[0]?.lease_expires_at })
  })

  it('purges delivery records older than the retention, in batches, and keeps the rest', async () => {
    const { endpoint } = await addEndpoint(acme)
    for (let i = 0; i < 5; i++) {
      await sendTestEvent(t.deps.webhooks, acme.id, endpoint.id, undefined, clock.now())
    }
    clock.advance(10 * 86_400_000)
    const recent = await sendTestEvent(t.deps.webhooks, acme.id, endpoint.id, undefined, clock.now())
    clock.advance(25 * 86_400_000)
    expect(await purgeExpiredDeliveries(t.db, clock.now(), 30, 2)).toBe(5)
    expect((await deliveries(endpoint.id)).map((row) => row.id)).toEqual([recent.id])
    expect(await purgeExpiredDeliveries(t.db, clock.now(), 30)).toBe(0)
  })

  it("a worker killed holding one of an endpoint's deliveries delays the others by a second, not its lease", async () => {
    const { endpoint } = await addEndpoint(acme)
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
      await createContact(t, acme, { email })
    }
    await until(
      async () => {
        await dispatchEvents(t.db, clock.now())
        return deliveries(endpoint.id)
      },
      (rows) => rows.length === 3,
    )
    // A worker claims one (its slots full), then dies: no completion of its will come.
    const claim = await claimDeliveries(t.db, { accountId: acme.id, id: endpoint.id }, clock.now(), 1, 40_000)
    expect(claim?.deliveries).toHaveLength(1)
    startWorker()
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(receiver.received).toHaveLength(0)
    advance(1)
    const got = await receiver.waitFor(2)
    const sent = got.map((d) => JSON.parse(d.body).data.object.email as string).sort()
    expect(sent).toHaveLength(2)
    expect(sent).not.toContain(JSON.parse(claim?.deliveries[0]?.event_body ?? '{}').data.object.email)
  })
})
