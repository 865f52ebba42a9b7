// Seeds a benchmark database fast, without HTTP: one big account plus many small ones. Every row is
// built by the project's own functions (createAccountWithKey, applyContactInput, toContactRows,
// normalizePhone), so what is stored is exactly what the API writes; only the insert is bulk.
// Events are not seeded: no scenario reads them, and new ones append at the right edge of their index.
import SQLite from 'better-sqlite3'
import pg from 'pg'
import { createAccountWithKey } from '../src/accounts/accounts.js'
import { applyContactInput, emptyContact, normalizePhone, toContactRows } from '../src/contacts/contacts.js'
import type { ContactInput } from '../src/contacts/contacts.schemas.js'
import type { ContactsTable, ContactTagsTable, ContactTermsTable } from '../src/contacts/contacts.table.js'
import { openDatabase } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { newId } from '../src/lib/ids.js'

export interface SeedPlan {
  /** Contacts of the one big account. */
  bigContacts: number
  /** 1-based position in the big account whose id a deep cursor starts after. */
  deepPosition: number
  smallAccounts: number
  contactsPerSmallAccount: number
}

export interface SeedResult {
  big: { accountId: string; key: string }
  /** One key per small account. */
  smallKeys: string[]
  /** The id of the big account's contact at plan.deepPosition in creation order (for a deep cursor). */
  deepId: string
  /** Ids of the big account spread over its whole range, for PATCH. */
  patchIds: string[]
  seconds: number
}

// biome-ignore format: a word list
const FIRST = [
  'Ada', 'Alan', 'Grace', 'Linus', 'Margaret', 'Donald', 'Barbara', 'Ken', 'Dennis', 'Frances',
  'Edsger', 'Radia', 'John', 'Katherine', 'Tim', 'Hedy', 'Niklaus', 'Sophie', 'Bjarne', 'Anita',
  'Maria', 'Mark', 'Martin', 'Marie', 'Lena', 'Omar', 'Yuki', 'Priya', 'Chen', 'Fatima',
  'Jonas', 'Elena', 'Carlos', 'Aisha', 'Noah', 'Olivia', 'Liam', 'Emma', 'Lucas', 'Mia',
]
// biome-ignore format: a word list
const LAST = [
  'Lovelace', 'Turing', 'Hopper', 'Torvalds', 'Hamilton', 'Knuth', 'Liskov', 'Thompson', 'Ritchie', 'Allen',
  'Dijkstra', 'Perlman', 'Backus', 'Johnson', 'Berners-Lee', 'Lamarr', 'Wirth', 'Wilson', 'Stroustrup', 'Borg',
  'Garcia', 'Smith', 'Müller', 'Rossi', 'Novak', 'Kowalski', 'Tanaka', 'Sharma', 'Wang', 'Haddad',
]
// biome-ignore format: a word list
const COMPANIES = [
  'Analytical Engines', 'Bletchley Park', 'Cobol Works', 'Kernel Labs', 'Apollo Guidance', 'TeX Press',
  'Interlink Systems', 'Bell Labs', 'Mercury Data', 'Northwind Traders', 'Globex', 'Initech', null, null,
]
const TITLES = ['Engineer', 'CTO', 'Head of Sales', 'Founder', 'Designer', null, null, null]
/** Tag and the share of contacts that carry it. */
const TAGS: Array<[string, number]> = [
  ['newsletter', 0.4],
  ['customer', 0.25],
  ['lead', 0.2],
  ['trial', 0.1],
  ['vip', 0.02],
  ['partner', 0.01],
]
const PLANS = ['free', 'pro', 'team', 'enterprise']

/** Deterministic PRNG (mulberry32), so every run seeds the same data. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const pick = <T>(random: () => number, list: readonly T[]): T => list[Math.floor(random() * list.length)] as T

/** Phone numbers normalized once by the app's own function (too slow for a million calls), for contacts to draw from. */
function phonePool(random: () => number): string[] {
  const pool: string[] = []
  for (let i = 0; pool.length < 2000 && i < 10_000; i++) {
    const raw = `+44 7700 9${String(Math.floor(random() * 100_000)).padStart(5, '0')}`
    const normalized = normalizePhone(raw)
    if (normalized) {
      pool.push(normalized)
    }
  }
  if (pool.length === 0) {
    throw new Error('no phone number normalized; check normalizePhone')
  }
  return pool
}

interface Rows {
  contacts: ContactsTable[]
  tags: ContactTagsTable[]
  terms: ContactTermsTable[]
}

/** Builds `count` contacts of one account, created one per `stepMs` from `startMs`. */
function* contactBatches(
  accountId: string,
  count: number,
  startMs: number,
  stepMs: number,
  random: () => number,
  phones: string[],
  batchSize: number,
  onId: (position: number, id: string) => void = () => {},
): Generator<Rows> {
  let batch: Rows = { contacts: [], tags: [], terms: [] }
  for (let i = 0; i < count; i++) {
    const createdMs = startMs + i * stepMs
    const created = new Date(createdMs).toISOString()
    const first = pick(random, FIRST)
    const last = pick(random, LAST)
    const tags = TAGS.filter(([, share]) => random() < share).map(([tag]) => tag)
    const input: ContactInput = {
      email: `${first}.${last}.${i}@example${i % 97}.com`.toLowerCase().replace(/[^a-z0-9.@-]/g, 'x'),
      first_name: first,
      last_name: last,
      company: pick(random, COMPANIES),
      job_title: pick(random, TITLES),
      tags,
      custom_fields:
        random() < 0.6
          ? { plan: pick(random, PLANS), seats: 1 + Math.floor(random() * 200), beta: random() < 0.1 }
          : {},
    }
    let contact = applyContactInput(emptyContact(newId('contact', createdMs), created), input, created)
    if (random() < 0.5) {
      // Same object shape and key order as applyContactInput makes: phone keeps its place.
      contact = { ...contact, phone: pick(random, phones) }
    }
    if (random() < 0.1) {
      // Updated some time after creation: spreads updated_at for the updated_after filter.
      const updated = new Date(createdMs + Math.floor(random() * 30 * 86_400_000)).toISOString()
      contact = applyContactInput(contact, { job_title: 'Updated' }, updated)
    }
    onId(i + 1, contact.id)
    const rows = toContactRows(accountId, contact)
    batch.contacts.push(rows.contact)
    batch.tags.push(...rows.tags)
    batch.terms.push(...rows.terms)
    if (batch.contacts.length >= batchSize) {
      yield batch
      batch = { contacts: [], tags: [], terms: [] }
    }
  }
  if (batch.contacts.length > 0) {
    yield batch
  }
}

const CONTACT_COLUMNS = ['account_id', 'id', 'email_lower', 'search', 'created_at', 'updated_at', 'body'] as const

/** Accounts and keys through the app's own function (Kysely, one transaction each). */
async function createAccounts(handle: ReturnType<typeof openDatabase>, plan: SeedPlan, now: Date) {
  const big = await createAccountWithKey(handle.db, { name: 'Big Co', now, keyPrefix: 'service' })
  const small: Array<{ id: string; key: string }> = []
  for (let i = 0; i < plan.smallAccounts; i++) {
    const created = await createAccountWithKey(handle.db, { name: `Small ${i}`, now, keyPrefix: 'service' })
    small.push({ id: created.account.id, key: created.secret })
  }
  return { big: { accountId: big.account.id, key: big.secret }, small }
}

/** Every account's contacts, oldest first: the big account spans the past ~year, small ones the past day. */
function* allBatches(
  big: string,
  small: Array<{ id: string }>,
  plan: SeedPlan,
  batchSize: number,
  picked: { deepId: string; patchIds: string[] },
) {
  const random = prng(42)
  const phones = phonePool(random)
  const nowMs = Date.now()
  const bigStart = nowMs - 400 * 86_400_000
  const bigStep = Math.max(1, Math.floor((360 * 86_400_000) / Math.max(1, plan.bigContacts)))
  const patchEvery = Math.max(1, Math.floor(plan.bigContacts / 1000))
  yield* contactBatches(big, plan.bigContacts, bigStart, bigStep, random, phones, batchSize, (position, id) => {
    if (position === plan.deepPosition) {
      picked.deepId = id
    }
    if (position % patchEvery === 0) {
      picked.patchIds.push(id)
    }
  })
  const smallStart = nowMs - 36 * 3_600_000
  for (const [index, account] of small.entries()) {
    const start = smallStart + index * plan.contactsPerSmallAccount * 10
    yield* contactBatches(account.id, plan.contactsPerSmallAccount, start, 10, random, phones, batchSize)
  }
}

// The bulk load bypasses the store, so the quota's count (src/contacts/contact-count.ts) is set
// from the rows, as the migration that introduced it does.
const RECOUNT_CONTACTS = `
  delete from contact_counts;
  insert into contact_counts (account_id, shard, n) select account_id, 0, count(*) from contacts group by account_id`

export async function seedSqlite(file: string, plan: SeedPlan): Promise<SeedResult> {
  const started = performance.now()
  const handle = openDatabase({ kind: 'sqlite', path: file, synchronous: 'NORMAL' })
  await migrateToLatest(handle)
  const { big, small } = await createAccounts(handle, plan, new Date())
  await handle.close()

  const db = new SQLite(file)
  // Bulk load: no journal, no fsync; the server reopens in WAL mode with the app's settings.
  db.pragma('journal_mode = OFF')
  db.pragma('synchronous = OFF')
  db.pragma('cache_size = -200000')
  const insertContact = db.prepare(
    `insert into contacts (${CONTACT_COLUMNS.join(', ')}) values (${CONTACT_COLUMNS.map(() => '?').join(', ')})`,
  )
  const insertTag = db.prepare('insert into contact_tags (account_id, tag, contact_id) values (?, ?, ?)')
  const insertTerm = db.prepare('insert into contact_terms (account_id, term, contact_id) values (?, ?, ?)')
  const insertBatch = db.transaction((rows: Rows) => {
    for (const row of rows.contacts) {
      insertContact.run(CONTACT_COLUMNS.map((column) => row[column]))
    }
    for (const tag of rows.tags) {
      insertTag.run(tag.account_id, tag.tag, tag.contact_id)
    }
    for (const term of rows.terms) {
      insertTerm.run(term.account_id, term.term, term.contact_id)
    }
  })
  const picked = { deepId: '', patchIds: [] as string[] }
  for (const rows of allBatches(big.accountId, small, plan, 10_000, picked)) {
    insertBatch(rows)
  }
  db.exec(RECOUNT_CONTACTS)
  db.pragma('journal_mode = WAL')
  db.close()
  return { big, smallKeys: small.map((s) => s.key), ...picked, seconds: (performance.now() - started) / 1000 }
}

/** Seeds a fresh PostgreSQL database (the caller creates and drops it). */
export async function seedPostgres(url: string, plan: SeedPlan): Promise<SeedResult> {
  const started = performance.now()
  const handle = openDatabase({ kind: 'postgres', url })
  await migrateToLatest(handle)
  const { big, small } = await createAccounts(handle, plan, new Date())
  await handle.close()

  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query('set synchronous_commit = off')
    const contactSql = `insert into contacts (${CONTACT_COLUMNS.join(', ')}) select * from unnest(${CONTACT_COLUMNS.map(
      (_, i) => `$${i + 1}::text[]`,
    ).join(', ')})`
    const tagSql =
      'insert into contact_tags (account_id, tag, contact_id) select * from unnest($1::text[], $2::text[], $3::text[])'
    const termSql =
      'insert into contact_terms (account_id, term, contact_id) select * from unnest($1::text[], $2::text[], $3::text[])'
    const picked = { deepId: '', patchIds: [] as string[] }
    for (const rows of allBatches(big.accountId, small, plan, 5_000, picked)) {
      await client.query('begin')
      await client.query(
        contactSql,
        CONTACT_COLUMNS.map((column) => rows.contacts.map((row) => row[column])),
      )
      if (rows.tags.length > 0) {
        await client.query(tagSql, [
          rows.tags.map((t) => t.account_id),
          rows.tags.map((t) => t.tag),
          rows.tags.map((t) => t.contact_id),
        ])
      }
      await client.query(termSql, [
        rows.terms.map((t) => t.account_id),
        rows.terms.map((t) => t.term),
        rows.terms.map((t) => t.contact_id),
      ])
      await client.query('commit')
    }
    await client.query(RECOUNT_CONTACTS)
    // A production database has been vacuumed and analyzed by autovacuum; a fresh bulk load has not.
    await client.query('vacuum analyze')
    return { big, smallKeys: small.map((s) => s.key), ...picked, seconds: (performance.now() - started) / 1000 }
  } finally {
    await client.end()
  }
}
