// What the API answered with an object the client returned: status, headers, Request-Id, whether
// the answer was a replay. On the object as a non-enumerable `lastResponse` (so the object stays
// exactly the API's JSON: Object.keys, spreads, toEqual and JSON.stringify do not see it), as
// Stripe's SDKs do.

export interface LastResponse {
  readonly statusCode: number
  readonly headers: Headers
  /** The `Request-Id` header: quote it in a support request, or look it up in the request log. */
  readonly requestId: string | undefined
  /** True when a POST's answer was a replay of an earlier one with the same Idempotency-Key. */
  readonly idempotentReplayed: boolean
}

/** What the client returns: the API's object, with the answer it came in as `lastResponse`. */
export type WithLastResponse<T> = T & { readonly lastResponse: LastResponse }

/** The parts of a response an object carries as its `lastResponse`. */
export function describeResponse(response: Response): LastResponse {
  return {
    statusCode: response.status,
    headers: response.headers,
    requestId: response.headers.get('request-id') ?? undefined,
    idempotentReplayed: response.headers.get('idempotent-replayed') === 'true',
  }
}

/**
 * Puts `lastResponse` on an object the client returns; returns the object. Anything else (the
 * empty body of a 204) is returned as it is: there is nothing to put it on.
 */
export function withLastResponse<T>(resource: T, lastResponse: LastResponse): WithLastResponse<T> {
  if (typeof resource === 'object' && resource !== null) {
    // Configurable: an object handed back twice (a page's item, say) takes the newer answer.
    Object.defineProperty(resource, 'lastResponse', { value: lastResponse, enumerable: false, configurable: true })
  }
  return resource as WithLastResponse<T>
}

/** The items of a page, one by one as `all()` and `follow()` yield them, each with the page's answer. */
export function* itemsOf<T>(
  items: T[],
  page: WithLastResponse<object>,
): Generator<WithLastResponse<T>, void, undefined> {
  for (const item of items) {
    yield withLastResponse(item, page.lastResponse)
  }
}

/** The answer this object came with (`object.lastResponse`); undefined for one the client did not return. */
export function lastResponseOf(resource: object): LastResponse | undefined {
  return (resource as { lastResponse?: LastResponse }).lastResponse
}
