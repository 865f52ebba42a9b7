// Webhooks through a kill -9: a real `serve` process (its worker inside) takes concurrent creates and
// updates while delivering them to a real local receiver, some of whose answers are slow so that
// attempts are in flight; it is killed with SIGKILL mid-stream and restarted on the same database.
// Then every acknowledged write's event, and every event the feed holds, reaches the receiver at
// least once, answered 2xx; a duplicate carries the same webhook-id as the original; every delivery
// row ends `succeeded`. The duplicates are counted and printed.
// SQLite always; the PostgreSQL server when TEST_DATABASE_URL is set (a throwaway schema; with
// CI=true and no server, the global setup fails the run rather than skip this).
// WEBHOOK_LEASE_MARGIN_MS (tests only) shortens a lease to 1 s + 2 s, so that an attempt the kill
// left in flight is retried within seconds rather than after the default 30 s margin.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createThrowawaySchema } from './harness.js'
import { freePort, type ServerProcess, startServerProcess } from './processes.js'
import {
  createAccount,
  createWebhookEndpoint,
  deliveryStatuses,
  eventually,
  type Receipt,
  receiptOf,
  testSecret,
} from './webhook-processes.js'
import { startReceiver, type WebhookReceiver } from './webhook-receiver.js'

const WRITERS = 6
const MAX_WRITES = 600

for (const dialect of ['sqlite', 'postgres'] as const) {
  describe.skipIf(!testDialects().includes(dialect))(`webhooks through kill -9 on ${dialect}`, () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'contacts-webhooks-crash-'))
    let dropSchema: (() => Promise<void>) | undefined
    let server: ServerProcess | undefined
    let receiver: WebhookReceiver | undefined

    afterAll(async () => {
      await server?.stop('SIGKILL')
      await receiver?.close()
      rmSync(dir, { recursive: true, force: true })
      await dropSchema?.()
    })

    it('delivers every acknowledged write at least once after a restart, duplicates with the same webhook-id', {
      timeout: 60_000,
    }, async () => {
      const started = Date.now()
      const port = await freePort()
      const base = `http://127.0.0.1:${port}`
      const env: Record<string, string | undefined> = {
        PORT: String(port),
        LOG_LEVEL: 'warn',
        SECRET: testSecret(),
        RATE_LIMIT_PER_SECOND: '0',
        RATE_LIMIT_BURST: '0',
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1',
        WEBHOOK_LEASE_MARGIN_MS: '2000',
      }
      if (dialect === 'sqlite') {
        env.DATABASE_URL = `sqlite:${path.join(dir, 'contacts.sqlite')}`
      } else {
        const schema = await createThrowawaySchema('whcrash')
        dropSchema = schema.drop
        Object.assign(env, schema.env)
      }
      const rx = await startReceiver()
      receiver = rx
      // One answer in ten is slow (0.2-0.5 s, within the 1 s timeout): attempts are in flight at the kill.
      let slowPending = 0
      const delays = new WeakMap<object, number>()
      receiver.answer((delivery) => {
        if (Math.random() >= 0.1) {
          return { status: 200, body: 'ok' }
        }
        const delayMs = 200 + Math.random() * 300
        delays.set(delivery, delayMs)
        slowPending++
        setTimeout(() => slowPending--, delayMs)
        return { status: 200, body: 'ok', delayMs }
      })
      server = await startServerProcess(env)
      const account = await createAccount(env, 'Webhooks crash')
      const endpoint = await createWebhookEndpoint(env, base, account, `${receiver.url}/hooks`)

      const api = (method: string, url: string, body?: unknown) =>
        fetch(`${base}/api/v1${url}`, {
          method,
          headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(10_000),
        })

      // Acknowledged writes: (contact id, event type) → how many were acknowledged.
      const acked = new Map<string, number>()
      const ack = (id: string, type: string) => acked.set(`${id} ${type}`, (acked.get(`${id} ${type}`) ?? 0) + 1)
      let writes = 0
      let killed = false
      const writer = async (w: number) => {
        const mine: string[] = []
        for (let i = 0; !killed && writes < MAX_WRITES; i++) {
          writes++
          try {
            const existing = mine[i % 7]
            if (i % 3 === 2 && existing) {
              const res = await api('PATCH', `/contacts/${existing}`, { first_name: `W${w}-${i}` })
              if (res.status === 200) {
                ack(existing, 'contact.updated')
              }
            } else {
              const res = await api('POST', '/contacts', { email: `w${w}-${i}@example.com`, first_name: `W${w}` })
              if (res.status === 201) {
                const { id } = (await res.json()) as { id: string }
                mine.push(id)
                ack(id, 'contact.created')
              }
            }
          } catch {
            return // the server is gone: this write's outcome is unknown, nothing is required of it
          }
        }
      }
      const writing = Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)))

      // Mid-stream: writes acknowledged and deliveries arriving, some of them being answered slowly.
      const midStream = () => rx.received.length >= 60 && acked.size >= 100 && slowPending > 0
      expect(await eventually(midStream, 20_000)).toBe(true)
      const inFlightAtKill = slowPending
      killed = true
      await server.stop('SIGKILL')
      expect(server.child.signalCode).toBe('SIGKILL')
      const killedAt = Date.now()
      const receivedBeforeKill = receiver.received.length
      await writing
      server = await startServerProcess(env)

      // Every event of the feed (acknowledged or not, it committed) and every acknowledged write reach
      // the receiver, answered; then every delivery row has succeeded.
      const receipts = () => rx.received.map((delivery) => receiptOf(delivery))
      const delivered = () => {
        const byWrite = new Map<string, Set<string>>()
        for (const receipt of receipts()) {
          const key = `${receipt.objectId} ${receipt.type}`
          byWrite.set(key, (byWrite.get(key) ?? new Set()).add(receipt.webhookId))
        }
        return byWrite
      }
      const missing = () => [...acked].filter(([key, count]) => (delivered().get(key)?.size ?? 0) < count)
      const allDelivered = await eventually(() => missing().length === 0, 20_000)
      expect(allDelivered, `undelivered acknowledged writes: ${JSON.stringify(missing().slice(0, 5))}`).toBe(true)
      const settled = await eventually(async () => {
        const statuses = await deliveryStatuses(env)
        return Object.keys(statuses).join() === 'succeeded'
      }, 15_000)
      expect(settled, JSON.stringify(await deliveryStatuses(env))).toBe(true)

      const feedIds = new Set<string>()
      // To the feed's end: its first page short of the limit (its cursor never ends).
      let after: string | null = null
      for (let full = true; full; ) {
        const res = await api('GET', `/events?limit=100${after ? `&after=${after}` : ''}`)
        expect(res.status).toBe(200)
        const page = (await res.json()) as { events: Array<{ id: string }>; next_cursor: string }
        for (const event of page.events) {
          feedIds.add(event.id)
        }
        after = page.next_cursor
        full = page.events.length === 100
      }
      const all: Receipt[] = receipts()
      const receivedIds = new Set(all.map((receipt) => receipt.webhookId))
      expect([...feedIds].filter((id) => !receivedIds.has(id))).toEqual([])
      expect([...receivedIds].filter((id) => !feedIds.has(id))).toEqual([])
      expect((await deliveryStatuses(env)).succeeded).toBe(feedIds.size)

      // A duplicate is the same body again (type, event time, object): it must carry the same webhook-id.
      const idsByBody = new Map<string, Set<string>>()
      for (const receipt of all) {
        idsByBody.set(receipt.body, (idsByBody.get(receipt.body) ?? new Set()).add(receipt.webhookId))
        expect(receipt.path).toBe('/hooks')
      }
      expect([...idsByBody.values()].filter((ids) => ids.size !== 1)).toEqual([])
      expect(idsByBody.size).toBe(feedIds.size)
      const duplicates = all.length - receivedIds.size
      const firstSeen = (id: string) => all.find((receipt) => receipt.webhookId === id)?.at
      const duplicatedIds = new Set(all.map((r) => r.webhookId).filter((id, i, ids) => ids.indexOf(id) !== i))
      // A duplicate is an attempt the kill left without its record (it reached the receiver before the
      // kill), or, on a loaded machine, the retry of a slow answer that overran the 1 s timeout.
      const firstReceipt = new Map<string, object>()
      for (const delivery of rx.received) {
        const id = String(delivery.headers['webhook-id'])
        if (!firstReceipt.has(id)) {
          firstReceipt.set(id, delivery)
        }
      }
      const atKill = [...duplicatedIds].filter((id) => (firstSeen(id) ?? 0) <= killedAt)
      const retried = [...duplicatedIds].filter(
        (id) => !atKill.includes(id) && delays.has(firstReceipt.get(id) as object),
      )
      expect([...duplicatedIds].filter((id) => !atKill.includes(id) && !retried.includes(id))).toEqual([])
      console.log(
        `webhooks kill -9 on ${dialect}: ${writes} writes tried, ${[...acked.values()].reduce((a, b) => a + b, 0)} acknowledged, ` +
          `${feedIds.size} events, ${all.length} requests received (${receivedBeforeKill} before the kill), ` +
          `${duplicates} duplicates of ${duplicatedIds.size} events (${atKill.length} sent before the kill, ${retried.length} retries ` +
          `of a slow answer; ${inFlightAtKill} slow answers pending at the kill), endpoint via ${endpoint.via}, ${Date.now() - started} ms`,
      )
    })
  })
}
