// Concurrent batches on the real PostgreSQL server (TEST_DATABASE_URL, a pool of connections): no
// batch may fail with a deadlock. PGlite and SQLite run one transaction at a time, so they cannot
// deadlock and this suite runs on PostgreSQL only. Without one count shard per transaction
// (contact-count.ts) and the retry of a deadlocked transaction (db/transaction.ts), each scenario
// here got 500s in most runs.
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { inRetriedTransaction, inTransaction } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import { contactCount } from './contact-count.js'

type Result = { status: number; contact?: { id: string; email: string | null } }

const onPostgres = testDialects().includes('postgres')

describe.runIf(onPostgres)('concurrent POST /contacts/batch on postgres', () => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'postgres' })
  })
  afterAll(() => t.close())

  const batch = (account: TestAccount, operations: unknown[]) =>
    t.inject(account, { method: 'POST', url: '/api/v1/contacts/batch', payload: { operations } })

  /** Sends the batches at once; every one must answer 200, with its items' statuses. */
  async function concurrently(account: TestAccount, batches: unknown[][]): Promise<Result[][]> {
    const responses = await Promise.all(batches.map((operations) => batch(account, operations)))
    return responses.map((res) => {
      expect(res.statusCode, res.body).toBe(200)
      return (res.json() as { results: Result[] }).results
    })
  }

  async function expectCountExact(account: TestAccount): Promise<number> {
    const { rows } = await sql<{ n: string }>`
      select count(*) as n from contacts where account_id = ${account.id}`.execute(t.db)
    const real = Number(rows[0]?.n)
    expect(await contactCount(t.db, account.id)).toBe(real)
    return real
  }

  const CLIENTS = 6
  const ROUNDS = 5

  it('upserts of new, disjoint emails: every batch 200, every item 201, the count exact', async () => {
    const account = await t.createAccount()
    for (let round = 0; round < ROUNDS; round++) {
      const batches = Array.from({ length: CLIENTS }, (_, client) =>
        Array.from({ length: 20 }, (_, i) => ({
          op: 'upsert',
          contact: { email: `r${round}-c${client}-${i}@ex.com` },
        })),
      )
      for (const results of await concurrently(account, batches)) {
        expect(results.map((r) => r.status)).toEqual(Array(20).fill(201))
      }
    }
    expect(await expectCountExact(account)).toBe(CLIENTS * ROUNDS * 20)
  })

  it('upserts of the same emails in different orders: every batch 200, one contact per email', async () => {
    const account = await t.createAccount()
    const emails = Array.from({ length: 8 }, (_, i) => `same-${i}@ex.com`)
    for (let round = 0; round < ROUNDS; round++) {
      const batches = Array.from({ length: CLIENTS }, (_, client) => {
        // A different rotation per client, every other one reversed: overlapping rows, crossing orders.
        const rotated = [...emails.slice(client % emails.length), ...emails.slice(0, client % emails.length)]
        const ordered = client % 2 === 0 ? rotated : rotated.reverse()
        return ordered.map((email) => ({ op: 'upsert', contact: { email, last_name: `r${round}c${client}` } }))
      })
      for (const results of await concurrently(account, batches)) {
        for (const result of results) {
          expect([200, 201]).toContain(result.status)
        }
      }
    }
    expect(await expectCountExact(account)).toBe(emails.length)
  })

  it('deletes of the same contacts in different orders: 204 once per contact, 404 else, the count exact', async () => {
    const account = await t.createAccount()
    for (let round = 0; round < ROUNDS; round++) {
      const [created] = await concurrently(account, [
        Array.from({ length: 12 }, (_, i) => ({ op: 'create', contact: { email: `del-${round}-${i}@ex.com` } })),
      ])
      const ids = (created ?? []).map((r) => r.contact?.id as string)
      const batches = Array.from({ length: CLIENTS }, (_, client) => {
        const rotated = [...ids.slice(client * 2), ...ids.slice(0, client * 2)]
        return (client % 2 === 0 ? rotated : rotated.reverse()).map((id) => ({ op: 'delete', id }))
      })
      const deleted = new Map<number, number>()
      for (const results of await concurrently(account, batches)) {
        for (const result of results) {
          expect([204, 404]).toContain(result.status)
          deleted.set(result.status, (deleted.get(result.status) ?? 0) + 1)
        }
      }
      expect(deleted.get(204)).toBe(ids.length)
    }
    expect(await expectCountExact(account)).toBe(0)
  })

  it('mixed: creates, upserts and deletes of one account at once, the count exact', async () => {
    const account = await t.createAccount()
    for (let round = 0; round < ROUNDS; round++) {
      const [seeded] = await concurrently(account, [
        Array.from({ length: CLIENTS }, (_, i) => ({ op: 'create', contact: { email: `mix-${round}-${i}@ex.com` } })),
      ])
      const ids = (seeded ?? []).map((r) => r.contact?.id as string)
      const batches = Array.from({ length: CLIENTS }, (_, client) => [
        ...Array.from({ length: 5 }, (_, i) => ({
          op: 'create',
          contact: { email: `mix-${round}-${client}-${i}@ex.com` },
        })),
        { op: 'delete', id: ids[client] },
        ...Array.from({ length: 5 }, (_, i) => ({
          op: 'upsert',
          contact: { email: `mix-${round}-${(client + i) % CLIENTS}@ex.com` },
        })),
      ])
      for (const results of await concurrently(account, batches)) {
        for (const result of results) {
          expect([200, 201, 204]).toContain(result.status)
        }
      }
    }
    await expectCountExact(account)
  })
})

describe.each(testDialects())('count shards and conflict retries on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
  })
  afterAll(() => t.close())

  const shardsOf = async (accountId: string) =>
    (await t.db.selectFrom('contact_counts').select(['shard', 'n']).where('account_id', '=', accountId).execute()).map(
      (row) => Number(row.n),
    )

  it('a batch adds all its count changes to one shard (a random shard per upsert took ~17 of 64)', async () => {
    const account = await t.createAccount()
    const seeded = await t.inject(account, { method: 'POST', url: '/api/v1/contacts', payload: { email: 'a@ex.com' } })
    const before = await shardsOf(account.id)
    expect(before).toEqual([1])
    const res = await t.inject(account, {
      method: 'POST',
      url: '/api/v1/contacts/batch',
      payload: {
        operations: [
          ...Array.from({ length: 20 }, (_, i) => ({ op: 'upsert', contact: { email: `u${i}@ex.com` } })),
          { op: 'delete', id: seeded.json().id },
          { op: 'create', contact: { email: 'c@ex.com' } },
        ],
      },
    })
    expect(res.statusCode, res.body).toBe(200)
    // The seeded create's shard, and one more holding the batch's 20 + 1 - 1 (or the same shard: 1 in 64).
    const after = await shardsOf(account.id)
    expect(after.length === 2 ? after.sort((a, b) => a - b) : after).toEqual(after.length === 2 ? [1, 20] : [21])
    expect(await contactCount(t.db, account.id)).toBe(21)
  })

  it('inRetriedTransaction runs a deadlocked transaction again, up to five attempts, then 503 with Retry-After', async () => {
    let attempts = 0
    const error = await inRetriedTransaction(t.db, async (trx) => {
      attempts++
      await trx.insertInto('contact_counts').values({ account_id: acme.id, shard: 0, n: 1000 }).execute()
      // What PostgreSQL throws when it breaks a lock cycle by rolling this transaction back.
      throw Object.assign(new Error('deadlock detected'), { code: '40P01' })
    }).catch((caught: unknown) => caught)
    expect(attempts).toBe(5)
    expect(error).toBeInstanceOf(AppError)
    expect((error as AppError).code).toBe('service_unavailable')
    expect((error as AppError).options.headers).toEqual({ 'retry-after': '1' })
    expect(await shardsOf(acme.id)).toEqual([])
  })

  it.runIf(dialect === 'postgres')(
    'a real deadlock between two transactions: both commit, one after a retry',
    async () => {
      const [one, two] = await Promise.all(
        ['one@ex.com', 'two@ex.com'].map(async (email) => {
          const res = await t.inject(acme, { method: 'POST', url: '/api/v1/contacts', payload: { email } })
          return res.json().id as string
        }),
      )
      let attempts = 0
      let arrived = 0
      let release = () => {}
      const bothHoldOne = new Promise<void>((resolve) => {
        release = resolve
      })
      // Each locks its first contact, waits until the other holds its own, then locks the other's.
      const lockBoth = (first: string, second: string) =>
        inRetriedTransaction(t.db, async (trx) => {
          attempts++
          await sql`update contacts set body = body where account_id = ${acme.id} and id = ${first}`.execute(trx)
          if (++arrived === 2) {
            release()
          }
          await bothHoldOne
          await sql`update contacts set body = body where account_id = ${acme.id} and id = ${second}`.execute(trx)
        })
      await Promise.all([lockBoth(one as string, two as string), lockBoth(two as string, one as string)])
      expect(attempts).toBe(3)
      // Not a retry of a plain transaction: inTransaction alone lets the deadlock through.
      arrived = 0
      const plain = await Promise.allSettled(
        [
          [one, two],
          [two, one],
        ].map(([first, second]) =>
          inTransaction(t.db, async (trx) => {
            await sql`update contacts set body = body where account_id = ${acme.id} and id = ${first}`.execute(trx)
            arrived++
            while (arrived < 2) {
              await new Promise((resolve) => setTimeout(resolve, 5))
            }
            await sql`update contacts set body = body where account_id = ${acme.id} and id = ${second}`.execute(trx)
          }),
        ),
      )
      expect(plain.map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'ok')).sort()).toEqual([
        '40P01',
        'ok',
      ])
    },
  )
})
