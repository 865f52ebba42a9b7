// A PostgreSQL connection lost while the app holds it (a restart, a failover, PgBouncer restarted,
// an operator's pg_terminate_backend) fails the work on it and nothing else. node-postgres's pool
// listens for errors only on idle clients; a checked-out client that lost its connection emitted
// 'error' with no listener and the process died (outside review: every instance exited when
// PgBouncer restarted). Here the backend of a checked-out connection is terminated: the process
// lives on, the request on it gets a problem, and the next requests are served.
import { sql } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'

const postgres = testDialects().filter((dialect) => dialect === 'postgres')

describe.skipIf(postgres.length === 0)('a lost PostgreSQL connection', () => {
  let t: TestHarness
  let acme: TestAccount
  beforeEach(async () => {
    t = await createTestHarness({ dialect: 'postgres' })
    acme = await t.createAccount()
  })
  afterEach(() => t.close())

  it('fails the work that held it, does not end the process, and the pool serves the next request', async () => {
    const uncaught: unknown[] = []
    const record = (error: unknown) => uncaught.push(error)
    process.on('uncaughtException', record)
    try {
      // Held between two statements, as a transaction is while the app works: another connection
      // ends its backend meanwhile.
      const lost = t.db.connection().execute(async (connection) => {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(connection)
        await sql`select pg_terminate_backend(${rows[0]?.pid})`.execute(t.db)
        await new Promise((resolve) => setTimeout(resolve, 200))
        await sql`select 1`.execute(connection)
      })
      await expect(lost).rejects.toThrow()
      expect(uncaught).toEqual([])
      const me = await t.inject(acme, { method: 'GET', url: '/api/v1/me' })
      expect(me.statusCode).toBe(200)
      const created = await t.inject(acme, {
        method: 'POST',
        url: '/api/v1/contacts',
        payload: { email: 'after@example.com' },
      })
      expect(created.statusCode).toBe(201)
    } finally {
      process.off('uncaughtException', record)
    }
  })
})
