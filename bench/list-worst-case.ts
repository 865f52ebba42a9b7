// The list filters' worst cases, timed through the app's own listContactRows (method and options:
// bench/README.md#list-worst-case).
//
//   node --import tsx bench/list-worst-case.ts --db=sqlite|postgres --contacts=100000 [--src=DIR]
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { liveTenant } from '../src/accounts/tenant.js'
import { createContactService } from '../src/contacts/contact-service.js'
import { openDatabase } from '../src/db/database.js'
import { systemClock } from '../src/lib/clock.js'
import { seedPostgres, seedSqlite } from './seed.js'

const args = Object.fromEntries(
  process.argv.slice(2).map((arg) => {
    const [key, value] = arg.replace(/^--/, '').split('=')
    return [key, value ?? '']
  }),
)
const kind = args.db === 'postgres' ? 'postgres' : 'sqlite'
const contacts = Number(args.contacts ?? 100_000)
const src = path.resolve(args.src ?? path.join(import.meta.dirname, '../src'))
const pgUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/wt_qcost_bench'
const file = `/tmp/list-worst-case-${contacts}.sqlite`
const seedFile = kind === 'sqlite' ? `${file}.json` : `/tmp/list-worst-case-${contacts}-pg.json`
const ATTACKER_CONTACTS = 2100

async function seed(): Promise<{ accountId: string; attackStart: string }> {
  if (existsSync(seedFile)) {
    return JSON.parse(readFileSync(seedFile, 'utf8'))
  }
  const plan = { bigContacts: contacts, deepPosition: contacts, smallAccounts: 10, contactsPerSmallAccount: 100 }
  const seeded = kind === 'sqlite' ? await seedSqlite(file, plan) : await seedPostgres(pgUrl, plan)
  const accountId = seeded.big.accountId
  const handle = openDatabase(kind === 'sqlite' ? { kind, path: file, synchronous: 'NORMAL' } : { kind, url: pgUrl })
  const attackStart = new Date().toISOString()
  const writer = createContactService({
    db: handle.db,
    clock: systemClock,
    maxContacts: Number.MAX_SAFE_INTEGER,
    maxTestContacts: 0,
  })
  for (let batch = 0; batch < ATTACKER_CONTACTS; batch += 300) {
    const emails = Array.from(
      { length: Math.min(300, ATTACKER_CONTACTS - batch) },
      (_, i) => `r9-${batch + i}@attacker.test`,
    )
    await writer.applyBatch(
      liveTenant(accountId),
      emails.map((email) => ({ op: 'create', input: { email } })),
    )
  }
  await handle.close()
  if (kind === 'postgres') {
    const client = new pg.Client({ connectionString: pgUrl })
    await client.connect()
    await client.query('vacuum analyze')
    await client.end()
  }
  writeFileSync(seedFile, JSON.stringify({ accountId, attackStart }))
  return { accountId, attackStart }
}

type Rows = Array<{ id: string }> | { rows: Array<{ id: string }>; scannedTo: string | undefined }

const { accountId, attackStart } = await seed()
const { listContactRows } = (await import(path.join(src, 'contacts/contacts.list-query.ts'))) as {
  listContactRows: (db: unknown, accountId: string, options: Record<string, unknown>) => Promise<Rows>
}
const handle = openDatabase(kind === 'sqlite' ? { kind, path: file, synchronous: 'NORMAL' } : { kind, url: pgUrl })
const cases: Array<[string, Record<string, unknown>]> = [
  ['q=r9- (2,100 terms, last in id order)', { q: 'r9-' }],
  ['updated_after=seed time (2,100 changed, last)', { updated_after: attackStart }],
  ['q=mar (common prefix)', { q: 'mar' }],
  ['updated_after=2000 (all)', { updated_after: '2000-01-01T00:00:00Z' }],
  ['q=zzz (no match)', { q: 'zzz' }],
  ['q=r9- with tag=vip', { q: 'r9-', tag: 'vip' }],
  ['no filter', {}],
]
const ms = (started: number) => performance.now() - started
const walkSummary = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]?.toFixed(2)
  const slowest = times
    .map((time, index) => [time, index] as const)
    .sort((a, b) => b[0] - a[0])
    .slice(0, 3)
    .map(([time, index]) => `${time.toFixed(1)}: ${index}`)
  return `${at(0.5)} / ${at(0.9)} / ${at(1)} (${slowest.join(', ')})`
}
const page = async (filters: Record<string, unknown>, afterId?: string) => {
  const result = await listContactRows(handle.db, accountId, { order: 'asc', ...filters, afterId, fetch: 101 })
  return Array.isArray(result) ? { rows: result, scannedTo: undefined } : result
}
console.log(`${kind}, ${contacts} contacts + ${ATTACKER_CONTACTS} r9- contacts, code from ${src}`)
console.log(
  'case | first page median ms | max ms | rows | walk: pages, matches, page median / p90 / max ms (slowest pages: index), total ms',
)
for (const [name, filters] of cases) {
  for (let i = 0; i < 5; i++) {
    await page(filters)
  }
  const times: number[] = []
  let rows = 0
  for (let i = 0; i < 21; i++) {
    const started = performance.now()
    rows = (await page(filters)).rows.length
    times.push(ms(started))
  }
  times.sort((a, b) => a - b)
  let pages = 0
  let matches = 0
  const pageTimes: number[] = []
  const walkStarted = performance.now()
  let afterId: string | undefined
  // The whole walk for the worst cases only (the others walk the account: pages of 100 at 100k is slow to print).
  const walk = name.startsWith('q=r9-') || name.startsWith('updated_after=seed')
  while (walk) {
    const started = performance.now()
    const result = await page(filters, afterId)
    pageTimes.push(ms(started))
    pages++
    const found = result.rows.slice(0, 100)
    matches += found.length
    if (result.rows.length > 100) {
      afterId = found[found.length - 1]?.id
    } else if (result.scannedTo !== undefined) {
      afterId = result.scannedTo
    } else {
      break
    }
  }
  console.log(
    `${name} | ${times[10]?.toFixed(2)} | ${times[20]?.toFixed(2)} | ${rows} | ${
      walk ? `${pages}, ${matches}, ${walkSummary(pageTimes)}, ${ms(walkStarted).toFixed(0)}` : '-'
    }`,
  )
}
await handle.close()
