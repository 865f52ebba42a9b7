// Keyset pagination shared by every list: limit bounds, signed opaque cursors, the envelope.
import { type TSchema, Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import { hmacSha256, safeEqual } from '../lib/crypto.js'
import { AppError } from './errors.js'
import { sendRawJson } from './replies.js'

export const PAGE_SIZE_DEFAULT = 50
export const PAGE_SIZE_MAX = 100
const CURSOR_VERSION = 1

export const PageQuery = {
  limit: Type.Integer({
    minimum: 1,
    maximum: PAGE_SIZE_MAX,
    default: PAGE_SIZE_DEFAULT,
    description: `Items per page, 1-${PAGE_SIZE_MAX}; may change between pages.`,
  }),
  after: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 1024,
      description: 'The next_cursor of the previous page, passed back unchanged.',
    }),
  ),
}

export const PageEnvelope = <T extends TSchema>(name: string, item: T) =>
  Type.Object({
    [name]: Type.Array(item),
    next_cursor: Type.Union([Type.String(), Type.Null()], {
      description: 'Pass as `after` for the next page; null at the end of the list.',
    }),
  })

export interface CursorScope {
  /** Which list ("contacts", "events"): a cursor never crosses lists. */
  list: string
  accountId: string
  /** The query's filters and order; a cursor is valid only for the same ones. */
  filters: Record<string, string | undefined>
}

interface CursorPayload {
  v: number
  l: string
  a: string
  f: string
  k: string
}

const canonicalFilters = (filters: CursorScope['filters']): string =>
  JSON.stringify(
    Object.keys(filters)
      .sort()
      .filter((key) => filters[key] !== undefined)
      .map((key) => [key, filters[key]]),
  )

// 128 bits of HMAC-SHA-256 is ample to make cursors tamper-evident and keeps them short.
const sign = (secret: string, payload: string): Buffer => hmacSha256(secret, `cursor.${payload}`).subarray(0, 16)

export function encodeCursor(secret: string, scope: CursorScope, lastId: string): string {
  const payload: CursorPayload = {
    v: CURSOR_VERSION,
    l: scope.list,
    a: scope.accountId,
    f: canonicalFilters(scope.filters),
    k: lastId,
  }
  const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url')
  return `${encoded}.${sign(secret, encoded).toString('base64url')}`
}

/** Returns the last id of the previous page, or throws invalid_cursor. */
export function decodeCursor(secret: string, scope: CursorScope, cursor: string): string {
  const invalid = new AppError(
    'invalid_cursor',
    'after is not a cursor this query issued; pass next_cursor back unchanged, with the same filters.',
    { errors: [{ field: 'after', message: 'is not a valid cursor for this query' }] },
  )
  const [encoded, signature, extra] = cursor.split('.')
  if (!encoded || !signature || extra !== undefined) {
    throw invalid
  }
  if (!safeEqual(Buffer.from(signature, 'base64url'), sign(secret, encoded))) {
    throw invalid
  }
  let payload: CursorPayload
  try {
    payload = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'))
  } catch {
    throw invalid
  }
  if (
    payload.v !== CURSOR_VERSION ||
    payload.l !== scope.list ||
    payload.a !== scope.accountId ||
    payload.f !== canonicalFilters(scope.filters) ||
    typeof payload.k !== 'string'
  ) {
    throw invalid
  }
  return payload.k
}

export interface PageRow {
  id: string
  body: string
}

/**
 * Builds the list envelope from rows fetched with limit + 1: the extra row only says that
 * a next page exists, so next_cursor is null exactly at the end.
 */
export function pageJson(name: string, rows: PageRow[], limit: number, nextCursor: (lastId: string) => string): string {
  const page = rows.length > limit ? rows.slice(0, limit) : rows
  const last = page[page.length - 1]
  const cursor = rows.length > limit && last ? JSON.stringify(nextCursor(last.id)) : 'null'
  return `{"${name}":[${page.map((row) => row.body).join(',')}],"next_cursor":${cursor}}`
}

/**
 * The whole of a list endpoint after authentication: decode `after` for this scope, fetch
 * limit + 1 rows from the position, and send the envelope with the next cursor.
 */
export async function sendPage(
  reply: FastifyReply,
  secret: string,
  scope: CursorScope,
  page: { limit: number; after: string | undefined },
  fetchRows: (position: { afterId: string | undefined; fetch: number }) => Promise<PageRow[]>,
): Promise<FastifyReply> {
  const afterId = page.after === undefined ? undefined : decodeCursor(secret, scope, page.after)
  const rows = await fetchRows({ afterId, fetch: page.limit + 1 })
  return sendRawJson(
    reply,
    200,
    pageJson(scope.list, rows, page.limit, (lastId) => encodeCursor(secret, scope, lastId)),
  )
}
