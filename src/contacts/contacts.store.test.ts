// The write helpers the routes compose around the store's writes: a taken email after the rollback,
// and a transaction run again when a concurrent create broke it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { inTransaction } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import { createContact, orContactExists, retryOnConflict } from './contacts.store.js'

describe.each(testDialects())('contact writes on %s', (dialect) => {
  let t: TestHarness
  let acme: TestAccount
  const now = () => new Date().toISOString()

  beforeAll(async () => {
    t = await createTestHarness({ dialect })
    acme = await t.createAccount()
  })
  afterAll(() => t.close())

  const contactCount = async () =>
    (await t.db.selectFrom('contacts').select('id').where('account_id', '=', acme.id).execute()).length

  it('orContactExists: a taken email is 409 contact_exists with the id that has it, nothing written', async () => {
    const first = await inTransaction(t.db, (trx) => createContact(trx, acme.id, { email: 'taken@example.com' }, now()))
    const before = await contactCount()
    const error = await orContactExists(t.db, acme.id, ' TAKEN@example.com', () =>
      inTransaction(t.db, (trx) => createContact(trx, acme.id, { email: ' TAKEN@example.com' }, now())),
    ).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(AppError)
    expect((error as AppError).code).toBe('contact_exists')
    expect((error as AppError).options.extensions?.existing_id).toBe(first.contact.id)
    expect(await contactCount()).toBe(before)
  })

  it('retryOnConflict: a fresh transaction per attempt, then 503 with Retry-After after three', async () => {
    let attempts = 0
    const error = await retryOnConflict(t.db, async (trx) => {
      attempts++
      await createContact(trx, acme.id, { email: `twice-${attempts}@example.com` }, now())
      // Always a unique violation: the same email twice in one transaction.
      await createContact(trx, acme.id, { email: 'dup@example.com' }, now())
      await createContact(trx, acme.id, { email: 'dup@example.com' }, now())
    }).catch((caught: unknown) => caught)
    expect(attempts).toBe(3)
    expect((error as AppError).code).toBe('service_unavailable')
    expect((error as AppError).options.headers).toEqual({ 'retry-after': '1' })
    const rolledBack = await t.db.selectFrom('contacts').select('id').where('email_lower', 'like', 'twice-%').execute()
    expect(rolledBack).toEqual([])
  })
})
