// The contacts list query: which plan serves a page, and the SQL of each filter combination.
// With `q` or `updated_after`, a probe first counts the matching index entries (up to INDEXED_MAX)
// to choose between sorting the few matches and walking the id order; a walk examines at most
// SCAN_MAX rows a page and may end a page short, with the cursor where it stopped. Each page
// reports how many rows it examined, which the route charges to the account (scanCost). Each
// combination of filters and plan is one statement, built once (db/statement.ts). Why each bound:
// docs/api-decisions.md, "Bounded cost per list page".
import { type CompiledQuery, sql } from 'kysely'
import { PLAN_PER_CALL } from '../db/database.js'
import { dialectOf } from '../db/dialect.js'
import { bind, type Statement, marker as slotMarker, statementFor } from '../db/statement.js'
import type { Db } from '../db/transaction.js'
import { invalidParameter } from '../http/errors.js'
import type { PageRow, ScannedRows } from '../http/pagination.js'
import { emailKey } from '../lib/email.js'
import { searchForm } from './contacts.js'
import type { ListContactsFilters } from './contacts.schemas.js'

export interface ListContactsOptions extends ListContactsFilters {
  afterId: string | undefined
  /** Rows to fetch: the page size plus one, to learn whether another page follows. */
  fetch: number
}

/**
 * Up to this many matches of `q` or `updated_after`, found by their index, a page sorts them (a rare
 * name; the last minute's changes); beyond it, the bounded id walk serves the page, since sorting
 * them all for every page would cost O(n) a page. A probe that reads at most this many + 1 index
 * entries decides, so neither database's planner has to guess.
 */
const INDEXED_MAX = 500

/**
 * The most rows a page of the id walk with `q` or `updated_after` examines. With a tag, the walk
 * follows the tag's index and reads each contact where it is: a quarter as many.
 */
const SCAN_MAX = 1000
const TAG_SCAN_DIVISOR = 4

/**
 * The bounds a list request runs with. Not options of the API: tests lower them (and restore them)
 * to reach both plans and the cut-short scan with a few contacts.
 */
export const listBounds = { indexedMax: INDEXED_MAX, scanMax: SCAN_MAX }

/** Rows a page may examine for each request it spends from the account's budget (docs/rate-limits.md). */
export const ROWS_PER_REQUEST = 100

/** What a page costs in requests: one per ROWS_PER_REQUEST rows examined, at least one. */
export const scanCost = (examined: number): number => Math.max(1, Math.floor(examined / ROWS_PER_REQUEST))

/** A page's rows, where a cut-short scan stopped, and how many contacts it read to find them. */
export interface ListedRows extends ScannedRows {
  /** Contacts read: the page's own rows, or every position a walk passed, or every match a probe chose to sort. */
  examined: number
}

/** Keyset page by id (creation order): the cost does not grow with depth. */
export async function listContactRows(
  db: Db,
  accountId: string,
  options: ListContactsOptions,
  /** Not an option of the API: tests lower it to reach both plans with a few contacts. */
  indexedMax = listBounds.indexedMax,
  scanMax = listBounds.scanMax,
): Promise<ListedRows> {
  const q = options.q === undefined ? undefined : searchForm(options.q)
  const qHigh = q === undefined ? undefined : prefixUpperBound(q)
  const values: Record<ListSlot, unknown> = {
    account: accountId,
    after: options.afterId,
    email: options.email === undefined ? undefined : emailKey(options.email),
    tag: options.tag,
    q: q === undefined ? undefined : likePattern(q),
    qLow: q,
    qHigh,
    updatedAfter: options.updated_after === undefined ? undefined : updatedAfter(options.updated_after),
    fetch: options.fetch,
    indexedMax: indexedMax + 1,
    scanSkip: Math.max(Math.ceil(options.tag === undefined ? scanMax : scanMax / TAG_SCAN_DIVISOR), 1) - 1,
    scannedTo: undefined,
  }
  const shape: ListShape = {
    desc: options.order === 'desc',
    after: options.afterId !== undefined,
    email: options.email !== undefined,
    tag: options.tag !== undefined,
    q: q !== undefined,
    qIndexed: false,
    updatedAfter: options.updated_after !== undefined,
    updatedAfterIndexed: false,
    bounded: false,
  }
  // The matches a probe counted: what the sorted plan it picks reads, at most indexedMax.
  let matches = 0
  const fewMatch = async (probeName: 'probeQ' | 'probeUpdated') => {
    const probe = listStatement(db, probeName, () => compileProbe(db, probeName))
    const { rows } = await db.executeQuery<{ n: number | string }>(bind(probe, values))
    matches = Number(rows[0]?.n ?? 0)
    return matches <= indexedMax
  }
  // An email matches one contact at most: its own index serves the page whatever else is asked.
  if (shape.q && !shape.email && qHigh !== undefined) {
    shape.qIndexed = await fewMatch('probeQ')
  }
  if (shape.updatedAfter && !shape.qIndexed && !shape.email) {
    shape.updatedAfterIndexed = await fewMatch('probeUpdated')
  }
  // The id walk, which skips what does not match: bounded to a window of scanMax positions.
  const walks = (shape.q || shape.updatedAfter) && !shape.email && !shape.qIndexed && !shape.updatedAfterIndexed
  if (walks) {
    const endKey = `scanEnd${shape.tag ? 't' : ''}${shape.desc ? 'd' : ''}${shape.after ? 'a' : ''}`
    const end = listStatement(db, endKey, () => compileScanEnd(db, shape))
    const { rows } = await db.executeQuery<{ id: string }>(bind(end, values))
    // No row: fewer than scanMax positions are left, and the walk runs to the end.
    values.scannedTo = rows[0]?.id
    shape.bounded = values.scannedTo !== undefined
  }
  const key = Object.values(shape)
    .map((on) => (on ? '1' : '0'))
    .join('')
  const page = listStatement(db, key, () => compilePage(db, shape))
  const { rows } = await db.executeQuery<PageRow>(bind(page, values))
  // A full page ends at its last row; a short one within the window ends where the window does.
  const scannedTo = rows.length < options.fetch ? (values.scannedTo as string | undefined) : undefined
  let examined = rows.length
  if (shape.qIndexed || shape.updatedAfterIndexed) {
    examined = Math.max(matches, rows.length)
  } else if (walks) {
    examined =
      scannedTo !== undefined
        ? Number(values.scanSkip) + 1
        : await walkedPositions(db, shape, values, rows.length >= options.fetch ? rows.at(-1) : undefined)
  }
  return { rows, scannedTo, examined }
}

/**
 * The positions a walk passed when it did not run to its window's end: up to the page's last row
 * when the page filled (its matches may sit anywhere in the window), else to the account's end
 * (fewer than the window were left). Read from the index alone and bounded by the window, like
 * compileScanEnd.
 */
async function walkedPositions(
  db: Db,
  shape: ListShape,
  values: Record<ListSlot, unknown>,
  last: PageRow | undefined,
): Promise<number> {
  const key = `walked${shape.tag ? 't' : ''}${shape.desc ? 'd' : ''}${shape.after ? 'a' : ''}${last ? 'l' : ''}`
  const counted = listStatement(db, key, () => compileWalked(db, shape, last !== undefined))
  const { rows } = await db.executeQuery<{ n: number | string }>(bind(counted, { ...values, scannedTo: last?.id }))
  return Number(rows[0]?.n ?? 0)
}

type ListSlot =
  | 'account'
  | 'after'
  | 'email'
  | 'tag'
  | 'q'
  | 'qLow'
  | 'qHigh'
  | 'updatedAfter'
  | 'fetch'
  | 'indexedMax'
  | 'scanSkip'
  | 'scannedTo'
type ListShape = Record<
  'desc' | 'after' | 'email' | 'tag' | 'q' | 'qIndexed' | 'updatedAfter' | 'updatedAfterIndexed' | 'bounded',
  boolean
>
type Built = { compiled: CompiledQuery; suffix?: string }

/** The statement of one shape, built once per dialect (db/statement.ts). */
const listStatement = (db: Db, key: string, build: () => Built): Statement<ListSlot> =>
  statementFor(dialectOf(db), `contacts-list|${key}`, build, NUMBER_MARKERS)

const marker = (slot: ListSlot) => slotMarker(slot)
/** Negative numbers that no real LIMIT or OFFSET takes, where Kysely wants a number. */
const FETCH_MARKER = -424242
const INDEXED_MAX_MARKER = -434343
const SCAN_SKIP_MARKER = -444444
const NUMBER_MARKERS: Record<number, ListSlot> = {
  [FETCH_MARKER]: 'fetch',
  [INDEXED_MAX_MARKER]: 'indexedMax',
  [SCAN_SKIP_MARKER]: 'scanSkip',
}

/** A compiled query, planned on every call when its best plan depends on the values given. */
const built = (compiled: CompiledQuery, planPerCall: boolean): Built =>
  planPerCall ? { compiled, suffix: PLAN_PER_CALL } : { compiled }

/** How many index entries match `q` or `updated_after`, counting no further than INDEXED_MAX + 1. */
function compileProbe(db: Db, probe: 'probeQ' | 'probeUpdated'): Built {
  const matching =
    probe === 'probeQ'
      ? matchingTerms(db).select('contact_terms.contact_id').limit(INDEXED_MAX_MARKER)
      : db
          .selectFrom('contacts')
          .select('contacts.id')
          .where('contacts.account_id', '=', marker('account'))
          .where('contacts.updated_at', '>', marker('updatedAfter'))
          .limit(INDEXED_MAX_MARKER)
  return built(sql<{ n: number }>`select count(*) as n from (${matching}) as matching`.compile(db), true)
}

/**
 * Where the id walk's window ends: the scanMax-th position after the cursor in the walk's order
 * (the contacts' primary key, or the tag's index), read from the index alone. No row when fewer
 * are left.
 */
function compileScanEnd(db: Db, shape: ListShape): Built {
  const direction = shape.desc ? 'desc' : 'asc'
  const compiled = shape.tag
    ? db
        .selectFrom('contact_tags')
        .select('contact_tags.contact_id as id')
        .where('contact_tags.account_id', '=', marker('account'))
        .where('contact_tags.tag', '=', marker('tag'))
        .$if(shape.after, (query) => query.where('contact_tags.contact_id', shape.desc ? '<' : '>', marker('after')))
        .orderBy('contact_tags.contact_id', direction)
        .limit(sql.lit(1))
        .offset(SCAN_SKIP_MARKER)
        .compile()
    : db
        .selectFrom('contacts')
        .select('contacts.id as id')
        .where('contacts.account_id', '=', marker('account'))
        .$if(shape.after, (query) => query.where('contacts.id', shape.desc ? '<' : '>', marker('after')))
        .orderBy('contacts.id', direction)
        .limit(sql.lit(1))
        .offset(SCAN_SKIP_MARKER)
        .compile()
  return built(compiled, false)
}

/** How many positions of the walk's order lie after the cursor, up to `scannedTo` when `toLast`; at most the window. */
function compileWalked(db: Db, shape: ListShape, toLast: boolean): Built {
  const direction = shape.desc ? 'desc' : 'asc'
  const before = shape.desc ? '<' : '>'
  const upTo = shape.desc ? '>=' : '<='
  const positions = shape.tag
    ? db
        .selectFrom('contact_tags')
        .select('contact_tags.contact_id as id')
        .where('contact_tags.account_id', '=', marker('account'))
        .where('contact_tags.tag', '=', marker('tag'))
        .$if(shape.after, (query) => query.where('contact_tags.contact_id', before, marker('after')))
        .$if(toLast, (query) => query.where('contact_tags.contact_id', upTo, marker('scannedTo')))
        .orderBy('contact_tags.contact_id', direction)
        .limit(SCAN_SKIP_MARKER)
    : db
        .selectFrom('contacts')
        .select('contacts.id as id')
        .where('contacts.account_id', '=', marker('account'))
        .$if(shape.after, (query) => query.where('contacts.id', before, marker('after')))
        .$if(toLast, (query) => query.where('contacts.id', upTo, marker('scannedTo')))
        .orderBy('contacts.id', direction)
        .limit(SCAN_SKIP_MARKER)
  // Capped at scanSkip, one short of the window: a count that only sets a charge can be one low.
  return built(sql<{ n: number }>`select count(*) as n from (${positions}) as walked`.compile(db), false)
}

/** The account's search terms that start with `q`: a range of the contact_terms index. */
function matchingTerms(db: Db) {
  return db
    .selectFrom('contact_terms')
    .where('contact_terms.account_id', '=', marker('account'))
    .where('contact_terms.term', '>=', marker('qLow'))
    .where('contact_terms.term', '<', marker('qHigh'))
}

/** `q` (in search form) as a LIKE pattern: a prefix of any line of `search` (see toContactRows). */
function likePattern(q: string): string {
  return `%\n${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

/**
 * The least string above every string that starts with `prefix`, in code-point order (SQLite's
 * and the "C" collation's): the prefix with its last code point below U+10FFFF incremented and the
 * rest dropped. undefined when there is none (only U+10FFFF), which no index range can serve.
 */
export function prefixUpperBound(prefix: string): string | undefined {
  const points = Array.from(prefix, (char) => char.codePointAt(0) ?? 0)
  while (points.length > 0) {
    const last = points.pop() ?? 0
    if (last < 0x10ffff) {
      // Skip the surrogate range, which no well-formed string contains.
      points.push(last === 0xd7ff ? 0xe000 : last + 1)
      return String.fromCodePoint(...points)
    }
  }
  return undefined
}

function updatedAfter(raw: string): string {
  const after = Date.parse(raw)
  // The date-time format admits a leap second (…:60), which Date cannot represent.
  if (Number.isNaN(after)) {
    throw invalidParameter('updated_after', 'must be an RFC 3339 time, e.g. 2026-11-22T10:00:00Z')
  }
  return new Date(after).toISOString()
}

/**
 * The page query of one filter combination. With a tag, the tag's index drives the page (it lists
 * its contacts in id order, so a page reads a page of entries however many carry the tag); when a
 * probe found few matches of `q` or `updated_after`, their index drives it instead.
 */
function compilePage(db: Db, shape: ListShape): Built {
  const direction = shape.desc ? 'desc' : 'asc'
  if (shape.qIndexed) {
    return compileFewTermsPage(db, shape)
  }
  let query = shape.tag
    ? db
        .selectFrom('contact_tags')
        .innerJoin('contacts', (join) =>
          join
            .onRef('contacts.account_id', '=', 'contact_tags.account_id')
            .onRef('contacts.id', '=', 'contact_tags.contact_id'),
        )
        .select(['contacts.id', 'contacts.body'])
        .where('contact_tags.account_id', '=', marker('account'))
        .where('contact_tags.tag', '=', marker('tag'))
    : db
        .selectFrom('contacts')
        .select(['contacts.id', 'contacts.body'])
        .where('contacts.account_id', '=', marker('account'))
  const position = shape.tag ? 'contact_tags.contact_id' : 'contacts.id'
  if (shape.after) {
    query = query.where(position, shape.desc ? '<' : '>', marker('after'))
  }
  if (shape.bounded) {
    // The window of the id walk: it ends at the scanMax-th position after the cursor (compileScanEnd).
    query = query.where(position, shape.desc ? '>=' : '<=', marker('scannedTo'))
  }
  if (shape.email) {
    query = query.where('contacts.email_lower', '=', marker('email'))
  }
  if (shape.q) {
    // Lower-cased on both sides, so SQLite's case-insensitive LIKE and PostgreSQL's agree.
    query = query.where(sql<boolean>`contacts.search like ${marker('q')} escape '\\'`)
  }
  if (shape.updatedAfter && shape.updatedAfterIndexed) {
    // Few changed: found by the updated_at index and sorted. Ordering by an expression keeps a
    // planner from walking the primary key instead on a misestimate.
    query = query.where('contacts.updated_at', '>', marker('updatedAfter'))
    const compiled = query
      .orderBy(sql`${sql.ref(position)} || ''`, direction)
      .limit(FETCH_MARKER)
      .compile()
    return built(compiled, true)
  }
  if (shape.updatedAfter) {
    // Many changed: an expression no index serves, so the page walks the id order.
    query = query.where(sql<boolean>`(contacts.updated_at || '') > ${marker('updatedAfter')}`)
  }
  // Which plan is best depends on the values given: planned per call (no generic plan on PostgreSQL).
  return built(query.orderBy(position, direction).limit(FETCH_MARKER).compile(), shape.updatedAfter || shape.q)
}

/**
 * Few contacts have a value starting with `q`: their ids come from the contact_terms range (the
 * cursor applied there too), the other filters are checked on those few, and the page is sorted.
 * Expressions (`id || ''`, `updated_at || ''`) keep a planner from walking an index instead.
 */
function compileFewTermsPage(db: Db, shape: ListShape): Built {
  let matching = matchingTerms(db).select('contact_terms.contact_id')
  if (shape.after) {
    matching = matching.where('contact_terms.contact_id', shape.desc ? '<' : '>', marker('after'))
  }
  let query = db
    .selectFrom('contacts')
    .select(['contacts.id', 'contacts.body'])
    .where('contacts.account_id', '=', marker('account'))
    .where('contacts.id', 'in', matching)
  if (shape.tag) {
    query = query.where(({ exists, selectFrom }) =>
      exists(
        selectFrom('contact_tags')
          .select('contact_tags.contact_id')
          .where('contact_tags.account_id', '=', marker('account'))
          .where('contact_tags.tag', '=', marker('tag'))
          .whereRef('contact_tags.contact_id', '=', 'contacts.id'),
      ),
    )
  }
  if (shape.updatedAfter) {
    query = query.where(sql<boolean>`(contacts.updated_at || '') > ${marker('updatedAfter')}`)
  }
  const compiled = query
    .orderBy(sql`contacts.id || ''`, shape.desc ? 'desc' : 'asc')
    .limit(FETCH_MARKER)
    .compile()
  return built(compiled, true)
}
