// The CSV import's worker thread (started by import-check.ts): answers each WorkerCall once. It
// parses and checks a file and keeps its rows while the job writes them; on an SQLite file it also
// reads uploads, counts new emails, writes rows and reads export pages on a connection of its own.
// SQLite's write lock is still one: the serving connection's writes wait for a slice's commit.
import { readlinkSync } from 'node:fs'
import { setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import { type ContactService, createContactService } from '../contacts/contact-service.js'
import { readExportPage } from '../contacts/contacts.csv-export.js'
import { countNewEmails } from '../contacts/contacts.store.js'
import { type DatabaseHandle, openDatabase } from '../db/database.js'
import { systemClock } from '../lib/clock.js'
import type { WorkerCall, WorkerCalls, WorkerOptions, WorkerReply } from './import-check.js'
import { type ImportRow, parseContactsCsv, sliceYielder } from './import-csv.js'
import { writeSlice } from './import-slice.js'
import { readImportFile } from './imports.store.js'

const port = parentPort
if (!port) {
  throw new Error('import-check.worker.ts runs as a worker thread (src/imports/import-check.ts)')
}
const reply = (message: WorkerReply) => port.postMessage(message)

// Background work: on Linux a thread has its own nice value, so this one yields a shared core to
// the event loop that serves requests.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').at(-1)), 10)
} catch {}

const checkedRows = new Map<number, ImportRow[]>()
/** Jobs released while their check still ran: their rows are dropped when it ends. */
const released = new Set<number>()

const { database: sqliteFile } = workerData as WorkerOptions
/** This thread's connection to the SQLite file, opened at its first use; it ends with the thread. */
let connection: { handle: DatabaseHandle; contacts: ContactService } | undefined

function ownConnection(): { handle: DatabaseHandle; contacts: ContactService } {
  if (!sqliteFile) {
    throw new Error('the import worker has no SQLite file to connect to (import-check.ts ownConnection)')
  }
  if (!connection) {
    const handle = openDatabase(sqliteFile)
    // An import slice checks no quota (the job did, first) and stamps its own time.
    connection = {
      handle,
      contacts: createContactService({ db: handle.db, clock: systemClock, maxContacts: 0, maxTestContacts: 0 }),
    }
  }
  return connection
}

/** A checked file's rows; a job whose rows are gone (released) must not write "nothing" as progress. */
function heldRows(job: number): ImportRow[] {
  const rows = checkedRows.get(job)
  if (!rows) {
    throw new Error(`the import worker holds no checked rows for job ${job}`)
  }
  return rows
}

/** Contacts per export page read here; a page costs the event loop only the passing on of its text. */
const EXPORT_PAGE_ROWS = 500

type Handlers = { [Name in keyof WorkerCalls]: (id: number, ...args: Parameters<WorkerCalls[Name]>) => unknown }

const handlers: Handlers = {
  async check(id, job, file) {
    const bytes =
      file instanceof Uint8Array
        ? file
        : ((await readImportFile(ownConnection().handle.db, file.accountId, file.importId)) ?? new Uint8Array())
    const parsed = await parseContactsCsv(
      bytes,
      async (checked, total) => reply({ id, progress: { checked, total } }),
      // Every few ms, the thread's other calls: another job's write slice, an export's page.
      sliceYielder(),
    )
    if (released.delete(job)) {
      return { ok: false, errors: [], count: 0 }
    }
    if (!parsed.ok) {
      return { ok: false, errors: parsed.errors, count: parsed.count }
    }
    checkedRows.set(job, parsed.rows)
    return { ok: true, total: parsed.rows.length }
  },
  rows: (_, job, from, to) => checkedRows.get(job)?.slice(from, to) ?? [],
  emails: (_, job, from, to) => (checkedRows.get(job)?.slice(from, to) ?? []).map((row) => row.email),
  // Every row at once: countNewEmails looks them up a chunk a query, and this thread serves no request.
  countNew: (_, job, accountId) =>
    countNewEmails(
      ownConnection().handle.db,
      accountId,
      heldRows(job).map((row) => row.email),
    ),
  write: (_, job, { to, ...slice }) =>
    writeSlice(ownConnection().contacts, { ...slice, rows: heldRows(job).slice(slice.from, to) }),
  exportPage: (_, accountId, afterId) =>
    readExportPage(ownConnection().handle.db, accountId, afterId, EXPORT_PAGE_ROWS),
  release(_, job) {
    if (!checkedRows.delete(job)) {
      released.add(job)
    }
  },
}

port.on('message', async ({ id, name, args }: WorkerCall) => {
  try {
    const handler = handlers[name] as (id: number, ...args: unknown[]) => unknown
    const result = await handler(id, ...args)
    if (name !== 'release') {
      reply({ id, result })
    }
  } catch (error) {
    const code = (error as { code?: unknown }).code
    reply({ id, error: { message: String(error), code: typeof code === 'string' ? code : undefined } })
  }
})
