// The only way contacts are written, by every caller: the API and web routes, the batch endpoint,
// the CSV import and the bench's seeding (contact-writers.test.ts keeps it so). Each operation owns
// its transaction, its quota check, its retry when it lost a race, and its after-commit work; its
// rows and events are written by writeContacts (contact-writes.ts).
import type { Kysely } from 'kysely'
import type { Tenant } from '../accounts/tenant.js'
import { isUniqueViolation } from '../db/dialect.js'
import type { Database } from '../db/schema.js'
import { inRetriedTransaction, type Trx } from '../db/transaction.js'
import { AppError } from '../http/errors.js'
import type { Clock } from '../lib/clock.js'
import { newId } from '../lib/ids.js'
import { contactCount, pickCountShard, quotaExceeded } from './contact-count.js'
import { type ContactOperation, type OperationResult, runOperations } from './contact-operations.js'
import { purgeTestContacts, writeContacts } from './contact-writes.js'
import { applyContactInput, emptyContact } from './contacts.js'
import type { ContactInput } from './contacts.schemas.js'
import { contactExists, findContactIdsByEmail, lockContact, type StoredContact } from './contacts.store.js'

/** Work done in the write's transaction, after its rows and before its commit (an Idempotency-Key's answer). */
export type InTransaction<T> = (trx: Trx, result: T) => Promise<void>

/**
 * A test of the contact as stored, made in the write's transaction with the row locked (If-Match,
 * http/conditional.ts): it throws to refuse the write, which rolls it back. A delete's test sees
 * the contact as it was.
 */
export type ContactPrecondition = (currentBody: string) => void

export type UpsertInput = ContactInput & { email: string }

export interface ImportSlice {
  /** CSV rows, upserted by email; each row's custom_fields replace the stored ones. */
  rows: readonly UpsertInput[]
  /** How long the transaction may go on taking rows before it commits. */
  sliceMs: number
  now: string
  /** Moves the job on in the same transaction; throwing rolls the slice back. */
  inTransaction: InTransaction<ImportSliceResult>
}

export interface ImportSliceResult {
  /** Rows written: a prefix of the slice's rows, at least one. */
  written: number
  created: number
  updated: number
  /** Rows that matched a contact and changed nothing (no event). */
  unchanged: number
}

export interface ContactService {
  create(tenant: Tenant, input: ContactInput, options?: WriteOptions<StoredContact>): Promise<StoredContact>
  /** Creates the contact with this email, or updates the one that has it. */
  upsert(
    tenant: Tenant,
    input: UpsertInput,
    options?: WriteOptions<StoredContact & { created: boolean }>,
  ): Promise<StoredContact & { created: boolean }>
  /** Merge semantics; undefined when the account has no such contact. */
  update(
    tenant: Tenant,
    id: string,
    input: ContactInput,
    options?: WriteOptions<StoredContact> & { precondition?: ContactPrecondition | undefined },
  ): Promise<StoredContact | undefined>
  /** False when the account has no such contact. */
  remove(tenant: Tenant, id: string, options?: { precondition?: ContactPrecondition | undefined }): Promise<boolean>
  /** The operations in order in one transaction, each answered as its single endpoint would be. */
  applyBatch(
    tenant: Tenant,
    operations: readonly ContactOperation[],
    options?: WriteOptions<OperationResult[]>,
  ): Promise<OperationResult[]>
  /** One transaction of a CSV import: rows from the first on, for about `sliceMs`. */
  importSlice(tenant: Tenant, slice: ImportSlice): Promise<ImportSliceResult>
  /** The most contacts the tenant may have: the quota of its mode. */
  quota(tenant: Tenant): number
  /** Deletes up to `limit` of a test tenant's contacts, without events; how many it deleted. */
  purgeTest(tenant: Tenant, limit: number): Promise<number>
}

export interface WriteOptions<T> {
  inTransaction?: InTransaction<T> | undefined
}

export interface ContactServiceOptions {
  db: Kysely<Database>
  clock: Clock
  /** MAX_CONTACTS_PER_ACCOUNT. */
  maxContacts: number
  /** MAX_TEST_CONTACTS_PER_ACCOUNT: the same for test mode. */
  maxTestContacts: number
  /** After each commit that may have written events of the tenant: wakes its long polls (events/feed-signal.ts). */
  onCommitted?: (tenantId: string) => void
}

/** Rows decided and written together in an import slice (one read of their contacts each time). */
const IMPORT_BATCH_ROWS = 50

export function createContactService(options: ContactServiceOptions): ContactService {
  const { db, clock, onCommitted } = options
  const now = () => clock.now().toISOString()
  const quotaOf = (tenant: Tenant) => (tenant.livemode ? options.maxContacts : options.maxTestContacts)
  const newContact = (tenant: Tenant, input: ContactInput, at: string) =>
    applyContactInput(emptyContact(newId('contact'), at, tenant.livemode), input, at)

  /** A transaction of the tenant that counts its changes in one shard, retried when it lost a race. */
  const write = async <T>(
    tenant: Tenant,
    work: (trx: Trx, shard: number, attempt: number) => Promise<T>,
    retry: { uniqueViolations?: boolean; busy?: string } = {},
  ): Promise<T> => {
    let attempt = 0
    const result = await inRetriedTransaction(db, (trx) => work(trx, pickCountShard(), attempt), {
      ...retry,
      onAttempt: (n) => {
        attempt = n
      },
    })
    onCommitted?.(tenant.id)
    return result
  }

  /** A unique violation on the email, which other contact has it: 409 contact_exists. */
  const orContactExists = async <T>(accountId: string, email: string | null | undefined, run: () => Promise<T>) => {
    try {
      return await run()
    } catch (error) {
      if (isUniqueViolation(error) && email?.trim()) {
        throw contactExists((await findContactIdsByEmail(db, accountId, [email])).values().next().value)
      }
      throw error
    }
  }

  const busy = 'The contact is being changed by other requests; retry shortly.'

  return {
    quota: quotaOf,
    purgeTest: (tenant, limit) => write(tenant, (trx) => purgeTestContacts(trx, tenant, limit)),

    create(tenant, input, options = {}) {
      const accountId = tenant.id
      const maxContacts = quotaOf(tenant)
      const at = now()
      const contact = newContact(tenant, input, at)
      return orContactExists(accountId, contact.email, () =>
        write(tenant, async (trx, shard) => {
          const written = await writeContacts(trx, { accountId, shard, now: at }, [{ type: 'create', contact }])
          if ((written.count ?? (await contactCount(trx, accountId))) > maxContacts) {
            throw quotaExceeded(tenant, maxContacts)
          }
          const stored = { contact, body: written.bodies[0] as string }
          await options.inTransaction?.(trx, stored)
          return stored
        }),
      )
    },

    upsert(tenant, input, options = {}) {
      const accountId = tenant.id
      const maxContacts = quotaOf(tenant)
      const at = now()
      return write(
        tenant,
        async (trx, shard) => {
          const current = await lockContact(trx, accountId, { email: input.email })
          const scope = { accountId, shard, now: at }
          let result: StoredContact & { created: boolean }
          if (current) {
            const after = applyContactInput(current.contact, input, at)
            const written =
              after === current.contact
                ? current.body
                : (await writeContacts(trx, scope, [{ type: 'update', before: current.contact, after }])).bodies[0]
            result = { contact: after, body: written as string, created: false }
          } else {
            const contact = newContact(tenant, input, at)
            const written = await writeContacts(trx, scope, [{ type: 'create', contact }])
            if ((written.count ?? (await contactCount(trx, accountId))) > maxContacts) {
              throw quotaExceeded(tenant, maxContacts)
            }
            result = { contact, body: written.bodies[0] as string, created: true }
          }
          await options.inTransaction?.(trx, result)
          return result
        },
        { uniqueViolations: true, busy },
      )
    },

    update(tenant, id, input, options = {}) {
      const accountId = tenant.id
      const at = now()
      return orContactExists(accountId, input.email, () =>
        write(tenant, async (trx, shard) => {
          const current = await lockContact(trx, accountId, { id })
          if (!current) {
            return undefined
          }
          options.precondition?.(current.body)
          const after = applyContactInput(current.contact, input, at)
          const stored =
            after === current.contact
              ? current
              : {
                  contact: after,
                  body: (
                    await writeContacts(trx, { accountId, shard, now: at }, [
                      { type: 'update', before: current.contact, after },
                    ])
                  ).bodies[0] as string,
                }
          await options.inTransaction?.(trx, stored)
          return stored
        }),
      )
    },

    remove(tenant, id, options = {}) {
      const accountId = tenant.id
      const at = now()
      return write(tenant, async (trx, shard) => {
        const written = await writeContacts(trx, { accountId, shard, now: at }, [{ type: 'delete', id }])
        const deleted = written.bodies[0]
        if (deleted === undefined) {
          return false
        }
        options.precondition?.(deleted)
        return true
      })
    },

    applyBatch(tenant, operations, options = {}) {
      const at = now()
      return write(
        tenant,
        async (trx, shard, attempt) => {
          // Run again after a conflict: one at a time with the account's other batches run again.
          const scope = { tenant, shard, now: at, maxContacts: quotaOf(tenant), serialized: attempt > 1 }
          const results = await runOperations(trx, scope, operations)
          await options.inTransaction?.(trx, results)
          return results
        },
        { uniqueViolations: true, busy },
      )
    },

    importSlice(tenant, slice) {
      return write(
        tenant,
        async (trx, shard) => {
          const started = performance.now()
          const result: ImportSliceResult = { written: 0, created: 0, updated: 0, unchanged: 0 }
          // Rows until the transaction has run sliceMs: on SQLite it holds the database meanwhile.
          while (
            result.written < slice.rows.length &&
            (result.written === 0 || performance.now() - started < slice.sliceMs)
          ) {
            const from = result.written
            const rows = slice.rows.slice(from, from + IMPORT_BATCH_ROWS)
            const scope = { tenant, shard, now: slice.now, maxContacts: Number.POSITIVE_INFINITY }
            const operations = rows.map((input) => ({ op: 'upsert' as const, input, replaceCustomFields: true }))
            const results = await runOperations(trx, scope, operations)
            results.forEach((outcome, i) => {
              if ('error' in outcome) {
                throw rowRefused(outcome.error, from + i)
              }
              if (outcome.status === 201) {
                result.created++
              } else if (outcome.status === 200) {
                result[outcome.changed ? 'updated' : 'unchanged']++
              }
            })
            result.written += rows.length
          }
          await slice.inTransaction(trx, result)
          return result
        },
        { uniqueViolations: true, busy: 'The contacts are being changed by other requests.' },
      )
    },
  }
}

/** A row's refusal, naming the row (0-based, within the slice) in the extension `row`. */
function rowRefused(error: AppError, row: number): AppError {
  return new AppError(error.code, `row ${row}: ${error.message}`, {
    ...error.options,
    extensions: { ...error.options.extensions, row: String(row) },
  })
}
