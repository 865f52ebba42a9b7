// Small assertions shared by the HTTP suites.
import type { LightMyRequestResponse } from 'fastify'
import { sql } from 'kysely'
import { expect } from 'vitest'
import { tenantById } from '../src/accounts/tenant.js'
import type { Trx } from '../src/db/transaction.js'
import { type EventType, eventBody, newEvent } from '../src/events/events.js'
import { insertEvents } from '../src/events/events.store.js'
import type { TestAccount, TestHarness } from './harness.js'

/** Asserts an RFC 9457 problem response with this status and code; returns the body. */
export function expectProblem(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status)
  expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
  const body = res.json()
  expect(body).toMatchObject({ type: `/docs/errors#${code}`, status, code })
  expect(typeof body.title).toBe('string')
  expect(typeof body.detail).toBe('string')
  expect(body.request_id).toBe(res.headers['request-id'])
  return body
}

/** Everything an account has stored, to prove a rejected request changed nothing. */
export async function snapshotAccount(t: TestHarness, account: TestAccount) {
  const contacts = await t.db
    .selectFrom('contacts')
    .select(['id', 'body'])
    .where('account_id', '=', account.id)
    .orderBy('id')
    .execute()
  const tags = await t.db
    .selectFrom('contact_tags')
    .select(['tag', 'contact_id'])
    .where('account_id', '=', account.id)
    .orderBy('contact_id')
    .orderBy('tag')
    .execute()
  const events = await t.db.selectFrom('events').select('id').where('account_id', '=', account.id).execute()
  return { contacts, tags, events: events.length }
}

export async function createContact(t: TestHarness, account: TestAccount, payload: object) {
  const res = await t.inject(account, { method: 'POST', url: '/api/v1/contacts', payload })
  expect(res.statusCode, res.body).toBe(201)
  return res.json()
}

/**
 * On the PostgreSQL server a contacts list page's ETag also names the transactions still open below
 * the account's newest change (src/contacts/contacts.list-version.ts), and other suites share the
 * server: waits until none is, so two reads in a row see the same tag. A no-op elsewhere.
 */
export async function listVersionSettled(t: TestHarness, account: TestAccount): Promise<void> {
  if (t.dialect !== 'postgres') {
    return
  }
  for (let attempt = 0; attempt < 500; attempt++) {
    const { rows } = await sql<{ settled: boolean }>`
      select coalesce(max(tx_id), 0) < pg_snapshot_xmin(pg_current_snapshot())::text::bigint as settled
      from events where account_id = ${account.id}`.execute(t.db)
    if (rows[0]?.settled) {
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** An event around any object body, written in the transaction as a change writes its event. */
export async function recordEvent(trx: Trx, accountId: string, type: EventType, objectBody: string, now: string) {
  const event = newEvent(type, now, tenantById(accountId).livemode)
  await insertEvents(trx, accountId, now, type, [[event.id, eventBody(event, objectBody)]])
}
