// A chunk of one tenant's request log, as the writer builds it and the table stores it
// (docs/request-log.md#how-entries-are-stored). An entry is copied into the open chunk's columns
// when it is recorded, its id as numbers, so nothing of a request outlives it until the write: held
// strings and entries would be moved by every young-generation collection, then promoted.
import { idOfParts, timeOfId, ULID_PARTS, writeUlidParts } from '../lib/ids.js'
import { byId, type StoredEntry } from './request-log.js'

/**
 * No two entries of a chunk are further apart in time than this, so the chunks that may hold an
 * id are found by their newest id alone: a chunk holding `id` has its newest id in
 * [id, id + CHUNK_SPAN_MS). A request slower than this is stored in a chunk of its own.
 */
export const CHUNK_SPAN_MS = 60_000

/** The most entries in one chunk. */
export const CHUNK_ENTRIES_MAX = 500

const DAY_MS = 86_400_000

/** The UTC day of an entry's time, as days since 1970. */
export const dayOfTime = (ms: number): number => Math.floor(ms / DAY_MS)

/** An entry's fields held as indexes into the chunk's strings (key, method, path, route, error, IP, agent). */
const TEXT_FIELDS = [1, 2, 3, 4, 7, 8, 9] as const
const NO_TEXT = 0xffff

/** Entries a new chunk has room for: doubled as it fills, so a quiet account's chunk stays small. */
const FIRST_CAPACITY = 16

/** A chunk being filled: its entries in the order they were recorded, not sorted. */
export interface OpenChunk {
  readonly day: number
  size: number
  /** Where the entries with the oldest and the newest id are. */
  firstAt: number
  lastAt: number
  firstTime: number
  lastTime: number
  /** Each entry's id, as ULID_PARTS numbers. */
  idParts: Float64Array
  texts: Uint16Array
  statuses: Uint16Array
  durations: Float64Array
  replayed: Uint8Array
  /** Entry index → Idempotency-Key; most requests have none. */
  idempotencyKeys: Map<number, string> | undefined
  readonly strings: string[]
  readonly indexes: Map<string, number>
}

/** A chunk as the table stores it (request-logs.table.ts). */
export interface StoredChunk {
  readonly day: number
  readonly firstId: string
  readonly lastId: string
  readonly size: number
  /** `[strings, entries]`: each entry a StoredEntry whose text fields are indexes into `strings`. */
  readonly text: string
}

export function openChunk(time: number): OpenChunk {
  return {
    day: dayOfTime(time),
    size: 0,
    firstAt: 0,
    lastAt: 0,
    firstTime: time,
    lastTime: time,
    idParts: new Float64Array(FIRST_CAPACITY * ULID_PARTS),
    texts: new Uint16Array(FIRST_CAPACITY * TEXT_FIELDS.length),
    statuses: new Uint16Array(FIRST_CAPACITY),
    durations: new Float64Array(FIRST_CAPACITY),
    replayed: new Uint8Array(FIRST_CAPACITY),
    idempotencyKeys: undefined,
    strings: [],
    indexes: new Map(),
  }
}

/**
 * Adds an entry made at `time` (its id's); false, and nothing added, when it does not belong here:
 * the chunk is full, or the entry is of another UTC day or would stretch the chunk to CHUNK_SPAN_MS.
 */
export function addToChunk(chunk: OpenChunk, entry: StoredEntry, time: number): boolean {
  const first = Math.min(chunk.firstTime, time)
  const last = Math.max(chunk.lastTime, time)
  if (chunk.size === CHUNK_ENTRIES_MAX || dayOfTime(time) !== chunk.day || last - first >= CHUNK_SPAN_MS) {
    return false
  }
  const at = chunk.size
  if (at === chunk.statuses.length) {
    grow(chunk)
  }
  writeUlidParts(entry[0], chunk.idParts, at * ULID_PARTS)
  if (at === 0 || idBefore(chunk.idParts, at, chunk.firstAt)) {
    chunk.firstAt = at
  }
  if (at === 0 || idBefore(chunk.idParts, chunk.lastAt, at)) {
    chunk.lastAt = at
  }
  chunk.firstTime = first
  chunk.lastTime = last
  for (let field = 0; field < TEXT_FIELDS.length; field++) {
    const text = entry[TEXT_FIELDS[field] as number] as string | null
    chunk.texts[at * TEXT_FIELDS.length + field] = text === null ? NO_TEXT : indexOf(chunk, text)
  }
  chunk.statuses[at] = entry[5]
  chunk.durations[at] = entry[6]
  chunk.replayed[at] = entry[11]
  if (entry[10] !== null) {
    chunk.idempotencyKeys ??= new Map()
    chunk.idempotencyKeys.set(at, entry[10])
  }
  chunk.size = at + 1
  return true
}

function grow(chunk: OpenChunk): void {
  const capacity = Math.min(2 * chunk.statuses.length, CHUNK_ENTRIES_MAX)
  const larger = <T extends Uint8Array | Uint16Array | Float64Array>(
    array: T,
    make: (length: number) => T,
    width = 1,
  ) => {
    const next = make(capacity * width)
    next.set(array)
    return next
  }
  chunk.idParts = larger(chunk.idParts, (n) => new Float64Array(n), ULID_PARTS)
  chunk.texts = larger(chunk.texts, (n) => new Uint16Array(n), TEXT_FIELDS.length)
  chunk.statuses = larger(chunk.statuses, (n) => new Uint16Array(n))
  chunk.durations = larger(chunk.durations, (n) => new Float64Array(n))
  chunk.replayed = larger(chunk.replayed, (n) => new Uint8Array(n))
}

/** Whether the entry at `a` has an older id than the one at `b`: ULIDs sort as their numbers do. */
function idBefore(parts: Float64Array, a: number, b: number): boolean {
  for (let part = 0; part < ULID_PARTS; part++) {
    const x = parts[a * ULID_PARTS + part] as number
    const y = parts[b * ULID_PARTS + part] as number
    if (x !== y) {
      return x < y
    }
  }
  return false
}

const idAt = (chunk: OpenChunk, at: number): string => idOfParts('request', chunk.idParts, at * ULID_PARTS)

function indexOf(chunk: OpenChunk, text: string): number {
  let index = chunk.indexes.get(text)
  if (index === undefined) {
    index = chunk.strings.push(text) - 1
    chunk.indexes.set(text, index)
  }
  return index
}

/** The chunk's row: its entries' repeated strings stored once, so the row is about half their JSON. */
export function closeChunk(chunk: OpenChunk): StoredChunk {
  const entries: Array<(string | number | null)[]> = new Array(chunk.size)
  for (let at = 0; at < chunk.size; at++) {
    entries[at] = [
      idAt(chunk, at),
      textAt(chunk, at, 0),
      textAt(chunk, at, 1),
      textAt(chunk, at, 2),
      textAt(chunk, at, 3),
      chunk.statuses[at] as number,
      chunk.durations[at] as number,
      textAt(chunk, at, 4),
      textAt(chunk, at, 5),
      textAt(chunk, at, 6),
      chunk.idempotencyKeys?.get(at) ?? null,
      chunk.replayed[at] as number,
    ]
  }
  return {
    day: chunk.day,
    firstId: idAt(chunk, chunk.firstAt),
    lastId: idAt(chunk, chunk.lastAt),
    size: chunk.size,
    text: JSON.stringify([chunk.strings, entries]),
  }
}

function textAt(chunk: OpenChunk, at: number, field: number): number | null {
  const index = chunk.texts[at * TEXT_FIELDS.length + field] as number
  return index === NO_TEXT ? null : index
}

/** The entries of a stored chunk, in the order they were recorded. */
export function decodeChunk(text: string): StoredEntry[] {
  const [strings, entries] = JSON.parse(text) as [string[], Array<(string | number | null)[]>]
  const at = (index: unknown) => strings[index as number] as string
  const orNull = (index: unknown) => (index === null ? null : at(index))
  return entries.map(
    ([id, keyId, method, path, route, status, ms, error, ip, agent, idempotencyKey, replayed]): StoredEntry => [
      id as string,
      at(keyId),
      at(method),
      at(path),
      at(route),
      status as number,
      ms as number,
      orNull(error),
      at(ip),
      orNull(agent),
      idempotencyKey as string | null,
      replayed as 0 | 1,
    ],
  )
}

/** Entries in chunks, each entry where addToChunk takes it (the writer's rule, for stored entries). */
export function chunksOf(entries: readonly StoredEntry[]): StoredChunk[] {
  const chunks: StoredChunk[] = []
  let open: OpenChunk | undefined
  for (const entry of entries) {
    const time = timeOfId(entry[0])
    if (open === undefined || !addToChunk(open, entry, time)) {
      if (open !== undefined) {
        chunks.push(closeChunk(open))
      }
      open = openChunk(time)
      addToChunk(open, entry, time)
    }
  }
  if (open !== undefined) {
    chunks.push(closeChunk(open))
  }
  return chunks
}

/** The oldest `count` entries of a chunk, as a chunk of their own (a write cut short by the daily cap). */
export function oldestOf(chunk: StoredChunk, count: number): StoredChunk {
  return chunksOf(decodeChunk(chunk.text).sort(byId).slice(0, count))[0] as StoredChunk
}
