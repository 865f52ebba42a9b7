// Keyset pagination shared by every list: limit bounds, signed opaque cursors, the envelope.

import crypto from 'node:crypto'
import { Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import { hmacSha256, safeEqual } from '../lib/crypto.js'
import { AppError } from './errors.js'

const PAGE_SIZE_DEFAULT = 50
export const PAGE_SIZE_MAX = 100
/** Every cursor issued is far shorter: ids, a digest and a signature. */
export const CURSOR_MAX = 1024

// 2: the filters as a digest (1 carried them whole, which could outgrow CURSOR_MAX).
const CURSOR_VERSION = 2

// Optional: Ajv and sendPage fill in the default.
export const PageQuery = {
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: PAGE_SIZE_MAX,
      default: PAGE_SIZE_DEFAULT,
      description: `Items per page, 1-${PAGE_SIZE_MAX}; may change between pages.`,
    }),
  ),
  after: Type.Optional(
    Type.String({
      maxLength: CURSOR_MAX,
      description: 'The next_cursor of the previous page, passed back unchanged.',
    }),
  ),
}

export interface CursorScope {
  /** A cursor never crosses lists, accounts or queries. */
  list: string
  accountId: string
  filters: Record<string, string | undefined>
}

interface CursorPayload {
  v: number
  l: string
  a: string
  f: string
  k: string
}

/**
 * The query's filters as a cursor carries them: 128 bits of SHA-256 of their canonical form, so a
 * cursor stays short however long the filters are, and one from another query never matches.
 */
const filtersDigest = (filters: CursorScope['filters']): string => {
  const canonical = JSON.stringify(
    Object.keys(filters)
      .sort()
      .filter((key) => filters[key] !== undefined)
      .map((key) => [key, filters[key]]),
  )
  // crypto.hash: one native call, no Hash object to build (docs/performance.md).
  return crypto.hash('sha256', canonical, 'buffer').subarray(0, 16).toString('base64url')
}

// 128 bits of HMAC-SHA-256 is ample to make cursors tamper-evident and keeps them short.
const sign = (secret: string, payload: string): Buffer => hmacSha256(secret, `cursor.${payload}`).subarray(0, 16)

// Only the thrown value: building it on the good path captured a stack trace on every page.
const invalidCursor = (): AppError =>
  new AppError(
    'invalid_cursor',
    'after is not a cursor this query issued; pass next_cursor back unchanged, with the same filters.',
    { errors: [{ field: 'after', message: 'is not a valid cursor for this query' }] },
  )

/** The only shape encode() produces. */
const CURSOR_SHAPE = /^[\w-]+\.[\w-]+$/

/** Encodes and decodes the cursors of one scope; its canonical filters are computed once. */
function cursorCodec(secret: string, scope: CursorScope) {
  const filters = filtersDigest(scope.filters)
  return {
    encode(lastId: string): string {
      const payload: CursorPayload = { v: CURSOR_VERSION, l: scope.list, a: scope.accountId, f: filters, k: lastId }
      const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url')
      return `${encoded}.${sign(secret, encoded).toString('base64url')}`
    },
    decode(cursor: string): string {
      // Checked first: what encode() cannot have produced is refused without computing an HMAC.
      if (!CURSOR_SHAPE.test(cursor)) {
        throw invalidCursor()
      }
      const dot = cursor.indexOf('.')
      const encoded = cursor.slice(0, dot)
      // The signature's text is compared, not its decoded bytes: base64url's last character has
      // padding bits a decoder ignores, and a cursor has one spelling only.
      const signature = sign(secret, encoded).toString('base64url')
      if (!safeEqual(Buffer.from(cursor.slice(dot + 1)), Buffer.from(signature))) {
        throw invalidCursor()
      }
      let payload: CursorPayload
      try {
        payload = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'))
      } catch {
        throw invalidCursor()
      }
      if (
        payload === null ||
        payload.v !== CURSOR_VERSION ||
        payload.l !== scope.list ||
        payload.a !== scope.accountId ||
        payload.f !== filters ||
        typeof payload.k !== 'string'
      ) {
        throw invalidCursor()
      }
      return payload.k
    },
  }
}

export function encodeCursor(secret: string, scope: CursorScope, lastId: string): string {
  return cursorCodec(secret, scope).encode(lastId)
}

/** Returns the last id of the previous page, or throws invalid_cursor. */
export function decodeCursor(secret: string, scope: CursorScope, cursor: string): string {
  return cursorCodec(secret, scope).decode(cursor)
}

export interface PageRow {
  id: string
  body: string
  /** The row's place in the list's order when that is not its id (the events feed); the cursor carries it. */
  position?: string
}

/** Rows of a page whose scan may stop early (docs/design.md#pagination), and where it stopped. */
export interface ScannedRows {
  rows: PageRow[]
  scannedTo: string | undefined
}

/**
 * Builds the list envelope from rows fetched with limit + 1 (the extra row only says that a next page
 * exists); a scan cut short (`scannedTo`) gives a page that may be short, with a cursor that goes on.
 * The stored bodies go straight into one Buffer: no joined string, nothing left for the socket to encode.
 */
function pageBody(
  name: string,
  { rows, scannedTo }: ScannedRows,
  limit: number,
  nextCursor: (lastPosition: string) => string,
): Buffer {
  const count = Math.min(rows.length, limit)
  const last = rows[count - 1]
  const cursor =
    rows.length > limit && last
      ? JSON.stringify(nextCursor(last.position ?? last.id))
      : scannedTo !== undefined
        ? JSON.stringify(nextCursor(scannedTo))
        : 'null'
  const head = `{"${name}":[`
  const tail = `],"next_cursor":${cursor}}`
  let size = Buffer.byteLength(head) + Buffer.byteLength(tail) + Math.max(count - 1, 0)
  for (let i = 0; i < count; i++) {
    size += Buffer.byteLength((rows[i] as PageRow).body)
  }
  const body = Buffer.allocUnsafe(size)
  let at = body.write(head, 0)
  for (let i = 0; i < count; i++) {
    if (i > 0) {
      at = body.writeUInt8(0x2c, at) // ','
    }
    at += body.write((rows[i] as PageRow).body, at)
  }
  body.write(tail, at)
  return body
}

type FetchRows = (position: { afterId: string | undefined; fetch: number }) => Promise<PageRow[] | ScannedRows>

/** A list page's bytes: decode `after`, fetch limit + 1 rows from there, build the envelope. */
export async function buildPage(
  secret: string,
  scope: CursorScope,
  page: { limit: number | undefined; after: string | undefined },
  fetchRows: FetchRows,
): Promise<Buffer> {
  const cursors = cursorCodec(secret, scope)
  const afterId = page.after === undefined ? undefined : cursors.decode(page.after)
  const limit = page.limit ?? PAGE_SIZE_DEFAULT
  const fetched = await fetchRows({ afterId, fetch: limit + 1 })
  const scanned = Array.isArray(fetched) ? { rows: fetched, scannedTo: undefined } : fetched
  return pageBody(scope.list, scanned, limit, cursors.encode)
}

export const sendPageBody = (reply: FastifyReply, body: Buffer): FastifyReply =>
  reply.code(200).type('application/json; charset=utf-8').send(body)

export async function sendPage(
  reply: FastifyReply,
  secret: string,
  scope: CursorScope,
  page: { limit: number | undefined; after: string | undefined },
  fetchRows: FetchRows,
): Promise<FastifyReply> {
  return sendPageBody(reply, await buildPage(secret, scope, page, fetchRows))
}
