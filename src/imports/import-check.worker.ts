// The CSV import's check on a thread of its own (started by import-check.ts): decodes, parses and
// checks each file it is sent, reports progress and the verdict, then, when the file is good, keeps
// the checked rows and hands them out a range at a time while the job writes them, until released.
// The parse's allocations (every record as strings, every row: tens of MB for 10,000 rows) and their
// garbage collection stay on this thread's heap, off the event loop that serves requests.
import { parentPort } from 'node:worker_threads'
import { type ImportRow, parseContactsCsv } from '../contacts/contacts.csv-import.js'
import type { CheckReply, CheckRequest } from './import-check.js'

const port = parentPort
if (!port) {
  throw new Error('import-check.worker.ts runs as a worker thread (src/imports/import-check.ts)')
}
const send = (message: CheckReply) => port.postMessage(message)
const checkedRows = new Map<number, ImportRow[]>()
const released = new Set<number>()

async function check(job: number, file: Uint8Array): Promise<void> {
  const parsed = await parseContactsCsv(
    file,
    async (checked, total) => send({ type: 'progress', job, checked, total }),
    // This thread serves nothing else meanwhile: no need to yield between slices.
    async () => {},
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

port.on('message', (request: CheckRequest) => {
  switch (request.type) {
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
