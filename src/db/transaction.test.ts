// inTransaction: effects run after the commit, in order, never after a rollback, and cannot undo it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { openTestDatabase } from '../../test/harness.js'
import { findAccount, insertAccount } from '../accounts/accounts.store.js'
import type { DatabaseHandle } from './database.js'
import { migrateToLatest } from './migrate.js'
import { inTransaction } from './transaction.js'

const now = new Date('2026-11-24T00:00:00Z')

describe.each(testDialects())('inTransaction on %s', (dialect) => {
  let database: DatabaseHandle
  let dispose: () => Promise<void>
  beforeEach(async () => {
    ;({ database, dispose } = await openTestDatabase(dialect, { migrated: true }))
    await migrateToLatest(database)
  })
  afterEach(async () => {
    await database.close()
    await dispose()
  })

  it('runs the effects after the commit, in registration order, and returns the result', async () => {
    const seen: string[] = []
    const account = await inTransaction(database.db, async (trx, onCommit) => {
      const inserted = await insertAccount(trx, 'Acme', now)
      onCommit(async () => {
        // Committed: visible outside the transaction.
        seen.push(`first:${(await findAccount(database.db, inserted.id))?.name}`)
      })
      onCommit(() => {
        seen.push('second')
      })
      seen.push('work done')
      return inserted
    })
    expect(seen).toEqual(['work done', 'first:Acme', 'second'])
    expect(await findAccount(database.db, account.id)).toMatchObject({ name: 'Acme' })
  })

  it('runs no effect when the work fails, and rolls the work back', async () => {
    const seen: string[] = []
    let id = ''
    await expect(
      inTransaction(database.db, async (trx, onCommit) => {
        id = (await insertAccount(trx, 'Acme', now)).id
        onCommit(() => {
          seen.push('effect')
        })
        throw new Error('boom')
      }),
    ).rejects.toThrow('boom')
    expect(seen).toEqual([])
    expect(await findAccount(database.db, id)).toBeUndefined()
  })

  it('keeps the commit when an effect throws, runs the others, then rethrows the first error', async () => {
    const seen: string[] = []
    let id = ''
    await expect(
      inTransaction(database.db, async (trx, onCommit) => {
        id = (await insertAccount(trx, 'Acme', now)).id
        onCommit(() => {
          throw new Error('first failure')
        })
        onCommit(async () => {
          throw new Error('second failure')
        })
        onCommit(() => {
          seen.push('third ran')
        })
      }),
    ).rejects.toThrow('first failure')
    expect(seen).toEqual(['third ran'])
    expect(await findAccount(database.db, id)).toMatchObject({ name: 'Acme' })
  })
})
