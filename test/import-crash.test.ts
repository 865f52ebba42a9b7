// A CSV import killed mid-write (kill -9 of a real `serve` process) is resumed after the restart
// and ends with *everything* written, every row exactly once with exactly one event: the job's
// progress moves in the same transaction as each chunk of rows (src/imports/import-job.ts).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createThrowawaySchema } from './harness.js'
import { freePort, type ServerProcess, startServerProcess } from './processes.js'
import { httpSignUp } from './web-client.js'

const ROWS = 2000
const dialects = (['sqlite', 'postgres'] as const).filter((d) => testDialects().includes(d))

const written = (body: string) => Number(/data-rows-written>(\d+)</.exec(body)?.[1] ?? -1)

describe.each(dialects)('CSV import killed mid-write on %s', (dialect) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-import-crash-'))
  let env: Record<string, string>
  let server: ServerProcess | undefined
  let dropSchema: (() => Promise<void>) | undefined
  let query: (text: string, values: unknown[]) => Promise<Array<Record<string, unknown>>>
  let closeQuery: () => Promise<void> = async () => {}

  beforeAll(async () => {
    env = {
      PORT: String(await freePort()),
      LOG_LEVEL: 'warn',
      SECRET: 'import-crash-secret-0123456789abcdef0123456789',
      // A killed process's job is resumed once its lease runs out: shortened from 15 s.
      IMPORT_LEASE_MS: '1000',
    }
    if (dialect === 'sqlite') {
      const file = path.join(dir, 'contacts.sqlite')
      env.DATABASE_URL = `sqlite:${file}`
      query = async (text, values) => {
        const db = new SQLite(file, { readonly: true })
        try {
          return db.prepare(text.replace(/\$\d+/g, '?')).all(...values) as Array<Record<string, unknown>>
        } finally {
          db.close()
        }
      }
    } else {
      const schema = await createThrowawaySchema('import_crash')
      dropSchema = schema.drop
      Object.assign(env, schema.env)
      const client = new pg.Client({ connectionString: schema.database.url })
      await client.connect()
      query = async (text, values) => (await client.query(text, values)).rows
      closeQuery = () => client.end()
    }
    server = await startServerProcess(env)
  })

  afterAll(async () => {
    await server?.stop('SIGKILL')
    await closeQuery()
    await dropSchema?.()
    rmSync(dir, { recursive: true, force: true })
  })

  it('resumes after the restart and writes every row once, with one event each', async () => {
    const base = `http://127.0.0.1:${env.PORT}`
    const { web, accountId } = await httpSignUp(base, 'crash@example.com', 'Crash')
    await web.get(`/app/${accountId}/contacts/import`)
    const csv = ['email,first_name,tags', ...Array.from({ length: ROWS }, (_, i) => `c${i}@example.com,C ${i},crash`)]
    const started = await web.upload(`/app/${accountId}/contacts/import`, 'crash.csv', csv.join('\n'))
    expect(started.status).toBe(303)
    const job = started.location ?? ''

    // Kill as soon as some chunks are written and others are not.
    let page = await web.get(job)
    const deadline = Date.now() + 60_000
    while (written(page.body) <= 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      page = await web.get(job)
    }
    await server?.stop('SIGKILL')
    server = undefined
    const [atKill] = await query('select state, rows_written from contact_imports where account_id = $1', [accountId])
    const contactsAtKill = await query('select id from contacts where account_id = $1', [accountId])
    const eventsAtKill = await query('select id from events where account_id = $1', [accountId])
    expect(atKill?.state).toBe('writing')
    const rowsAtKill = Number(atKill?.rows_written)
    expect(rowsAtKill).toBeGreaterThan(0)
    expect(rowsAtKill).toBeLessThan(ROWS)
    // What is there is exactly the chunks the job counted, each contact with its event.
    expect(contactsAtKill).toHaveLength(rowsAtKill)
    expect(eventsAtKill).toHaveLength(rowsAtKill)

    server = await startServerProcess(env)
    const resumedBy = Date.now() + 120_000
    do {
      await new Promise((resolve) => setTimeout(resolve, 100))
      page = await web.get(job)
    } while (page.refresh && Date.now() < resumedBy)
    expect(page.body).toContain(`Import finished: ${ROWS} created, 0 updated, 0 unchanged.`)

    const contacts = await query('select email_lower from contacts where account_id = $1', [accountId])
    expect(new Set(contacts.map((c) => c.email_lower))).toEqual(new Set(csv.slice(1).map((line) => line.split(',')[0])))
    const events = await query('select type, count(*) as n from events where account_id = $1 group by type', [
      accountId,
    ])
    expect(events.map((e) => [e.type, Number(e.n)])).toEqual([['contact.created', ROWS]])
    if (dialect === 'sqlite') {
      expect(await query('pragma integrity_check', [])).toEqual([{ integrity_check: 'ok' }])
    }
  }, 240_000)
})
