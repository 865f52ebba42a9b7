// One webhook delivery attempt over the network: to a checked address only, one timeout, no redirects, 1 KB read.
import http from 'node:http'
import https from 'node:https'
import type { LookupFunction, Socket } from 'node:net'
import { SERVICE_VERSION } from '../lib/version.js'
import { type Resolver, resolveWebhookTarget, type WebhookTarget, type WebhookTargetFailure } from './webhook-url.js'

/** Who is calling, for a receiver's logs and firewall rules (docs/webhooks.md). */
export const WEBHOOK_USER_AGENT = `ContactsAPI-Webhooks/${SERVICE_VERSION}`

export type WebhookPost = {
  url: string | URL
  /** Signature and content-type headers (signing.ts); content-length is set here. */
  headers: Readonly<Record<string, string>>
  body: string
  /** One limit for DNS + connect + TLS + response (WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number
  /** WEBHOOK_ALLOW_PRIVATE_URLS: allows http: and non-public addresses (development and tests). */
  allowPrivate: boolean
  resolve?: Resolver
  /** The endpoint's own keep-alive connections; without, a fresh connection per delivery. */
  connections?: EndpointConnections
  /** The W3C traceparent sent, so a receiver's tracing can tie its work to the call (tracing.ts). */
  traceparent?: string
}

// Idle kept-alive connections close after this, before the usual 5 s keep-alive of servers, so a
// delivery rarely meets a connection the receiver is closing.
const KEEP_ALIVE_IDLE_MS = 4000

/**
 * Keep-alive connections of one endpoint, never shared between endpoints or tenants. A new URL or
 * address set gets a new agent, so a reused socket only ever reaches a checked address.
 */
export class EndpointConnections {
  #agent: http.Agent | undefined
  #key = ''

  constructor(private readonly maxSockets: number) {}

  agentFor(target: WebhookTarget): http.Agent {
    const key = `${target.url.protocol}//${target.url.host} ${target.addresses.map((a) => a.address).join(',')}`
    if (this.#agent === undefined || key !== this.#key) {
      this.#agent?.destroy()
      const Agent = target.url.protocol === 'https:' ? https.Agent : http.Agent
      this.#agent = new Agent({ keepAlive: true, maxSockets: this.maxSockets, timeout: KEEP_ALIVE_IDLE_MS })
      this.#key = key
    }
    return this.#agent
  }

  close(): void {
    this.#agent?.destroy()
    this.#agent = undefined
  }
}

export type DeliveryResult = {
  /** Only a 2xx response read without error. */
  ok: boolean
  /** The receiver's status, also for failures (a 3xx is recorded, never followed); null if none came. */
  statusCode: number | null
  durationMs: number
  /** At most the first EXCERPT_MAX_BYTES of the response body, as UTF-8. Untrusted text: escape it to show it. */
  excerpt: string
  /** Why the attempt failed when the status does not say (`timeout`, `connection refused`, `blocked address …`). */
  error: string | null
}

// The receiver's answer is untrusted and only shown to the tenant: a cap keeps a hostile endpoint from
// filling memory or the deliveries table, and keeps this from becoming a read oracle.
export const EXCERPT_MAX_BYTES = 1024

/** POSTs one delivery. Never throws for network failures: every outcome is a DeliveryResult. */
export async function postWebhook(post: WebhookPost): Promise<DeliveryResult> {
  const started = performance.now()
  const result = (statusCode: number | null, excerpt: string, error: string | null): DeliveryResult => ({
    ok: error === null && statusCode !== null && statusCode >= 200 && statusCode < 300,
    statusCode,
    durationMs: Math.round(performance.now() - started),
    excerpt,
    error,
  })
  // The host is resolved once, here, and every address checked; the connection below can use no other.
  const resolved = await resolveWebhookTarget(post.url, post, post.timeoutMs)
  if (!resolved.ok) {
    return result(null, '', targetError(resolved.failure))
  }
  const remainingMs = post.timeoutMs - (performance.now() - started)
  const outcome = await send(resolved.target, post, remainingMs)
  return result(outcome.statusCode, outcome.excerpt, outcome.error)
}

type Outcome = { statusCode: number | null; excerpt: string; error: string | null }

function send(target: WebhookTarget, post: WebhookPost, timeoutMs: number): Promise<Outcome> {
  return new Promise((settle) => {
    let statusCode: number | null = null
    const chunks: Buffer[] = []
    let received = 0
    let request: http.ClientRequest | undefined
    let socket: Socket | undefined
    let settled = false
    // A response read to its end leaves a kept-alive connection reusable; anything else closes it.
    let complete = false
    const finish = (error: string | null): void => {
      if (settled) {
        return
      }
      settled = true
      clearTimeout(timer)
      // Destroying also drops whatever the receiver still sends beyond the excerpt.
      if (!(complete && post.connections)) {
        request?.destroy()
        // Node 26 may already have handed a socket whose response it parsed whole back to the
        // agent's pool, where destroying the request no longer reaches it.
        socket?.destroy()
      }
      settle({ statusCode, excerpt: decodeExcerpt(Buffer.concat(chunks)), error })
    }
    const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs))

    // Node asks this function, not DNS, for the host's addresses: the socket can only reach a checked
    // address (no DNS rebinding), while SNI, the certificate check and Host still use the name.
    const lookup: LookupFunction = (_hostname, options, callback) => {
      const [first] = target.addresses
      if (options.all) {
        callback(null, target.addresses)
      } else if (first) {
        callback(null, first.address, first.family)
      } else {
        callback(Object.assign(new Error('no checked address'), { code: 'ENOTFOUND' }), '', 0)
      }
    }

    const { url } = target
    const transport = url.protocol === 'https:' ? https : http
    const open = (retry: boolean): void => {
      let sent: http.ClientRequest
      try {
        sent = transport.request({
          protocol: url.protocol,
          hostname: target.hostname,
          port: url.port === '' ? undefined : Number(url.port),
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: {
            ...post.headers,
            'content-length': String(Buffer.byteLength(post.body)),
            'user-agent': WEBHOOK_USER_AGENT,
            ...(post.traceparent ? { traceparent: post.traceparent } : {}),
          },
          agent: post.connections ? post.connections.agentFor(target) : false,
          lookup,
        })
      } catch {
        // Node validates header names and values synchronously (e.g. CR/LF in a value).
        finish('invalid request')
        return
      }
      request = sent
      sent.on('socket', (assigned) => {
        socket = assigned
      })
      sent.on('error', (error) => {
        // A kept-alive connection the receiver closed while idle resets as it is reused: sent again
        // at once on a new connection, within the same timeout (at least once, same webhook-id).
        const code = (error as NodeJS.ErrnoException).code
        if (
          !retry &&
          !settled &&
          sent.reusedSocket &&
          statusCode === null &&
          (code === 'ECONNRESET' || code === 'EPIPE')
        ) {
          sent.destroy()
          open(true)
          return
        }
        finish(networkError(error))
      })
      sent.on('response', (response) => {
        statusCode = response.statusCode ?? null
        response.on('data', (chunk: Buffer) => {
          const room = EXCERPT_MAX_BYTES - received
          chunks.push(chunk.subarray(0, room))
          received += Math.min(room, chunk.length)
          if (received >= EXCERPT_MAX_BYTES) {
            finish(statusError(statusCode))
          }
        })
        response.on('end', () => {
          complete = true
          finish(statusError(statusCode))
        })
        response.on('error', (error) => finish(networkError(error)))
        response.on('close', () => finish(response.complete ? statusError(statusCode) : 'connection closed'))
      })
      sent.end(post.body)
    }
    open(false)
  })
}

// Redirects are never followed (they could point anywhere, including inside our network); the error
// says so, since a 3xx alone reads like a success that went elsewhere.
const statusError = (statusCode: number | null): string | null =>
  statusCode !== null && statusCode >= 300 && statusCode < 400 ? 'redirect not followed' : null

function targetError(failure: WebhookTargetFailure): string {
  switch (failure.kind) {
    case 'blocked':
      return `blocked address ${failure.address}`
    case 'dns':
      return 'dns failure'
    case 'invalid':
      return `invalid url: ${failure.reason}`
  }
}

const NETWORK_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ETIMEDOUT: 'timeout',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'dns failure',
  EAI_AGAIN: 'dns failure',
}

/** A short, fixed-vocabulary description: error messages may carry addresses or receiver text. */
function networkError(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code ?? ''
  const known = Object.hasOwn(NETWORK_ERRORS, code) ? NETWORK_ERRORS[code] : undefined
  if (known !== undefined) {
    return known
  }
  if (!/^[A-Z0-9_]{1,64}$/.test(code)) {
    return 'network error'
  }
  if (code.startsWith('HPE_')) {
    return 'invalid response'
  }
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_)/.test(code)) {
    return `tls error (${code})`
  }
  return `network error (${code})`
}

// stream: true holds back a multi-byte character cut at the byte limit instead of emitting U+FFFD.
const decodeExcerpt = (bytes: Buffer): string => new TextDecoder('utf-8').decode(bytes, { stream: true })
