// Conditional requests: the ETag a contact or a page came with, kept beside the object (etagOf), and
// the answers of a read that may be 304 Not Modified.
import type { WithLastResponse } from './last-response.js'

/** Beside the object, not in it: a contact stays exactly the API's JSON (and its type). */
const etags = new WeakMap<object, string>()

/**
 * The ETag the API sent with this contact or page (from `get`, `list`, `create`, `upsert` or
 * `update`): pass it as `ifMatch` to change the contact only if nobody else has since, or as
 * `ifNoneMatch` to re-read only if it changed. Undefined for an object the client did not return.
 */
export function etagOf(resource: object): string | undefined {
  return etags.get(resource)
}

/** Remembers the response's ETag for the object read from it; returns the object. */
export function rememberEtag<T>(resource: T, response: Response): T {
  const etag = response.headers.get('etag')
  if (etag !== null && typeof resource === 'object' && resource !== null) {
    etags.set(resource, etag)
  }
  return resource
}

/** 304: what you hold is current. */
export interface NotModified {
  notModified: true
  /** The current ETag (the one you sent, or an equivalent). */
  etag: string | undefined
}

/** 200: it changed (or you held nothing); `data` is the new copy, `etag` its tag (also `etagOf(data)`). */
export interface Modified<T> {
  notModified: false
  etag: string | undefined
  data: T
}

/**
 * The answer of a read with `ifNoneMatch`: narrow on `notModified`. Both carry the response as
 * `lastResponse` (a 304 has no body to carry it), and so does a modified `data`.
 */
export type Conditional<T> = WithLastResponse<NotModified> | WithLastResponse<Modified<WithLastResponse<T>>>

export interface ConditionalReadOptions {
  /**
   * The ETag of the copy you hold (`etagOf(copy)`, or a previous answer's `etag`): the API answers
   * 304 while it is current, and the call resolves to `{ notModified: true }` without a body.
   * Undefined (nothing held yet) reads unconditionally, with the same kind of answer.
   */
  ifNoneMatch: string | undefined
  signal?: AbortSignal
}

export interface ConditionalWriteOptions {
  /**
   * The ETag of the version you read (`etagOf(contact)`): the change is made only if the contact is
   * still that version, else ApiError `precondition_failed` (412) and nothing changes. Checked in
   * the write's transaction, so two clients holding the same version cannot both write.
   */
  ifMatch?: string
  signal?: AbortSignal
}
