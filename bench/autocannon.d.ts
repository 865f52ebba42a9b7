// The part of autocannon's programmatic API the bench uses (the package ships no types).
declare module 'autocannon' {
  interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
    setupRequest?: (request: { method?: string; path?: string; body?: string }) => object
  }
  interface Options {
    url: string
    connections?: number
    duration?: number
    /** Requests per second from all connections together (paced load). */
    overallRate?: number
    /** Stop after this many requests. */
    amount?: number
    requests?: Request[]
  }
  interface Result {
    requests: { total: number }
    non2xx: number
    errors: number
    timeouts: number
    statusCodeStats?: Record<string, { count: number }>
  }
  interface Instance extends PromiseLike<Result> {
    on(event: 'response', listener: (client: unknown, statusCode: number, bytes: number, ms: number) => void): this
  }
  function autocannon(options: Options): Instance
  export default autocannon
}
