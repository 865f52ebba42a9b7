// Webhook delivery by several `contacts-api worker` processes on one PostgreSQL server: an API-only
// `serve` (WEBHOOK_WORKER=off) takes concurrent creates for three accounts, each with an endpoint on
// one real local receiver, while two workers deliver. Without a crash every event reaches its own
// account's endpoint exactly once (the claims' FOR UPDATE SKIP LOCKED and leases keep two workers
// off the same delivery); with one worker killed by SIGKILL mid-stream, the other delivers
// everything at least once, and only what the killed one had in flight is sent twice. Every delivery
// row ends `succeeded`. Also: a worker answers /healthz and /metrics on its port, and no API route.
// Needs TEST_DATABASE_URL (with CI=true and no server, the global setup fails the run).
// WEBHOOK_LEASE_MARGIN_MS (tests only) makes a lease 1 s + 2 s, so the killed worker's leases run out soon.
import { afterAll, describe, expect, it } from 'vitest'
import { WORKER_DEFAULTS } from '../src/webhooks/delivery-worker.js'
import { createThrowawaySchema } from './harness.js'
import { type ServerProcess, startServerProcess } from './processes.js'
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

const CONTACTS = 300
const ACCOUNTS = 3
const WRITERS = 6

describe.skipIf(!process.env.TEST_DATABASE_URL)('webhook workers on PostgreSQL', () => {
  const processes: ServerProcess[] = []
  const receivers: WebhookReceiver[] = []
  const drops: Array<() => Promise<void>> = []

  afterAll(async () => {
    await Promise.all(processes.map((child) => child.stop('SIGKILL')))
    await Promise.all(receivers.map((receiver) => receiver.close()))
    await Promise.all(drops.map((drop) => drop()))
  })

  /** A fresh schema, an API-only serve, two workers, three accounts with an endpoint each. */
  async function setUp(answerSlowly: boolean) {
    const schema = await createThrowawaySchema('whworkers')
    drops.push(schema.drop)
    const env = {
      ...schema.env,
      SECRET: testSecret(),
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_SECOND: '0',
      RATE_LIMIT_BURST: '0',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_TIMEOUT_MS: '1000',
      WEBHOOK_LEASE_MARGIN_MS: '2000',
    }
    const receiver = await startReceiver()
    receivers.push(receiver)
    const state = { slowPending: 0, slow: new WeakSet<object>() }
    receiver.answer((delivery) => {
      if (!answerSlowly || Math.random() >= 0.1) {
        return { status: 200, body: 'ok' }
      }
      const delayMs = 200 + Math.random() * 300
      state.slow.add(delivery)
      state.slowPending++
      setTimeout(() => state.slowPending--, delayMs)
      return { status: 200, body: 'ok', delayMs }
    })
    const api = await startServerProcess({ ...env, WEBHOOK_WORKER: 'off' })
    processes.push(api)
    const workers = await Promise.all([startServerProcess(env, 'worker'), startServerProcess(env, 'worker')])
    processes.push(...workers)
    const accounts = []
    for (let a = 0; a < ACCOUNTS; a++) {
      const account = await createAccount(env, `Workers ${a}`)
      const path = `/account-${a}`
      await createWebhookEndpoint(env, api.base, account, `${receiver.url}${path}`)
      accounts.push({ ...account, path })
    }
    return { env, receiver, api, workers, accounts, state }
  }

  /** Creates CONTACTS contacts across the accounts from WRITERS concurrent clients; returns id → its endpoint's path. */
  async function writeContacts(base: string, accounts: Array<{ key: string; path: string }>) {
    const created = new Map<string, string>()
    let next = 0
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (next < CONTACTS) {
          const n = next++
          const account = accounts[n % accounts.length] as { key: string; path: string }
          const res = await fetch(`${base}/api/v1/contacts`, {
            method: 'POST',
            headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ email: `c${n}@example.com` }),
          })
          expect(res.status).toBe(201)
          created.set(((await res.json()) as { id: string }).id, account.path)
        }
      }),
    )
    return created
  }

  /** Asserts each created contact's contact.created reached its own account's endpoint; returns the receipts. */
  async function expectAllDelivered(receiver: WebhookReceiver, created: Map<string, string>): Promise<Receipt[]> {
    const receipts = () => receiver.received.map((delivery) => receiptOf(delivery))
    const missing = () => {
      const got = new Set(receipts().map((r) => `${r.objectId} ${r.type} ${r.path}`))
      return [...created].filter(([id, path]) => !got.has(`${id} contact.created ${path}`))
    }
    const done = await eventually(() => missing().length === 0, 20_000)
    expect(done, `undelivered: ${missing().length} of ${created.size}`).toBe(true)
    const all = receipts()
    // Events from one account never reach another's endpoint, and nothing but these contacts' events arrives.
    expect(all.filter((r) => created.get(r.objectId) !== r.path || r.type !== 'contact.created')).toEqual([])
    return all
  }

  async function expectAllSucceeded(env: Record<string, string>, count: number) {
    const settled = await eventually(async () => {
      const statuses = await deliveryStatuses(env)
      return Object.keys(statuses).join() === 'succeeded' && statuses.succeeded === count
    }, 15_000)
    expect(settled, JSON.stringify(await deliveryStatuses(env))).toBe(true)
  }

  /** webhook-id (per endpoint) → how many times it was received. */
  function receiptCounts(all: Receipt[]): Map<string, number> {
    const counts = new Map<string, number>()
    for (const receipt of all) {
      const key = `${receipt.path} ${receipt.webhookId}`
      counts.set(key, (counts.get(key) ?? 0) + 1)
    }
    return counts
  }

  /** webhook_deliveries_total{outcome="succeeded"} on a worker's /metrics. */
  async function succeededOn(worker: ServerProcess): Promise<number> {
    const text = await (await fetch(`${worker.base}/metrics`)).text()
    return Number(/^webhook_deliveries_total\{outcome="succeeded"\} (\d+)/m.exec(text)?.[1] ?? 0)
  }

  it('two workers deliver every event exactly once to its account endpoint', { timeout: 60_000 }, async () => {
    const { env, receiver, api, workers, accounts } = await setUp(false)
    const created = await writeContacts(api.base, accounts)
    const all = await expectAllDelivered(receiver, created)
    await expectAllSucceeded(env, CONTACTS)
    const twice = [...receiptCounts(all)].filter(([, n]) => n !== 1)
    const shares = await Promise.all(workers.map((worker) => succeededOn(worker)))
    console.log(
      `two workers, no kill: ${all.length} requests for ${CONTACTS} events, ${twice.length} duplicates; ` +
        `deliveries recorded by each worker: ${shares.join(' + ')}`,
    )
    expect(twice).toEqual([])
    expect(all.length).toBe(CONTACTS)
    // Each success recorded once, by one worker or the other.
    expect(shares.reduce((a, b) => a + b, 0)).toBe(CONTACTS)
  })

  it('with one worker killed mid-stream, the other delivers everything; only what was in flight twice', {
    timeout: 60_000,
  }, async () => {
    const { env, receiver, api, workers, accounts, state } = await setUp(true)
    const [doomed, survivor] = workers as [ServerProcess, ServerProcess]
    const writing = writeContacts(api.base, accounts)
    // Mid-stream: deliveries arriving, some answered slowly (attempts in flight).
    expect(await eventually(() => receiver.received.length >= 60 && state.slowPending > 0, 20_000)).toBe(true)
    await doomed.stop('SIGKILL')
    expect(doomed.child.signalCode).toBe('SIGKILL')
    const killedAt = Date.now()
    const receivedBeforeKill = receiver.received.length
    const created = await writing
    const all = await expectAllDelivered(receiver, created)
    await expectAllSucceeded(env, CONTACTS)
    const twice = [...receiptCounts(all)].filter(([, n]) => n > 1)
    const duplicates = all.length - receiptCounts(all).size
    console.log(
      `two workers, one killed: ${all.length} requests for ${CONTACTS} events (${receivedBeforeKill} before the kill), ` +
        `${duplicates} duplicates of ${twice.length} events; the survivor recorded ${await succeededOn(survivor)}`,
    )
    // A duplicate is an attempt the killed worker had under way: it reached the receiver before the
    // kill, and its outcome was not committed. An endpoint's slot frees when its receiver answers,
    // but the worker holds each attempt until its outcome is recorded: at most its concurrency (64)
    // in all. (Or, on a loaded machine, the retry of a slow answer that overran the 1 s timeout.)
    const first = new Map<string, object>()
    for (const delivery of receiver.received) {
      const key = `${delivery.path} ${String(delivery.headers['webhook-id'])}`
      if (!first.has(key)) {
        first.set(key, delivery)
      }
    }
    const firstOf = (key: string) => first.get(key) as { at: number }
    const atKill = twice.filter(([key]) => firstOf(key).at <= killedAt)
    const retried = twice.filter(([key]) => firstOf(key).at > killedAt && state.slow.has(firstOf(key)))
    console.log(`  of which ${atKill.length} sent before the kill, ${retried.length} retries of a slow answer`)
    expect(twice.length).toBe(atKill.length + retried.length)
    expect(atKill.length).toBeLessThanOrEqual(WORKER_DEFAULTS.concurrency)
  })

  it('a worker answers /healthz and /metrics on its port, and no API route', { timeout: 30_000 }, async () => {
    const { workers } = await setUp(false)
    const worker = workers[0] as ServerProcess
    expect((await fetch(`${worker.base}/healthz`)).status).toBe(200)
    const metrics = await fetch(`${worker.base}/metrics`)
    expect(metrics.status).toBe(200)
    expect(await metrics.text()).toContain('webhook_deliveries_total')
    expect((await fetch(`${worker.base}/api/v1/me`)).status).toBe(404)
    expect((await fetch(`${worker.base}/api/v1/contacts`, { method: 'POST' })).status).toBe(404)
  })
})
