import { describe, expect, it } from 'vitest'
import { manualClock } from '../src/lib/clock.js'
import { testDialects } from './dialects.js'
import { createTestHarness } from './harness.js'

// A kill between the commit of a keyed write and its response must not leave the write without its
// stored answer (status NULL): the retry would be refused for 60 s, then run the write a second time.
// So the answer commits in the write's own transaction; here the state is read right after each
// commit, before the response is sent — the state a kill at that moment leaves behind.
describe.each(testDialects())('idempotency after a crash on %s', (dialect) => {
  it('a keyed write commits together with its answer, so its retry after a kill replays it', async () => {
    const clock = manualClock()
    const t = await createTestHarness({ dialect, clock })
    try {
      const acme = await t.createAccount()
      const keyRows = () =>
        t.db.selectFrom('idempotency_keys').select(['key', 'status', 'body', 'location']).orderBy('key').execute()
      const atCommit: Array<Awaited<ReturnType<typeof keyRows>>> = []
      const transaction = t.db.transaction.bind(t.db)
      t.db.transaction = () => {
        const builder = transaction()
        const execute = builder.execute.bind(builder)
        builder.execute = (async (callback: Parameters<typeof execute>[0]) => {
          const result = await execute(callback)
          atCommit.push(await keyRows())
          return result
        }) as typeof builder.execute
        return builder
      }
      const create = {
        method: 'POST' as const,
        url: '/api/v1/contacts',
        headers: { 'idempotency-key': 'crash-1' },
        payload: { first_name: 'Once', email: 'once@example.com' },
      }
      const upsert = {
        method: 'POST' as const,
        url: '/api/v1/contacts/upsert',
        headers: { 'idempotency-key': 'crash-2' },
        payload: { email: 'once@example.com', last_name: 'Upserted' },
      }
      const created = await t.inject(acme, create)
      const updated = await t.inject(acme, upsert)
      expect([created.statusCode, updated.statusCode]).toEqual([201, 200])
      const id = created.json().id
      expect(atCommit).toEqual([
        [{ key: 'crash-1', status: 201, body: created.body, location: `http://api.test/api/v1/contacts/${id}` }],
        [
          { key: 'crash-1', status: 201, body: created.body, location: `http://api.test/api/v1/contacts/${id}` },
          { key: 'crash-2', status: 200, body: updated.body, location: null },
        ],
      ])
      // Past the 60 s after which a key left in flight counts as abandoned: still replays, creates nothing.
      clock.advance(61_000)
      for (const [request, first] of [
        [create, created],
        [upsert, updated],
      ] as const) {
        const retry = await t.inject(acme, request)
        expect([retry.statusCode, retry.body, retry.headers['idempotent-replayed']]).toEqual([
          first.statusCode,
          first.body,
          'true',
        ])
      }
      const contacts = (await t.inject(acme, { method: 'GET', url: '/api/v1/contacts' })).json().contacts
      expect(contacts).toEqual([updated.json()])
    } finally {
      await t.close()
    }
  })
})
