// The CSV import's check on a thread of its own (started by import-check.ts): decodes, parses and
// checks each file it is sent, reports progress and the verdict, then, when the file is good, keeps
// the checked rows and hands them out a range at a time while the job writes them, until released.
// The parse's allocations (every record as strings, every row: tens of MB for 10,000 rows) and their
// garbage collection stay on this thread's heap, off the event loop that serves requests.
//
// On an SQLite file the job goes further (import-job.ts): this thread reads the upload, counts the
// contacts it would create and writes the rows, on a connection of its own, so the writes' CPU,
// their commits' WAL checkpoints and their garbage are not the event loop's either. SQLite's write
// lock is still one: the main connection's write transactions wait for a slice's commit
// (busy_timeout), and begin IMMEDIATE so that one never fails on it (db/database.ts).
import { readlinkSync } from 'node:fs'
import { setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import { type ContactService, createContactService } from '../contacts/contact-service.js'
import { readExportPage } from '../contacts/contacts.csv-export.js'
import { type ImportRow, parseContactsCsv, sliceYielder } from '../contacts/contacts.csv-import.js'
import { countNewEmails } from '../contacts/contacts.store.js'
import { type DatabaseHandle, openDatabase } from '../db/database.js'
import { systemClock } from '../lib/clock.js'
import type { CheckReply, CheckRequest, StoredFile, WorkerOptions, WorkerSlice } from './import-check.js'
import { writeSlice } from './import-slice.js'
import { readImportFile } from './imports.store.js'

const port = parentPort
if (!port) {
  throw new Error('import-check.worker.ts runs as a worker thread (src/imports/import-check.ts)')
}
const send = (message: CheckReply) => port.postMessage(message)

// Background work: on Linux a thread has its own nice value, so this one yields a shared core to
// the event loop that serves requests (setpriority on the thread's id).
try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').at(-1))
  setPriority(tid, 10)
} catch {}
const checkedRows = new Map<number, ImportRow[]>()
const released = new Set<number>()

async function check(job: number, file: Uint8Array | StoredFile): Promise<void> {
  const bytes =
    file instanceof Uint8Array
      ? file
      : ((await readImportFile(database(), file.accountId, file.importId)) ?? new Uint8Array())
  const parsed = await parseContactsCsv(
    bytes,
    async (checked, total) => send({ type: 'progress', job, checked, total }),
    // Every few ms, the thread's other requests: another job's write slice, an export's page.
    sliceYielder(),
  )
  if (released.delete(job)) {
    return
  }
  if (parsed.ok) {
    checkedRows.set(job, parsed.rows)
    send({ type: 'checked', job, total: parsed.rows.length })
  } else {
    send({ type: 'failed', job, errors: parsed.errors, count: parsed.count })
  }
}

const { database: sqliteFile } = workerData as WorkerOptions
/** This thread's connection to the SQLite file, opened at its first use; it ends with the thread. */
let connection: { handle: DatabaseHandle; contacts: ContactService } | undefined

function onOwnConnection(): { handle: DatabaseHandle; contacts: ContactService } {
  if (!sqliteFile) {
    throw new Error('the import worker has no SQLite file to connect to (import-check.ts ownConnection)')
  }
  if (!connection) {
    const handle = openDatabase(sqliteFile)
    // An import slice counts no quota (the job checked it first) and stamps its own time.
    connection = { handle, contacts: createContactService({ db: handle.db, clock: systemClock, maxContacts: 0 }) }
  }
  return connection
}
const database = () => onOwnConnection().handle.db

/**
 * Contacts per export page read here: ten times the serving thread's own pages, which bound how long
 * a read holds the event loop; here a page costs the event loop only the passing on of its text.
 */
const EXPORT_PAGE_ROWS = 500

/** A checked file's rows; a job whose rows are gone (released) must not write "nothing" as progress. */
function heldRows(job: number): ImportRow[] {
  const rows = checkedRows.get(job)
  if (!rows) {
    throw new Error(`the import worker holds no checked rows for job ${job}`)
  }
  return rows
}

/** Runs a request on this thread's connection; its failure goes back as `unwritten`. */
async function onConnection(job: number, id: number, work: () => Promise<CheckReply>): Promise<void> {
  try {
    send(await work())
  } catch (error) {
    const code = (error as { code?: unknown }).code
    send({ type: 'unwritten', job, id, message: String(error), code: typeof code === 'string' ? code : undefined })
  }
}

const write = (job: number, id: number, { to, ...slice }: WorkerSlice) =>
  onConnection(job, id, async () => {
    const rows = heldRows(job).slice(slice.from, to)
    return { type: 'written', job, id, result: await writeSlice(onOwnConnection().contacts, { ...slice, rows }) }
  })

// Every row at once: countNewEmails looks them up 500 a query, and this thread serves no request.
const countNew = (job: number, id: number, accountId: string) =>
  onConnection(job, id, async () => ({
    type: 'counted',
    job,
    id,
    created: await countNewEmails(
      database(),
      accountId,
      heldRows(job).map((row) => row.email),
    ),
  }))

port.on('message', (request: CheckRequest) => {
  switch (request.type) {
    case 'write':
      void write(request.job, request.id, request.slice)
      break
    case 'export-page':
      void onConnection(request.job, request.id, async () => ({
        type: 'export-page',
        job: request.job,
        id: request.id,
        page: await readExportPage(database(), request.accountId, request.afterId, EXPORT_PAGE_ROWS),
      }))
      break
    case 'count-new':
      void countNew(request.job, request.id, request.accountId)
      break
    case 'check':
      check(request.job, request.file).catch((error: unknown) =>
        send({ type: 'crashed', job: request.job, message: String(error) }),
      )
      break
    case 'release':
      if (!checkedRows.delete(request.job)) {
        // Still being checked: dropped when its check ends.
        released.add(request.job)
      }
      break
    default: {
      const slice = checkedRows.get(request.job)?.slice(request.from, request.to) ?? []
      send(
        request.type === 'rows'
          ? { type: 'rows', job: request.job, id: request.id, rows: slice }
          : { type: 'emails', job: request.job, id: request.id, emails: slice.map((row) => row.email) },
      )
    }
  }
})
