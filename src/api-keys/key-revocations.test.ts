// The revocation push over PostgreSQL NOTIFY/LISTEN between two instances' deps on the real server,
// directly or, with TEST_POOLER_URL (.ci/pgbouncer-leg.sh), through a transaction pooler with
// DATABASE_DIRECT_URL for LISTEN. Redis as the channel: test/multi-instance.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createThrowawaySchema, type ThrowawaySchema, testConfig } from '../../test/harness.js'
import { createAccountWithKey } from '../accounts/accounts.js'
import { migrateToLatest } from '../db/migrate.js'
import { closeDeps, createDeps, type Deps } from '../deps.js'
import { hashApiKey } from './api-key.js'

describe.runIf(testDialects().includes('postgres'))('revocation push over PostgreSQL LISTEN/NOTIFY', () => {
  let schema: ThrowawaySchema
  let a: Deps
  let b: Deps

  beforeAll(async () => {
    schema = await createThrowawaySchema('revoke')
    // Two instances as the service builds them from its environment: no database handed in.
    a = createDeps(testConfig(schema.env))
    b = createDeps(testConfig(schema.env))
    await Promise.all([a.start(), b.start()])
    await migrateToLatest(a.database)
  })

  afterAll(async () => {
    await Promise.all([a && closeDeps(a), b && closeDeps(b)])
    await schema?.drop()
  })

  it('listens where every notification arrives: the server itself, past any pooler', () => {
    expect(a.keyRevocations.shared).toBe(true)
  })

  it('five keys revoked on one instance are each refused by the other within 1 s', async () => {
    const delays: number[] = []
    for (let i = 0; i < 5; i++) {
      const { apiKey, secret } = await createAccountWithKey(a.database.db, {
        name: `Push ${i}`,
        now: new Date(),
        keyPrefix: a.config.keyPrefix,
      })
      expect(await b.keyVerifier.verify(secret)).toBeDefined() // now cached on b (5 s when pushed)
      await a.database.db
        .updateTable('api_keys')
        .set({ revoked_at: new Date().toISOString() })
        .where('id', '=', apiKey.id)
        .execute()
      const started = Date.now()
      expect(await a.keyRevocations.publish(hashApiKey(secret))).toBe(true)
      while ((await b.keyVerifier.verify(secret)) !== undefined && Date.now() - started < 3000) {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      delays.push(Date.now() - started)
    }
    expect(delays.filter((ms) => ms >= 1000)).toEqual([])
  })
})
