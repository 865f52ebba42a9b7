// Seeds a benchmark database without HTTP: one big account plus many small ones, written by the
// contact service in batches (src/contacts/contact-service.ts, applyBatch), so what is stored (rows,
// counts, events) is exactly what the API writes.
import { sql } from 'kysely'
import pg from 'pg'
import { createAccountWithKey } from '../src/accounts/accounts.js'
import { liveTenant } from '../src/accounts/tenant.js'
import { loadConfig } from '../src/config.js'
import { type ContactService, createContactService } from '../src/contacts/contact-service.js'
import { normalizePhone } from '../src/contacts/contacts.js'
import type { ContactInput } from '../src/contacts/contacts.schemas.js'
import { type DatabaseHandle, openDatabase } from '../src/db/database.js'
import { migrateToLatest } from '../src/db/migrate.js'
import { purgeExpiredEvents } from '../src/events/events.store.js'
import { manualClock } from '../src/lib/clock.js'

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
  /** The small accounts' ids (live mode), in the order of smallKeys. */
  smallAccountIds: string[]
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

/**
 * Phone numbers, normalized once by the app's own function; contacts draw from this pool. North
 * American ones in E.164, which the contact rules take without a call to libphonenumber.
 */
function phonePool(random: () => number): string[] {
  const pool: string[] = []
  for (let i = 0; pool.length < 2000 && i < 10_000; i++) {
    const raw = `+1415555${String(Math.floor(random() * 10_000)).padStart(4, '0')}`
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

/** A contact to create, at its creation time, and whether it is updated some time later. */
interface Planned {
  input: ContactInput
  createdMs: number
  /** When it is updated (job_title), or undefined. */
  updatedMs: number | undefined
}

/** `count` contacts of one account, created one per `stepMs` from `startMs`. */
function* plannedContacts(
  count: number,
  startMs: number,
  stepMs: number,
  random: () => number,
  phones: string[],
): Generator<Planned> {
  for (let i = 0; i < count; i++) {
    const createdMs = startMs + i * stepMs
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
    if (random() < 0.5) {
      input.phone = pick(random, phones)
    }
    // Some are updated after their creation: spreads updated_at for the updated_after filter.
    const updatedMs = random() < 0.1 ? createdMs + Math.floor(random() * 30 * 86_400_000) : undefined
    yield { input, createdMs, updatedMs }
  }
}

/** Contacts per applyBatch: one transaction each. */
const SEED_BATCH = 500

/**
 * Writes an account's planned contacts through the contact service, as the API would (rows, count,
 * events), a batch at a time with the clock at the batch's first creation time; then updates the
 * ones planned to change, at their time. Calls `onId` with each contact's 1-based position and id.
 */
async function seedAccount(
  contacts: ContactService,
  clock: ReturnType<typeof manualClock>,
  accountId: string,
  planned: Iterable<Planned>,
  onId: (position: number, id: string) => void = () => {},
): Promise<void> {
  let position = 0
  let batch: Planned[] = []
  const write = async () => {
    clock.set(new Date((batch[0] as Planned).createdMs))
    const results = await contacts.applyBatch(
      liveTenant(accountId),
      batch.map(({ input }) => ({ op: 'create', input })),
    )
    const updates: Array<{ id: string; at: number }> = []
    results.forEach((result, i) => {
      if (!('status' in result) || result.status !== 201) {
        throw new Error(`seed: a create was refused: ${JSON.stringify(result)}`)
      }
      const id = /"id":"([^"]+)"/.exec(result.body)?.[1] as string
      onId(++position, id)
      const updatedMs = batch[i]?.updatedMs
      if (updatedMs !== undefined) {
        updates.push({ id, at: updatedMs })
      }
    })
    if (updates.length > 0) {
      clock.set(new Date(Math.max(...updates.map((update) => update.at))))
      await contacts.applyBatch(
        liveTenant(accountId),
        updates.map(({ id }) => ({ op: 'update', id, input: { job_title: 'Updated' } })),
      )
    }
    batch = []
  }
  for (const contact of planned) {
    batch.push(contact)
    if (batch.length >= SEED_BATCH) {
      await write()
    }
  }
  if (batch.length > 0) {
    await write()
  }
}

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

/** The plan's accounts with their keys and contacts: everything of a SeedResult but its time. */
async function seedAccounts(handle: DatabaseHandle, plan: SeedPlan): Promise<Omit<SeedResult, 'seconds'>> {
  const { big, small } = await createAccounts(handle, plan, new Date())
  const picked = await seedAll(handle, big.accountId, small, plan)
  return { big, smallKeys: small.map((s) => s.key), smallAccountIds: small.map((s) => s.id), ...picked }
}

/** Every account's contacts, oldest first: the big account spans the past ~year, small ones the past day. */
async function seedAll(
  handle: DatabaseHandle,
  big: string,
  small: Array<{ id: string }>,
  plan: SeedPlan,
): Promise<{ deepId: string; patchIds: string[] }> {
  const picked = { deepId: '', patchIds: [] as string[] }
  const clock = manualClock()
  const contacts = createContactService({
    db: handle.db,
    clock,
    maxContacts: Number.MAX_SAFE_INTEGER,
    maxTestContacts: 0,
  })
  const random = prng(42)
  const phones = phonePool(random)
  const nowMs = Date.now()
  const bigStart = nowMs - 400 * 86_400_000
  const bigStep = Math.max(1, Math.floor((360 * 86_400_000) / Math.max(1, plan.bigContacts)))
  const patchEvery = Math.max(1, Math.floor(plan.bigContacts / 1000))
  await seedAccount(
    contacts,
    clock,
    big,
    plannedContacts(plan.bigContacts, bigStart, bigStep, random, phones),
    (position, id) => {
      if (position === plan.deepPosition) {
        picked.deepId = id
      }
      if (position % patchEvery === 0) {
        picked.patchIds.push(id)
      }
    },
  )
  const smallStart = nowMs - 36 * 3_600_000
  for (const [index, account] of small.entries()) {
    const start = smallStart + index * plan.contactsPerSmallAccount * 10
    await seedAccount(
      contacts,
      clock,
      account.id,
      plannedContacts(plan.contactsPerSmallAccount, start, 10, random, phones),
    )
  }
  // Contacts seeded months back come with events as old, which a server purges (past
  // EVENT_RETENTION_DAYS) from its start: it would be purging them while the bench measures. A
  // server that had been running all along would have purged them already.
  await purgeExpiredEvents(handle.db, new Date(), loadConfig().eventRetentionDays)
  return picked
}

export async function seedSqlite(file: string, plan: SeedPlan): Promise<SeedResult> {
  const started = performance.now()
  const handle = openDatabase({ kind: 'sqlite', path: file, synchronous: 'NORMAL' })
  await migrateToLatest(handle)
  // A bulk load: no journal, no fsync, a large page cache; the server opens the file in WAL mode.
  for (const pragma of ['journal_mode = off', 'synchronous = off', 'cache_size = -200000']) {
    await sql.raw(`pragma ${pragma}`).execute(handle.db)
  }
  const seeded = await seedAccounts(handle, plan)
  await sql`pragma journal_mode = wal`.execute(handle.db)
  await handle.close()
  return { ...seeded, seconds: (performance.now() - started) / 1000 }
}

/** Seeds a fresh PostgreSQL database (the caller creates and drops it). */
export async function seedPostgres(url: string, plan: SeedPlan): Promise<SeedResult> {
  const started = performance.now()
  const database = new URL(url).pathname.slice(1)
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  try {
    // A bulk load: commits do not wait for the WAL's flush (reset before the server connects).
    await admin.query(`alter database "${database}" set synchronous_commit = off`)
    const handle = openDatabase({ kind: 'postgres', url })
    try {
      await migrateToLatest(handle)
      const seeded = await seedAccounts(handle, plan)
      // A production database has been vacuumed and analyzed by autovacuum; a fresh bulk load has not.
      await admin.query('vacuum analyze')
      return { ...seeded, seconds: (performance.now() - started) / 1000 }
    } finally {
      await handle.close()
    }
  } finally {
    await admin.query(`alter database "${database}" reset synchronous_commit`)
    await admin.end()
  }
}
