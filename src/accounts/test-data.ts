// "Delete all test data": the request marks the account's test environment, and a background job
// deletes its contacts, events, webhook endpoints and deliveries, imports and idempotency answers
// in short transactions, then clears the mark. The mark outlives a crash, so a restarted process
// resumes the deletion. API keys, their use and the audit log are kept. Only a test tenant's rows
// are ever touched: docs/test-mode.md.
import { type Kysely, sql } from 'kysely'
import { type AuditActor, recordAudit } from '../audit/audit.js'
import type { ContactService } from '../contacts/contact-service.js'
import type { Database } from '../db/schema.js'
import { inTransaction } from '../db/transaction.js'
import type { Clock } from '../lib/clock.js'
import { coalescedRun } from '../lib/coalesced-run.js'
import { type Tenant, tenantById } from './tenant.js'

/** Rows one transaction deletes at most: a few milliseconds of the database (docs/design.md#fair-share). */
const PURGE_BATCH = 500

/** The tenant tables the deletion empties before the contacts, with the columns that name a row. */
const TABLES = [
  ['webhook_deliveries', ['account_id', 'id']],
  ['webhook_endpoints', ['account_id', 'id']],
  ['events', ['account_id', 'id']],
  ['contact_import_file_parts', ['account_id', 'import_id', 'part']],
  ['contact_imports', ['account_id', 'id']],
  ['idempotency_keys', ['account_id', 'key']],
] as const

/** Marks the test environment for deletion, audited; the purger does the rest. */
export async function requestTestDataDeletion(
  db: Kysely<Database>,
  tenant: Tenant,
  actor: AuditActor,
  now: Date,
): Promise<void> {
  if (tenant.livemode) {
    throw new Error('requestTestDataDeletion: live data is never deleted this way')
  }
  await inTransaction(db, async (trx) => {
    await trx
      .updateTable('accounts')
      .set({ purge_requested_at: now.toISOString() })
      .where('id', '=', tenant.id)
      .where('purge_requested_at', 'is', null)
      .execute()
    await recordAudit(
      trx,
      tenant.id,
      { action: 'test_data.deleted', targetId: tenant.accountId, actor, detail: {} },
      now,
    )
  })
}

/** When the deletion of the tenant's test data was asked for, while it runs; undefined otherwise. */
export async function testDataDeletionSince(db: Kysely<Database>, tenant: Tenant): Promise<string | undefined> {
  const row = await db
    .selectFrom('accounts')
    .select('purge_requested_at')
    .where('id', '=', tenant.id)
    .executeTakeFirst()
  return row?.purge_requested_at ?? undefined
}

export interface TestDataPurger {
  /** Look for marked test environments now (a deletion was just asked for). */
  wake(): void
  /** Resume marked environments and poll for more (the serving process). */
  start(report: (error: unknown) => void): void
  stop(): Promise<void>
  /** Until nothing is marked: tests wait for the deletion with it. */
  drain(): Promise<void>
}

const POLL_MS = 5000

export function createTestDataPurger(deps: {
  db: Kysely<Database>
  contacts: ContactService
  clock: Clock
}): TestDataPurger {
  const { db } = deps
  let report: (error: unknown) => void = () => {}
  const purging = coalescedRun(purgeMarked, (error) => report(error))

  async function purgeMarked(): Promise<void> {
    for (;;) {
      const marked = await db
        .selectFrom('accounts')
        .select(['id', 'purge_requested_at'])
        .where('purge_requested_at', 'is not', null)
        .limit(10)
        .execute()
      const tenants = marked.map((row) => tenantById(row.id)).filter((tenant) => !tenant.livemode)
      if (tenants.length === 0 || purging.stopped) {
        return
      }
      for (const tenant of tenants) {
        await purgeTenant(tenant)
        if (purging.stopped) {
          return
        }
        // Cleared only if nobody asked again meanwhile: then it runs once more.
        const asked = marked.find((row) => row.id === tenant.id)?.purge_requested_at ?? null
        await db
          .updateTable('accounts')
          .set({ purge_requested_at: null })
          .where('id', '=', tenant.id)
          .where('purge_requested_at', '=', asked)
          .execute()
      }
    }
  }

  /** Every table of the tenant, a batch per transaction with a turn of the event loop between. */
  async function purgeTenant(tenant: Tenant): Promise<void> {
    for (const [table, key] of TABLES) {
      while (!purging.stopped && (await purgeBatch(table, key, tenant.id)) === PURGE_BATCH) {
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
    while (!purging.stopped && (await deps.contacts.purgeTest(tenant, PURGE_BATCH)) === PURGE_BATCH) {
      await new Promise((resolve) => setImmediate(resolve))
    }
  }

  async function purgeBatch(table: string, key: readonly string[], tenantId: string): Promise<number> {
    const columns = sql.join(key.map((column) => sql.ref(column)))
    const result = await sql`
      delete from ${sql.table(table)} where account_id = ${tenantId} and (${columns}) in (
        select ${columns} from ${sql.table(table)} where account_id = ${tenantId} limit ${PURGE_BATCH})`.execute(db)
    return Number(result.numAffectedRows ?? 0)
  }

  return {
    wake: purging.wake,
    start(onError) {
      report = onError
      purging.poll(POLL_MS)
    },
    stop: purging.stop,
    async drain() {
      purging.wake()
      while (purging.current) {
        await purging.current
      }
    },
  }
}
