// The CSV import as a job, through HTTP on every dialect: the upload is stored and answered with a
// redirect to the job's page; the runner checks every row, then writes; the page shows progress,
// then the result or each problem by row, column and value.

import { parse } from 'csv-parse/sync'
import { stringify } from 'csv-stringify/sync'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { multipart, type Part, signUp as signUpClient } from '../../test/web-client.js'
import { liveTenant } from '../accounts/tenant.js'
import type { Contact, ContactInput } from '../contacts/contacts.schemas.js'

interface Session {
  email: string
  accountId: string
  cookie: string
  csrf: string
}

/** A file of `n` valid rows (emails `prefix-i@example.com`). */
const bigCsv = (n: number, prefix: string) =>
  ['email,first_name,tags', ...Array.from({ length: n }, (_, i) => `${prefix}-${i}@example.com,Row ${i},bulk`)].join(
    '\n',
  )

const IMPORTS_PER_HOUR = 40
let users = 0

describe.each(testDialects())('CSV import job on %s', (dialect) => {
  let t: TestHarness
  let bob: Session
  // PostgreSQL (a round trip per statement) and PGlite write a row several times slower than SQLite.
  const rowsForASecond = dialect === 'sqlite' ? 1500 : 300

  async function signUp(name: string): Promise<Session> {
    const email = `${name}-${++users}@example.com`
    const { client, accountId } = await signUpClient(t.app, email, name)
    const page = await client.get(`/app/${accountId}/contacts`)
    expect(page.statusCode).toBe(200)
    return { email, accountId, cookie: client.cookies.get('sid') ?? '', csrf: client.csrf() }
  }

  const get = (s: Session, path: string) =>
    t.app.inject({ method: 'GET', url: `/app/${s.accountId}${path}`, cookies: { sid: s.cookie } })
  const upload = (s: Session, parts: Part[]) =>
    t.app.inject({
      method: 'POST',
      url: `/app/${s.accountId}/contacts/import`,
      cookies: { sid: s.cookie },
      ...multipart(parts),
    })
  const startImport = (s: Session, csv: string | Buffer, filename = 'contacts.csv') =>
    upload(s, [
      { name: '_csrf', value: s.csrf },
      { name: 'file', filename, content: csv },
    ])
  /** Uploads, follows the 303 once the runner is idle, and returns the job's page. */
  async function importCsv(s: Session, csv: string | Buffer) {
    const res = await startImport(s, csv)
    expect(res.statusCode, res.body).toBe(303)
    const location = String(res.headers.location)
    expect(location).toMatch(new RegExp(`^/app/${s.accountId}/contacts/imports/imp_[0-9A-Z]{26}$`))
    await t.deps.imports.drain()
    const page = await t.app.inject({ method: 'GET', url: location, cookies: { sid: s.cookie } })
    expect(page.statusCode).toBe(200)
    expect(page.headers.refresh).toBeUndefined()
    return { location, page }
  }
  const reportRows = (body: string) =>
    [
      ...body.matchAll(
        /<tr><td[^>]*>(\w+)<\/td><td class="mono"[^>]*>([^<]+)<\/td><td class="mono"[^>]*>([^<]*)<\/td><td[^>]*>([^<]+)<\/td><\/tr>/g,
      ),
    ].map((m) => [m[1], m[2], m[3], m[4]])

  const seed = (s: Session, input: ContactInput) => t.deps.contacts.create(liveTenant(s.accountId), input)
  /** Everything an account has stored, to prove a refused import changed nothing. */
  const snapshot = async (s: Session) => ({
    contacts: await t.db
      .selectFrom('contacts')
      .select(['id', 'body'])
      .where('account_id', '=', s.accountId)
      .orderBy('id')
      .execute(),
    tags: await t.db
      .selectFrom('contact_tags')
      .select(['tag', 'contact_id'])
      .where('account_id', '=', s.accountId)
      .orderBy('contact_id')
      .orderBy('tag')
      .execute(),
    events: (await t.db.selectFrom('events').select('id').where('account_id', '=', s.accountId).execute()).length,
  })
  const exportCsv = async (s: Session) => parse((await get(s, '/contacts/export.csv')).body) as string[][]

  beforeAll(async () => {
    // SQLite in a file: the job's worker thread then writes on a connection of its own (import-job.ts).
    t = await createTestHarness({ dialect, sqliteFile: true, env: { IMPORTS_PER_HOUR: String(IMPORTS_PER_HOUR) } })
    bob = await signUp('bob')
  })
  afterAll(() => t.close())

  it('round-trips: export, edit, import updates and creates, each change with its event', async () => {
    const s = await signUp('roundtrip')
    await seed(s, {
      email: 'ada@example.com',
      first_name: 'Ada',
      phone: '+44 1632 960961',
      company: '=HYPERLINK("http://evil.example","click")',
      job_title: 'Line one\nline two, "quoted"',
      tags: ['vip', '@home'],
      custom_fields: { plan: 'pro', seats: 12 },
    })
    await seed(s, { email: 'bob@example.com', first_name: '-1+2', last_name: "'=already" })
    const before = await exportCsv(s)
    const header = before[0] as string[]
    const col = (name: string) => header.indexOf(name)
    const edited = before.map((row) => [...row])
    const adaRow = edited.find((row) => row[col('email')] === 'ada@example.com') as string[]
    adaRow[col('first_name')] = 'Augusta Ada'
    adaRow[col('custom_fields')] = '{"plan":"enterprise"}'
    adaRow[col('id')] = 'con_ignored'
    edited.push(['', 'new@example.com', 'New', '', '', '', '', 'fresh;csv', '', '', ''])
    const eventsBefore = (await snapshot(s)).events

    const { page } = await importCsv(s, stringify(edited))
    expect(page.body).toContain('Import finished: 1 created, 1 updated, 1 unchanged.')

    const key = await t.createKey({ id: s.accountId } as TestAccount)
    const api = await t.app.inject({
      method: 'GET',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}` },
    })
    const contacts = api.json().contacts as Contact[]
    expect(contacts.find((c) => c.email === 'ada@example.com')).toMatchObject({
      first_name: 'Augusta Ada',
      phone: '+441632960961',
      company: '=HYPERLINK("http://evil.example","click")',
      job_title: 'Line one\nline two, "quoted"',
      tags: ['vip', '@home'],
      custom_fields: { plan: 'enterprise' },
    })
    expect(contacts.find((c) => c.email === 'bob@example.com')).toMatchObject({
      first_name: '-1+2',
      last_name: "'=already",
    })
    expect(contacts.find((c) => c.email === 'new@example.com')).toMatchObject({
      first_name: 'New',
      tags: ['fresh', 'csv'],
      custom_fields: {},
    })
    const events = await t.db
      .selectFrom('events')
      .select('type')
      .where('account_id', '=', s.accountId)
      // The feed's order (events/feed-position.ts): on an SQLite file the import's events are made on
      // its worker thread, whose ids need not sort after the main thread's (a test that fakes the
      // clock two minutes ahead leaves the main thread's id clock there).
      .orderBy('tx_id')
      .orderBy('id')
      .execute()
    expect(events.slice(eventsBefore).map((e) => e.type)).toEqual(['contact.updated', 'contact.created'])

    const again = await importCsv(s, stringify(await exportCsv(s)))
    expect(again.page.body).toContain('Import finished: 0 created, 0 updated, 3 unchanged.')
  })

  it('writes a large file in many short transactions, every row once with its event', async () => {
    const s = await signUp('large')
    const { page } = await importCsv(s, bigCsv(300, 'big'))
    expect(page.body).toContain('Import finished: 300 created, 0 updated, 0 unchanged.')
    const after = await snapshot(s)
    expect(after.contacts).toHaveLength(300)
    expect(after.events).toBe(300)
    expect(after.tags).toHaveLength(300)
  })

  it('imports a file stored in several parts whole: every row, every value, in file order', async () => {
    const s = await signUp('parts')
    // 600 rows of about 1 KB: three parts of IMPORT_PART_BYTES (256 KiB), rows cut across them.
    const long = (field: string, i: number) => `${field}${i}`.padEnd(250, String.fromCharCode(97 + (i % 26)))
    const csv = [
      'email,first_name,last_name,company,job_title',
      ...Array.from(
        { length: 600 },
        (_, i) => `part-${i}@example.com,${long('f', i)},${long('l', i)},${long('c', i)},${long('j', i)}`,
      ),
    ].join('\n')
    expect(csv.length).toBeGreaterThan(2 * 256 * 1024)
    const { page } = await importCsv(s, csv)
    expect(page.body).toContain('Import finished: 600 created, 0 updated, 0 unchanged.')
    const exported = await exportCsv(s)
    const header = exported[0] ?? []
    const column = (name: string) => header.indexOf(name)
    const byEmail = new Map(exported.slice(1).map((row) => [row[column('email')], row]))
    for (const i of [0, 1, 250, 251, 599]) {
      const row = byEmail.get(`part-${i}@example.com`)
      expect(row?.[column('first_name')]).toBe(long('f', i))
      expect(row?.[column('job_title')]).toBe(long('j', i))
    }
    expect(byEmail.size).toBe(600)
  })

  it('imports nothing when one row is bad, and names each row, column and value', async () => {
    const s = await signUp('badrows')
    await seed(s, { email: 'ada@example.com', first_name: 'Ada' })
    const before = await snapshot(s)
    const csv = [
      'email,first_name,phone,tags',
      'good@example.com,Good,,',
      'ada@example.com,Changed,,',
      'not-an-email,Bad,,',
      ',No email,,',
      `long@example.com,${'x'.repeat(300)},,`,
      'GOOD@example.com,Twice,,',
      'phone@example.com,Phone,12,',
    ].join('\n')
    const { page } = await importCsv(s, csv)
    expect(page.body).toContain('Nothing was imported: 5 problems found.')
    expect(page.body).toContain('contacts.csv')
    const rows = reportRows(page.body)
    expect(rows).toContainEqual(['4', 'email', 'not-an-email', 'Enter a valid email address, like ada@example.com.'])
    expect(rows).toContainEqual(['5', 'email', '', 'Enter an email: the import matches contacts by email.'])
    expect(rows).toContainEqual([
      '6',
      'first_name',
      `${'x'.repeat(120)}… (300 characters)`,
      'Shorten it to at most 256 characters.',
    ])
    expect(rows).toContainEqual([
      '7',
      'email',
      'GOOD@example.com',
      'Remove one of the rows with this email: row 2 has it too.',
    ])
    expect(rows).toContainEqual([
      '8',
      'phone',
      '12',
      'Enter the number in international format without an extension, like +44 1632 960961.',
    ])
    expect(rows).toHaveLength(5)
    // The form is on the page again, to import the corrected file.
    expect(page.body).toContain('enctype="multipart/form-data"')
    expect(await snapshot(s)).toEqual(before)
  })

  it('keeps the first 200 problems, each cell cut at 120 characters, and counts the rest', async () => {
    const s = await signUp('manyproblems')
    const before = await snapshot(s)
    // 250 rows with a 20,000-character first_name: 250 problems, 5 MB of cells.
    const csv = [
      'email,first_name',
      ...Array.from({ length: 250 }, (_, i) => `many-${i}@example.com,${'y'.repeat(20_000)}`),
    ].join('\n')
    const { location, page } = await importCsv(s, csv)
    expect(page.body).toContain('Nothing was imported: 250 problems found.')
    expect(page.body).toContain('…and 50 more.')
    const rows = reportRows(page.body)
    expect(rows).toHaveLength(200)
    expect(rows[0]).toEqual([
      '2',
      'first_name',
      `${'y'.repeat(120)}… (20000 characters)`,
      'Shorten it to at most 256 characters.',
    ])
    // What the job keeps is the report, not the file: a few hundred bytes a problem.
    const id = location.split('/').pop() as string
    const stored = await t.db
      .selectFrom('contact_imports')
      .select(['error_count', 'errors'])
      .where('account_id', '=', s.accountId)
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    expect(stored.error_count).toBe(250)
    expect(stored.errors?.length).toBeLessThan(200 * 400)
    expect(await snapshot(s)).toEqual(before)
  })

  it('refuses a header row of thousands of columns as a whole, with one problem', async () => {
    const s = await signUp('widefile')
    const { page } = await importCsv(s, `email${',c'.repeat(50_000)}\nw@example.com${','.repeat(50_000)}\n`)
    expect(page.body).toContain('Nothing was imported: 1 problem found.')
    expect(page.body).toContain('The header row has 50,001 columns: a contacts file has at most 11')
    expect(reportRows(page.body)).toHaveLength(1)
  })

  it('imports nothing from a malformed file, an unknown column or a file without email', async () => {
    const s = await signUp('malformed')
    const before = await snapshot(s)
    const cases: Array<[string | Buffer, string]> = [
      ['email,first_name\nok@example.com,Fine\n"broken@example.com,Unclosed\n', 'The file is not valid CSV'],
      ['email,first_name\nok@example.com,Fine,extra\n', 'The file is not valid CSV'],
      ['email,nickname\nok@example.com,Nick\n', 'Rename or remove this column'],
      ['first_name\nNoEmail\n', 'Add an email column'],
      ['email,first_name\n', 'The file has no contacts below its header row.'],
      [Buffer.from([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xff, 0xfe, 0x0a]), 'The file is not UTF-8 text'],
      ['email,custom_fields\nok@example.com,{not json}\n', 'Write the custom fields as a JSON object'],
      ['email,custom_fields\nok@example.com,"{""bad key"":1}"\n', 'Rename the custom field “bad key”'],
      ['email,custom_fields\nok@example.com,"{""n"":1e400}"\n', 'numbers must be finite'],
      ['email,custom_fields\nok@example.com,"{""s"":""\\ud800""}"\n', 'unpaired \\u surrogate escape'],
      ['email,custom_fields\nok@example.com,"{""__proto__"":{""x"":1}}"\n', 'Rename the custom field “__proto__”'],
      ['email,first_name\nok@example.com,"nul\u0000"\n', 'Remove the NUL character'],
    ]
    for (const [csv, message] of cases) {
      const { page } = await importCsv(s, csv)
      expect(page.body, message).toContain(message)
      expect(page.body, message).toContain('Nothing was imported')
    }
    // The NUL is shown as ␀ in the report, never sent in the page (HTML may not hold U+0000).
    const nul = await importCsv(s, 'email,first_name\nok@example.com,"nul\u0000"\n')
    expect(reportRows(nul.page.body)[0]?.slice(0, 3)).toEqual(['2', 'first_name', 'nul\u2400'])
    expect(nul.page.body).not.toContain('\u0000')
    const unknown = await importCsv(s, 'email,nickname\nok@example.com,Nick\n')
    expect(reportRows(unknown.page.body)[0]?.slice(0, 3)).toEqual(['1', 'nickname', 'nickname'])
    expect(await snapshot(s)).toEqual(before)
  })

  it('refuses more than 10,000 rows, a missing file, and a file over 5 MiB', async () => {
    const s = await signUp('limits')
    const before = await snapshot(s)
    const many = ['email', ...Array.from({ length: 10_001 }, (_, i) => `r${i}@example.com`)].join('\n')
    const tooMany = await importCsv(s, many)
    expect(tooMany.page.body).toContain('The file has more than 10,000 contacts')

    const noFile = await upload(s, [{ name: '_csrf', value: s.csrf }])
    expect(noFile.statusCode).toBe(400)
    expect(noFile.body).toContain('Choose a CSV file to import')
    const empty = await startImport(s, '')
    expect(empty.statusCode).toBe(400)

    const large = await startImport(s, Buffer.alloc(5 * 1024 * 1024 + 10, 'a'))
    expect(large.statusCode).toBe(413)
    expect(large.body).toContain('The file is larger than 5 MiB')
    expect(await snapshot(s)).toEqual(before)
  })

  it('refuses an import without the CSRF token before the file: 403 and nothing stored', async () => {
    const s = await signUp('csrf')
    const csv = 'email,first_name\nforged@example.com,Forged\n'
    const missing = await upload(s, [{ name: 'file', filename: 'c.csv', content: csv }])
    const wrong = await upload(s, [
      { name: '_csrf', value: bob.csrf },
      { name: 'file', filename: 'c.csv', content: csv },
    ])
    const late = await upload(s, [
      { name: 'file', filename: 'c.csv', content: csv },
      { name: '_csrf', value: s.csrf },
    ])
    for (const res of [missing, wrong, late]) {
      expect(res.statusCode).toBe(403)
      expect(res.body).toContain('The form expired')
    }
    await t.deps.imports.drain()
    const jobs = await t.db.selectFrom('contact_imports').select('id').where('account_id', '=', s.accountId).execute()
    expect(jobs).toEqual([])
    expect((await snapshot(s)).contacts).toEqual([])
  })

  it('runs one import per account at a time: a second upload is refused with a link to the first', async () => {
    const s = await signUp('one')
    const first = await startImport(s, bigCsv(rowsForASecond, 'one'))
    expect(first.statusCode).toBe(303)
    const firstUrl = String(first.headers.location)
    // The first one is still checking or writing its rows (a second or more on each database).
    const running = await t.app.inject({ method: 'GET', url: firstUrl, cookies: { sid: s.cookie } })
    expect(running.statusCode).toBe(200)
    expect(running.headers.refresh).toBe('2')
    expect(running.body).toMatch(/data-import-state="(queued|validating|writing)"/)

    const second = await startImport(s, 'email\nsecond@example.com\n')
    expect(second.statusCode).toBe(409)
    expect(second.body).toContain('Another import of this account is still running')
    expect(second.body).toContain(`href="${firstUrl}"`)
    // Another account is not held up by it.
    const other = await importCsv(bob, 'email\nbob-own@example.com\n')
    expect(other.page.body).toContain('Import finished: 1 created')

    await t.deps.imports.drain()
    const done = await t.app.inject({ method: 'GET', url: firstUrl, cookies: { sid: s.cookie } })
    expect(done.body).toContain(`Import finished: ${rowsForASecond} created, 0 updated, 0 unchanged.`)
    expect(done.headers.refresh).toBeUndefined()
    const third = await importCsv(s, 'email\nsecond@example.com\n')
    expect(third.page.body).toContain('Import finished: 1 created')
    // The finished jobs keep no file.
    const files = await t.db
      .selectFrom('contact_import_file_parts')
      .select('import_id')
      .where('account_id', '=', s.accountId)
      .execute()
    expect(files).toEqual([])
  })

  it("shows a job only to its own account: another account's import id is 404", async () => {
    const s = await signUp('isolation')
    const { location } = await importCsv(s, 'email\nmine@example.com\n')
    const id = location.split('/').pop() as string
    const asBob = await get(bob, `/contacts/imports/${id}`)
    expect(asBob.statusCode).toBe(404)
    expect(asBob.body).not.toContain('mine@example.com')
    const unknown = await get(s, '/contacts/imports/imp_00000000000000000000000000')
    expect(unknown.statusCode).toBe(404)
  })

  it(`counts imports against the hourly budget (${IMPORTS_PER_HOUR} per account)`, async () => {
    const s = await signUp('budget')
    for (let i = 0; i < IMPORTS_PER_HOUR; i++) {
      await importCsv(s, `email\nb${i}@example.com\n`)
    }
    const refused = await startImport(s, 'email\nover@example.com\n')
    expect(refused.statusCode).toBe(429)
    expect(refused.body).toContain(`started ${IMPORTS_PER_HOUR} imports in the last hour`)
    // Another account has its own budget.
    expect((await startImport(bob, 'email\nbob-budget@example.com\n')).statusCode).toBe(303)
    await t.deps.imports.drain()
  })

  it('shows the import form with the token before the file input', async () => {
    const res = await get(bob, '/contacts/import')
    expect(res.statusCode).toBe(200)
    expect(res.body).toContain('enctype="multipart/form-data"')
    const token = res.body.indexOf('name="_csrf"', res.body.indexOf('/contacts/import"'))
    expect(token).toBeGreaterThan(0)
    expect(token).toBeLessThan(res.body.indexOf('type="file"'))
  })
})

describe.each(testDialects())('CSV import within MAX_CONTACTS_PER_ACCOUNT on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect, sqliteFile: true, env: { MAX_CONTACTS_PER_ACCOUNT: '5' } })
  })
  afterAll(() => t.close())

  it('imports nothing when the file would pass the quota; updates still count as none', async () => {
    const { client, accountId } = await signUpClient(t.app, `quota-${++users}@example.com`, 'Quota')
    const send = async (csv: string) => {
      const res = await client.uploadCsv(accountId, csv, 'q.csv')
      expect(res.statusCode).toBe(303)
      await t.deps.imports.drain()
      return (await client.get(String(res.headers.location))).body
    }
    const rows = (from: number, to: number) =>
      ['email', ...Array.from({ length: to - from }, (_, i) => `q${from + i}@example.com`)].join('\n')
    expect(await send(rows(0, 4))).toContain('Import finished: 4 created')
    const over = await send(rows(0, 6))
    expect(over).toContain('the file would create 2 contacts, and the account has 4 of its limit of 5')
    const count = await t.db.selectFrom('contacts').select('id').where('account_id', '=', accountId).execute()
    expect(count).toHaveLength(4)
    // 4 updates and 1 new contact: exactly at the limit.
    expect(await send(rows(0, 5))).toContain('Import finished: 1 created, 0 updated, 4 unchanged.')
    // Above the limit (lowered by the operator after the fact): a file of updates only still imports.
    // The count says 10 more than there are: 15 of 5, as an account passed by concurrent creates.
    await sql`update contact_counts set n = n + 10 where account_id = ${accountId} and shard = (
      select min(shard) from contact_counts where account_id = ${accountId})`.execute(t.db)
    expect(await send(rows(0, 5))).toContain('Import finished: 0 created, 0 updated, 5 unchanged.')
    expect(await send(rows(5, 6))).toContain(
      'the file would create 1 contact, and the account has 15 of its limit of 5',
    )
  })
})
