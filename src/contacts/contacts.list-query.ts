// The contacts list query: which plan serves a page, and the SQL of each filter combination.
//
// With `q` or `updated_after`, a probe first counts the matching index entries, up to a bound, to
// choose between two plans (see INDEXED_MAX). A list request is the hottest query of the API, so
// each combination of filters and plan (its "shape") is built with Kysely once per database handle,
// compiled, and kept as a template: the SQL text and, for each parameter position, the name of the
// value that goes there (its slot). To learn the slots, the query is built with markers in place
// of values: the string "\u0000<slot>" for a text value, and FETCH_MARKER / INDEXED_MAX_MARKER, two
// negative numbers no real limit takes, for the LIMITs (Kysely wants numbers there). Kysely passes
// every value as a parameter, so each marker comes back as one parameter, which names its slot. A
// request then runs the template with its own values in slot order. Markers, slots and templates
// never leave this module: callers pass filters and get rows.
//
// Bounded cost: when neither a probe nor an email picks an index, a page with `q` or
// `updated_after` walks the id order (or the tag's index) and skips the contacts that do not match.
// That walk examines at most SCAN_MAX rows a page: a first query finds where a window of SCAN_MAX
// positions after the cursor ends, the page is looked for inside it, and when it holds fewer than
// `fetch` matches the page ends there, short or even empty, with `scannedTo` (the window's end) for
// the next cursor. Only a walk that reached the end of the account gives no cursor.
import { CompiledQuery, sql } from 'kysely'
import { PLAN_PER_CALL } from '../db/database.js'
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
 * With `q` or `updated_after`, a page either sorts the few matching contacts, found by an index
 * (contact_terms, or (account_id, updated_at)), or walks the id order skipping the others: the
 * first is right when few match (a rare name; a sync loop asking for the last minute's changes),
 * the second when many do (a common prefix; a first sync), where sorting them all for every page
 * would cost O(n) a page. A probe that reads at most this many + 1 index entries decides, so
 * neither database's planner has to guess. It also bounds the sorted plan's cost: its matches are
 * read one by one, wherever they sit (2,500 spread over 100k contacts took 14 ms on SQLite, 250 took
 * 0.8 ms), so past this many the bounded id walk serves the page instead.
 */
const INDEXED_MAX = 500

/**
 * The most rows a page of the id walk with `q` or `updated_after` examines (see the header): under
 * a millisecond on SQLite at 100k contacts (docs/api-decisions.md), whatever the filter matches. The
 * id walk reads rows in the table's order; with a tag, the walk follows the tag's index and reads
 * each contact where it is, so it examines a quarter as many (TAG_SCAN_DIVISOR).
 */
const SCAN_MAX = 1000
const TAG_SCAN_DIVISOR = 4

/**
 * The bounds a list request runs with. Not options of the API: tests lower them (and restore them)
 * to reach both plans and the cut-short scan with a few contacts.
 */
export const listBounds = { indexedMax: INDEXED_MAX, scanMax: SCAN_MAX }

/**
 * Keyset page by id (creation order): the cost does not grow with depth. The query of each filter
 * combination is compiled once per database handle (see the header) and run with the request's
 * values; SQLite reuses the prepared statement too (db/database.ts).
 */
export async function listContactRows(
  db: Db,
  accountId: string,
  options: ListContactsOptions,
  /** Not an option of the API: tests lower it to reach both plans with a few contacts. */
  indexedMax = listBounds.indexedMax,
  scanMax = listBounds.scanMax,
): Promise<ScannedRows> {
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
  const fewMatch = async (probeName: 'probeQ' | 'probeUpdated') => {
    const probe = templateFor(db, probeName, () => compileProbe(db, probeName))
    const { rows } = await db.executeQuery<{ n: number | string }>(
      CompiledQuery.raw(probe.sql, parameters(probe, values)),
    )
    return Number(rows[0]?.n ?? 0) <= indexedMax
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
    const end = templateFor(db, endKey, () => compileScanEnd(db, shape))
    const { rows } = await db.executeQuery<{ id: string }>(CompiledQuery.raw(end.sql, parameters(end, values)))
    // No row: fewer than scanMax positions are left, and the walk runs to the end.
    values.scannedTo = rows[0]?.id
    shape.bounded = values.scannedTo !== undefined
  }
  const key = Object.values(shape)
    .map((on) => (on ? '1' : '0'))
    .join('')
  const template = templateFor(db, key, () => compileListTemplate(db, shape))
  const { rows } = await db.executeQuery<PageRow>(CompiledQuery.raw(template.sql, parameters(template, values)))
  // A full page ends at its last row; a short one within the window ends where the window does.
  const scannedTo = rows.length < options.fetch ? (values.scannedTo as string | undefined) : undefined
  return { rows, scannedTo }
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
interface ListTemplate {
  sql: string
  /** Which value goes in each parameter position. */
  slots: ListSlot[]
}

/** Per database handle (the SQL differs by dialect); a transaction, a new object each time, just misses. */
const listTemplates = new WeakMap<Db, Map<string, ListTemplate>>()

function templateFor(db: Db, key: string, compile: () => ListTemplate): ListTemplate {
  let templates = listTemplates.get(db)
  if (!templates) {
    templates = new Map()
    listTemplates.set(db, templates)
  }
  let template = templates.get(key)
  if (!template) {
    template = compile()
    templates.set(key, template)
  }
  return template
}

const parameters = (template: ListTemplate, values: Record<ListSlot, unknown>) =>
  template.slots.map((slot) => values[slot])

const marker = (slot: ListSlot) => `\u0000${slot}`
const FETCH_MARKER = -424242
const INDEXED_MAX_MARKER = -434343
const SCAN_SKIP_MARKER = -444444

/** Records which value each parameter position of a query built with markers takes. */
function toTemplate(compiled: { sql: string; parameters: readonly unknown[] }, planPerCall: boolean): ListTemplate {
  const slots = compiled.parameters.map((parameter): ListSlot => {
    if (parameter === FETCH_MARKER) {
      return 'fetch'
    }
    if (parameter === INDEXED_MAX_MARKER) {
      return 'indexedMax'
    }
    if (parameter === SCAN_SKIP_MARKER) {
      return 'scanSkip'
    }
    const slot = typeof parameter === 'string' && parameter.startsWith('\u0000') ? parameter.slice(1) : undefined
    if (slot === undefined) {
      throw new Error(`list query: unexpected parameter ${String(parameter)}`)
    }
    return slot as ListSlot
  })
  return { sql: planPerCall ? `${compiled.sql} ${PLAN_PER_CALL}` : compiled.sql, slots }
}

/** How many index entries match `q` or `updated_after`, counting no further than INDEXED_MAX + 1. */
function compileProbe(db: Db, probe: 'probeQ' | 'probeUpdated'): ListTemplate {
  const matching =
    probe === 'probeQ'
      ? matchingTerms(db).select('contact_terms.contact_id').limit(INDEXED_MAX_MARKER)
      : db
          .selectFrom('contacts')
          .select('contacts.id')
          .where('contacts.account_id', '=', marker('account'))
          .where('contacts.updated_at', '>', marker('updatedAfter'))
          .limit(INDEXED_MAX_MARKER)
  return toTemplate(sql<{ n: number }>`select count(*) as n from (${matching}) as matching`.compile(db), true)
}

/**
 * Where the id walk's window ends: the scanMax-th position after the cursor in the walk's order
 * (the contacts' primary key, or the tag's index), read from the index alone. No row when fewer
 * are left.
 */
function compileScanEnd(db: Db, shape: ListShape): ListTemplate {
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
  return toTemplate(compiled, false)
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
 * Builds the query of one filter combination with a marker in place of each value, compiles it,
 * and records which value each parameter position takes. With a tag, the page is driven by the
 * tag's index, which lists its contacts in id order, so a page reads 51 index entries however
 * many contacts carry the tag (an `id in (subquery)` made SQLite collect all of them first).
 * When a probe found few matches of `q` or `updated_after`, their index drives the page instead.
 */
function compileListTemplate(db: Db, shape: ListShape): ListTemplate {
  const direction = shape.desc ? 'desc' : 'asc'
  if (shape.qIndexed) {
    return compileFewTermsTemplate(db, shape)
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
    // Few changed: found by the updated_at index and sorted. Ordering by an expression (same values,
    // same collation) keeps a planner from walking the primary key instead on a misestimate.
    query = query.where('contacts.updated_at', '>', marker('updatedAfter'))
    const compiled = query
      .orderBy(sql`${sql.ref(position)} || ''`, direction)
      .limit(FETCH_MARKER)
      .compile()
    return toTemplate(compiled, true)
  }
  if (shape.updatedAfter) {
    // Many changed: an expression no index serves, so the page walks the id order.
    query = query.where(sql<boolean>`(contacts.updated_at || '') > ${marker('updatedAfter')}`)
  }
  // Which plan is best depends on the values given: planned per call (no generic plan on PostgreSQL).
  return toTemplate(query.orderBy(position, direction).limit(FETCH_MARKER).compile(), shape.updatedAfter || shape.q)
}

/**
 * Few contacts have a value starting with `q`: their ids come from the contact_terms range (the
 * cursor applied there too), the other filters are checked on those few, and the page is sorted.
 * Expressions (`id || ''`, `updated_at || ''`) keep a planner from walking an index instead.
 */
function compileFewTermsTemplate(db: Db, shape: ListShape): ListTemplate {
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
  return toTemplate(compiled, true)
}
