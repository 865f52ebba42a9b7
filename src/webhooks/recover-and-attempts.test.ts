// A delivery's attempt history and the bulk resend of failed deliveries (recover), through the API,
// with the worker delivering to a real local receiver on a manual clock.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { createContact, expectProblem } from '../../test/helpers.js'
import { startReceiver, type WebhookReceiver } from '../../test/webhook-receiver.js'
import { startTestWorker, until } from '../../test/webhook-worker.js'
import { manualClock } from '../lib/clock.js'
import { purgeExpiredDeliveries } from './deliveries.store.js'
import type { DeliveryWorker } from './delivery-worker.js'
import type { WebhookDeliveriesTable } from './webhooks.table.js'

const BASE = '/api/v1/webhook_endpoints'
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

describe.each(testDialects())('recover and attempt history on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  let receiver: WebhookReceiver
  let worker: DeliveryWorker
  let clock = manualClock(new Date())
  let written = 0

  beforeEach(async () => {
    clock = manualClock(new Date())
    // One retry, 5 s after the first attempt: a delivery fails for good after two.
    t = await createTestHarness({
      dialect,
      clock,
      env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '5' },
    })
    acme = await t.createAccount()
    receiver = await startReceiver()
    worker = startTestWorker(t, clock)
  })
  afterEach(async () => {
    await worker.stop()
    await receiver.close()
    await t.close()
  })

  const addEndpoint = async (account: TestAccount = acme): Promise<string> => {
    const res = await t.inject(account, { method: 'POST', url: BASE, payload: { url: `${receiver.url}/hooks` } })
    expect(res.statusCode, res.body).toBe(201)
    return res.json().id
  }
  const deliveries = (endpointId: string): Promise<WebhookDeliveriesTable[]> =>
    t.db.selectFrom('webhook_deliveries').selectAll().where('endpoint_id', '=', endpointId).orderBy('id').execute()
  const allStatus = (endpointId: string, status: string, count: number) =>
    until(
      () => deliveries(endpointId),
      (rows) => rows.length === count && rows.every((row) => row.status === status),
    )
  /** Writes `count` contacts while the receiver fails, and lets each delivery fail for good. */
  const failedDeliveries = async (endpointId: string, count: number, already = 0) => {
    receiver.answer({ status: 503, body: 'down for maintenance' })
    for (let i = 0; i < count; i++) {
      written += 1
      await createContact(t, acme, { email: `c${written}@example.com` })
    }
    await until(
      () => deliveries(endpointId),
      (rows) => rows.length === already + count && rows.every((row) => row.status !== 'pending' && row.attempts > 0),
    )
    clock.advance(5_000)
    worker.wake()
    return allStatus(endpointId, 'failed', already + count)
  }
  const recover = (endpointId: string, payload: object, account: TestAccount = acme, headers = {}) =>
    t.inject(account, { method: 'POST', url: `${BASE}/${endpointId}/recover`, payload, headers })
  const attempts = (endpointId: string, deliveryId: string, query = '', account: TestAccount = acme) =>
    t.inject(account, { method: 'GET', url: `${BASE}/${endpointId}/deliveries/${deliveryId}/attempts${query}` })

  it('an attempt answered after its delivery was failed (its endpoint disabled meanwhile) leaves it failed', async () => {
    // The interleaving on PostgreSQL: another batch disables the endpoint and fails its pending
    // deliveries while this attempt is out, after this batch read the endpoint as enabled.
    const endpointId = await addEndpoint()
    receiver.answer({ status: 500, delayMs: 300 })
    await createContact(t, acme, { email: 'late@example.com' })
    await receiver.waitFor(1)
    await t.db
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', next_attempt_at: null })
      .where('endpoint_id', '=', endpointId)
      .execute()
    const [row] = await until(
      () => deliveries(endpointId),
      (rows) => rows[0]?.attempts === 1,
    )
    expect(row).toMatchObject({ status: 'failed', next_attempt_at: null, last_status_code: 500 })
  })

  it('lists every attempt of a delivery, oldest first, paged like every list', async () => {
    const endpointId = await addEndpoint()
    const [failed] = await failedDeliveries(endpointId, 1)
    const firstAt = new Date(clock.now().getTime() - 5_000).toISOString()
    receiver.answer({ status: 200, body: 'thanks' })
    const retry = await t.inject(acme, {
      method: 'POST',
      url: `${BASE}/${endpointId}/deliveries/${failed?.id}/retry`,
    })
    expect(retry.statusCode).toBe(202)
    worker.wake()
    await allStatus(endpointId, 'succeeded', 1)

    const res = await attempts(endpointId, failed?.id ?? '')
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('application/json')
    const body = res.json()
    expect(body).toEqual({
      attempts: [
        {
          object: 'webhook_attempt',
          at: expect.stringMatching(TIMESTAMP),
          status_code: 503,
          duration_ms: expect.any(Number),
          error: null,
          response_excerpt: 'down for maintenance',
        },
        expect.objectContaining({ status_code: 503, response_excerpt: 'down for maintenance' }),
        expect.objectContaining({ object: 'webhook_attempt', status_code: 200, response_excerpt: 'thanks' }),
      ],
      next_cursor: null,
    })
    expect(body.attempts[0].at).toBe(firstAt)
    expect(body.attempts.map((a: { at: string }) => a.at)).toEqual(
      body.attempts.map((a: { at: string }) => a.at).sort(),
    )
    // The delivery's last_attempt is the list's last item.
    const delivery = await t.inject(acme, { method: 'GET', url: `${BASE}/${endpointId}/deliveries/${failed?.id}` })
    const { object: _object, ...last } = body.attempts[2]
    expect(delivery.json()).toMatchObject({ attempts: 3, last_attempt: last })

    const first = await attempts(endpointId, failed?.id ?? '', '?limit=2')
    expect(first.json().attempts).toEqual(body.attempts.slice(0, 2))
    const rest = await attempts(endpointId, failed?.id ?? '', `?limit=2&after=${first.json().next_cursor}`)
    expect(rest.json()).toEqual({ attempts: body.attempts.slice(2), next_cursor: null })
  })

  it('an attempt that got no answer records why', async () => {
    const endpointId = await addEndpoint()
    receiver.answer('close')
    await createContact(t, acme, { email: 'hangup@example.com' })
    const [row] = await until(
      () => deliveries(endpointId),
      (rows) => rows[0]?.attempts === 1,
    )
    const [attempt] = (await attempts(endpointId, row?.id ?? '')).json().attempts
    expect(attempt).toMatchObject({ status_code: null, response_excerpt: '' })
    expect(attempt.error).toEqual(expect.any(String))
  })

  it('recover resends the failed deliveries created in [since, until), once each, and says how many', async () => {
    const endpointId = await addEndpoint()
    const [early] = await failedDeliveries(endpointId, 1)
    clock.advance(3_600_000)
    const since = clock.now().toISOString()
    const failed = await failedDeliveries(endpointId, 2, 1)
    expect(failed).toHaveLength(3)
    const sentBefore = receiver.received.length

    receiver.answer({ status: 200 })
    const res = await recover(endpointId, { since }, acme, { 'idempotency-key': 'recover-1' })
    expect(res.statusCode, res.body).toBe(202)
    expect(res.json()).toEqual({
      object: 'webhook_recovery',
      endpoint_id: endpointId,
      since,
      until: clock.now().toISOString(),
      queued: 2,
    })
    worker.wake()
    const after = await until(
      () => deliveries(endpointId),
      (rows) => rows.filter((row) => row.status === 'succeeded').length === 2,
    )
    expect(after.map((row) => row.status)).toEqual(['failed', 'succeeded', 'succeeded'])
    expect(after.find((row) => row.id === early?.id)?.status).toBe('failed')
    expect(after.filter((row) => row.status === 'succeeded').every((row) => row.attempts === 3)).toBe(true)
    expect(receiver.received.length - sentBefore).toBe(2)

    // The same key replays the answer and queues nothing more.
    const replay = await recover(endpointId, { since }, acme, { 'idempotency-key': 'recover-1' })
    expect(replay.statusCode).toBe(202)
    expect(replay.headers['idempotent-replayed']).toBe('true')
    expect(replay.json()).toEqual(res.json())
    // Nothing left failed in the range; the earlier one is reached by an earlier since.
    expect((await recover(endpointId, { since })).json().queued).toBe(0)
    const earlier = await recover(endpointId, { since: early?.created_at, until: since })
    expect(earlier.json()).toMatchObject({ queued: 1, since: early?.created_at, until: since })
    worker.wake()
    await allStatus(endpointId, 'succeeded', 3)
    const audit = await t.db
      .selectFrom('audit_log')
      .select('action')
      .where('account_id', '=', acme.id)
      .where('action', '=', 'webhook_endpoint.recovered')
      .execute()
    // Only people's actions are audited; the API's are in the request log.
    expect(audit).toEqual([])
  })

  it('refuses a range that starts in the future or ends before it starts, and changes nothing', async () => {
    const endpointId = await addEndpoint()
    await failedDeliveries(endpointId, 1)
    const now = clock.now().getTime()
    const at = (offsetMs: number) => new Date(now + offsetMs).toISOString()
    const cases: Array<[object, string]> = [
      [{ since: at(60_000) }, 'since'],
      [{ since: at(-60_000), until: at(-60_000) }, 'until'],
      [{ since: at(-60_000), until: at(-120_000) }, 'until'],
      [{ since: 'yesterday' }, 'since'],
      [{ since: '2026-02-30T00:00:00Z' }, 'since'],
      [{}, 'since'],
      [{ since: at(-60_000), extra: true }, 'extra'],
      [{ since: at(-60_000), until: 12 }, 'until'],
      [{ since: '2026-06-30T23:59:60Z' }, 'since'],
      [{ since: at(-60_000), until: '2026-06-30T23:59:60Z' }, 'until'],
    ]
    for (const [payload, field] of cases) {
      const res = await recover(endpointId, payload)
      expectProblem(res, 400, 'invalid_parameter')
      expect(
        res.json().errors?.map((e: { field: string }) => e.field),
        JSON.stringify(payload),
      ).toContain(field)
    }
    expect((await deliveries(endpointId)).map((row) => row.status)).toEqual(['failed'])
    // An `until` later than now is fine: nothing was created there yet.
    const res = await recover(endpointId, { since: at(-60_000), until: at(3_600_000) })
    expect(res.statusCode).toBe(202)
    expect(res.json().queued).toBe(1)
  })

  it("another account's endpoint or delivery is 404; a disabled endpoint is 409; a cursor stays with its delivery", async () => {
    const endpointId = await addEndpoint()
    const [one] = await failedDeliveries(endpointId, 1)
    const other = await t.createAccount()
    const since = new Date(clock.now().getTime() - 3_600_000).toISOString()
    expectProblem(await recover(endpointId, { since }, other), 404, 'not_found')
    expectProblem(await attempts(endpointId, one?.id ?? '', '', other), 404, 'not_found')
    expectProblem(await attempts(endpointId, 'wd_nope'), 404, 'not_found')
    // The other mode of the same account is another tenant too.
    const sandbox = await t.testMode(acme)
    expectProblem(await recover(endpointId, { since }, sandbox), 404, 'not_found')
    expectProblem(await attempts(endpointId, one?.id ?? '', '', sandbox), 404, 'not_found')
    expect((await deliveries(endpointId)).map((row) => row.status)).toEqual(['failed'])

    const [two] = await failedDeliveries(endpointId, 1, 1).then((rows) => rows.filter((row) => row.id !== one?.id))
    const page = (await attempts(endpointId, one?.id ?? '', '?limit=1')).json()
    expectProblem(await attempts(endpointId, two?.id ?? '', `?after=${page.next_cursor}`), 400, 'invalid_cursor')

    await t.inject(acme, { method: 'PATCH', url: `${BASE}/${endpointId}`, payload: { status: 'disabled' } })
    expectProblem(await recover(endpointId, { since }), 409, 'endpoint_disabled')
  })

  it('the history goes with its delivery: purged, or deleted with the endpoint', async () => {
    const endpointId = await addEndpoint()
    await failedDeliveries(endpointId, 2)
    const history = () => t.db.selectFrom('webhook_attempts').select('delivery_id').execute()
    expect(await history()).toHaveLength(4)
    clock.advance(31 * 86_400_000)
    expect(await purgeExpiredDeliveries(t.db, clock.now(), 30, 1)).toBe(2)
    expect(await history()).toEqual([])

    clock.advance(-31 * 86_400_000)
    await failedDeliveries(endpointId, 1)
    expect(await history()).toHaveLength(2)
    expect((await t.inject(acme, { method: 'DELETE', url: `${BASE}/${endpointId}` })).statusCode).toBe(204)
    expect(await history()).toEqual([])
  })
})
