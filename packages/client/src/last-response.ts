// What the API answered with an object the client returned: status, headers, Request-Id, whether
// the answer was a replay. On the object as a non-enumerable `lastResponse` (so the object stays
// exactly the API's JSON), and typed through lastResponseOf.

export interface LastResponse {
  readonly statusCode: number
  readonly headers: Headers
  /** The `Request-Id` header: quote it in a support request, or look it up in the request log. */
  readonly requestId: string | undefined
  /** True when a POST's answer was a replay of an earlier one with the same Idempotency-Key. */
  readonly idempotentReplayed: boolean
}

/** Puts the response beside an object read from it; returns the object. */
export function rememberResponse<T>(resource: T, response: Response): T {
  if (typeof resource === 'object' && resource !== null) {
    const lastResponse: LastResponse = {
      statusCode: response.status,
      headers: response.headers,
      requestId: response.headers.get('request-id') ?? undefined,
      idempotentReplayed: response.headers.get('idempotent-replayed') === 'true',
    }
    Object.defineProperty(resource, 'lastResponse', { value: lastResponse, enumerable: false })
  }
  return resource
}

/** The answer this object came with (`object.lastResponse`); undefined for one the client did not return. */
export function lastResponseOf(resource: object): LastResponse | undefined {
  return (resource as { lastResponse?: LastResponse }).lastResponse
}
