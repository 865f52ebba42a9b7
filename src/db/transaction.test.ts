// inTransaction: effects run after the commit, in order, never after a rollback, and cannot undo it.
// inRetriedTransaction: a fresh transaction per attempt, and a 503 when the attempts are spent.

import { sql } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { openTestDatabase } from '../../test/harness.js'
import { findAccount, insertAccount } from '../accounts/accounts.store.js'
import { AppError } from '../http/errors.js'
import type { DatabaseHandle } from './database.js'
import { migrateToLatest } from './migrate.js'
import { inRetriedTransaction, inTransaction } from './transaction.js'

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

  it('runs a unique violation again only when asked, in a fresh transaction, then answers 503 with Retry-After', async () => {
    let attempts = 0
    const clash = async (trx: Parameters<Parameters<typeof inRetriedTransaction>[1]>[0]) => {
      attempts++
      await insertAccount(trx, `Rolled back ${attempts}`, now)
      // Always a unique violation: the same key twice in one transaction.
      await sql`insert into event_sequence (name, last_position) values ('clash', 0)`.execute(trx)
      await sql`insert into event_sequence (name, last_position) values ('clash', 0)`.execute(trx)
    }
    await expect(inRetriedTransaction(database.db, clash)).rejects.not.toBeInstanceOf(AppError)
    expect(attempts).toBe(1)
    attempts = 0
    const error = await inRetriedTransaction(database.db, clash, { uniqueViolations: true, busy: 'Busy.' }).catch(
      (caught: unknown) => caught,
    )
    expect(attempts).toBe(3)
    expect(error).toBeInstanceOf(AppError)
    expect((error as AppError).code).toBe('service_unavailable')
    expect((error as AppError).message).toBe('Busy.')
    expect((error as AppError).options.headers).toEqual({ 'retry-after': '1' })
    const rolledBack = await database.db
      .selectFrom('accounts')
      .select('id')
      .where('name', 'like', 'Rolled back%')
      .execute()
    expect(rolledBack).toEqual([])
  })
})
