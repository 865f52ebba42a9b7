// The request log's storage (docs/request-log.md#how-entries-are-stored): a tenant's entries in
// chunks, one row per batch, within the daily cap; the list (newest first, merged across chunks
// that overlap in time, a bounded scan when filtered), one entry by its Request-Id, the purge.
import { tenantById } from '../accounts/tenant.js'
import { PURGE_BATCH } from '../db/retention.js'
import type { Db, Trx } from '../db/transaction.js'
import type { PageRow, ScannedRows } from '../http/pagination.js'
import { firstIdAt, idPattern, timeOfId } from '../lib/ids.js'
import { byId, type RequestLog, type RequestLogFilters, type StoredEntry, toRequestLog } from './request-log.js'
import { CHUNK_SPAN_MS, decodeChunk, oldestOf, type StoredChunk } from './request-log-chunk.js'

/** Past an entry of this id, in the order of ids: `id < after(x)` is `id <= x`. */
const justAfter = (id: string): string => `${id}~`

/**
 * Counts `received` requests of a tenant's day and stores as many of the entries of `chunks` (all
 * of that day, the oldest first) as the day's cap leaves room for; returns how many it stored. The
 * count is taken first, in the same transaction, so instances writing at once never store more than
 * the cap between them.
 */
export async function storeRequestLogs(
  trx: Trx,
  accountId: string,
  day: string,
  chunks: readonly StoredChunk[],
  received: number,
  maxPerDay: number,
): Promise<number> {
  const counted = await trx
    .insertInto('request_log_days')
    .values({ account_id: accountId, day, received })
    .onConflict((conflict) =>
      conflict
        .columns(['account_id', 'day'])
        .doUpdateSet((eb) => ({ received: eb('request_log_days.received', '+', eb.ref('excluded.received')) })),
    )
    .returning('received')
    .executeTakeFirstOrThrow()
  const total = Number(counted.received)
  let room = Math.max(0, maxPerDay - (total - received))
  const rows = []
  for (const chunk of chunks) {
    if (room === 0) {
      break
    }
    const stored = chunk.size <= room ? chunk : oldestOf(chunk, room)
    room -= stored.size
    rows.push({
      account_id: accountId,
      last_id: stored.lastId,
      first_id: stored.firstId,
      entry_count: stored.size,
      entries: stored.text,
    })
  }
  if (rows.length > 0) {
    await trx.insertInto('request_log_chunks').values(rows).execute()
  }
  return rows.reduce((sum, row) => sum + row.entry_count, 0)
}

/**
 * The most entries a filtered page examines: past them the page ends where the scan stopped, with
 * a cursor that goes on (docs/pagination.md), so a rare filter never reads a day of a busy account.
 */
export const REQUEST_LOG_SCAN_MAX = 10_000

/** Chunks read per query while a page is merged. */
const CHUNKS_PER_READ = 20

/** Whether an entry passes the list's filters other than time (those bound the ids read). */
function matcher(filters: RequestLogFilters): (entry: StoredEntry) => boolean {
  const { status, key_id: keyId, method, path } = filters
  const low = status === undefined ? 0 : status.endsWith('xx') ? Number(status[0]) * 100 : Number(status)
  const high = status === undefined ? 1000 : status.endsWith('xx') ? low + 100 : low + 1
  return (entry) =>
    entry[5] >= low &&
    entry[5] < high &&
    (keyId === undefined || entry[1] === keyId) &&
    (method === undefined || entry[2] === method) &&
    (path === undefined || entry[3].startsWith(path))
}

/**
 * A page of the tenant's log, newest first, serialized for sendPage. Chunks are read newest first
 * by their newest id; an entry is final once no chunk left to read can hold a newer one (every
 * chunk left has an older newest id), since chunks written by several instances overlap in time.
 */
export async function listRequestLogRows(
  db: Db,
  accountId: string,
  options: RequestLogFilters & { afterId: string | undefined; fetch: number },
): Promise<ScannedRows> {
  let upper = options.afterId
  if (options.created_before !== undefined) {
    const before = firstIdAt('request', Date.parse(options.created_before))
    upper = upper === undefined || before < upper ? before : upper
  }
  const lower =
    options.created_after === undefined ? undefined : firstIdAt('request', Date.parse(options.created_after) + 1)
  const matches = matcher(options)
  const livemode = tenantById(accountId).livemode
  const found: StoredEntry[] = []
  let examined = 0
  // Chunks whose newest id is below this are still to read.
  let below = upper === undefined ? undefined : firstIdAt('request', timeOfId(upper) + CHUNK_SPAN_MS)
  for (;;) {
    let query = db
      .selectFrom('request_log_chunks')
      .select(['last_id', 'entries'])
      .where('account_id', '=', accountId)
      .orderBy('last_id', 'desc')
      .limit(CHUNKS_PER_READ)
    if (below !== undefined) {
      query = query.where('last_id', '<', below)
    }
    if (upper !== undefined) {
      query = query.where('first_id', '<', upper)
    }
    if (lower !== undefined) {
      query = query.where('last_id', '>=', lower)
    }
    const chunks = await query.execute()
    for (const chunk of chunks) {
      // Every entry newer than this chunk's newest has been read: the page may end here.
      const settled = found.filter((entry) => entry[0] > chunk.last_id)
      if (settled.length >= options.fetch) {
        return pageOf(livemode, found, options.fetch, undefined)
      }
      if (examined >= REQUEST_LOG_SCAN_MAX) {
        return pageOf(livemode, settled, options.fetch, justAfter(chunk.last_id))
      }
      for (const entry of decodeChunk(chunk.entries)) {
        const id = entry[0]
        if ((upper === undefined || id < upper) && (lower === undefined || id >= lower)) {
          examined++
          if (matches(entry)) {
            found.push(entry)
          }
        }
      }
      below = chunk.last_id
    }
    if (chunks.length < CHUNKS_PER_READ) {
      return pageOf(livemode, found, options.fetch, undefined)
    }
  }
}

/** The newest `fetch` entries found; with `scannedTo`, the scan stopped there and goes on below it. */
function pageOf(livemode: boolean, found: StoredEntry[], fetch: number, scannedTo: string | undefined): ScannedRows {
  found.sort(byId).reverse()
  const rows: PageRow[] = found
    .slice(0, fetch)
    .map((entry) => ({ id: entry[0], body: JSON.stringify(toRequestLog(livemode, entry)) }))
  return { rows, scannedTo: rows.length < fetch ? scannedTo : undefined }
}

const REQUEST_ID = new RegExp(idPattern('request'))

/** One entry of the tenant's log by its Request-Id; undefined for any other id, well-formed or not. */
export async function findRequestLog(db: Db, accountId: string, id: string): Promise<RequestLog | undefined> {
  if (!REQUEST_ID.test(id)) {
    return undefined
  }
  const chunks = await db
    .selectFrom('request_log_chunks')
    .select('entries')
    .where('account_id', '=', accountId)
    .where('last_id', '>=', id)
    .where('last_id', '<', firstIdAt('request', timeOfId(id) + CHUNK_SPAN_MS))
    .where('first_id', '<=', id)
    .execute()
  for (const chunk of chunks) {
    const entry = decodeChunk(chunk.entries).find((candidate) => candidate[0] === id)
    if (entry) {
      return toRequestLog(tenantById(accountId).livemode, entry)
    }
  }
  return undefined
}

/**
 * Deletes the chunks whose newest entry is older than the retention, tenant by tenant and in
 * batches, so each statement walks one tenant's key range. The tenants with old entries are those
 * with a day count on or before the cutoff's day. Returns how many chunks it deleted.
 */
export async function purgeExpiredRequestLogs(
  db: Db,
  now: Date,
  retentionDays: number,
  batch = PURGE_BATCH,
): Promise<number> {
  const cutoff = now.getTime() - retentionDays * 86_400_000
  const cutoffDay = new Date(cutoff).toISOString().slice(0, 10)
  const below = firstIdAt('request', cutoff)
  const tenants = await db
    .selectFrom('request_log_days')
    .select('account_id')
    .distinct()
    .where('day', '<=', cutoffDay)
    .execute()
  let purged = 0
  for (const { account_id: accountId } of tenants) {
    for (;;) {
      const result = await db
        .deleteFrom('request_log_chunks')
        .where('account_id', '=', accountId)
        .where('last_id', 'in', (eb) =>
          eb
            .selectFrom('request_log_chunks')
            .select('last_id')
            .where('account_id', '=', accountId)
            .where('last_id', '<', below)
            .orderBy('last_id')
            .limit(batch),
        )
        .executeTakeFirst()
      const deleted = Number(result.numDeletedRows)
      purged += deleted
      if (deleted < batch) {
        break
      }
    }
    await db.deleteFrom('request_log_days').where('account_id', '=', accountId).where('day', '<', cutoffDay).execute()
  }
  return purged
}
