// `contacts-api listen --forward-to URL` and `contacts-api trigger EVENT_TYPE`: the integrator's
// loop on a laptop (docs/webhooks.md#receive-webhooks-on-your-laptop). listen follows the account's
// events feed with long polls and POSTs each event to a local URL, signed as a delivery is, with a
// secret of its own; trigger makes sample test-mode data to fire events. Both are clients of the
// API (CONTACTS_API_KEY, --api-url): no database, no endpoint, no public URL.
import { EVENT_TYPES } from '../events/events.js'
import { eventPayload } from '../webhooks/payload.js'
import { newWebhookSecret } from '../webhooks/secrets.js'
import { webhookHeaders } from '../webhooks/signing.js'
import { WEBHOOK_USER_AGENT } from '../webhooks/webhook-post.js'
import { parseArguments, UsageError } from './arguments.js'
import type { CliIo } from './io.js'

const LISTEN_USAGE = `Usage: contacts-api listen --forward-to URL [--events TYPES] [--api-url URL]
       contacts-api trigger EVENT_TYPE [--api-url URL]

  listen    follows the account's events (from now on) and POSTs each to URL, signed per
            Standard Webhooks with a secret printed at start; one line per event. Ctrl-C stops it.
            --events: a comma-separated list of types (default: all)
  trigger   makes sample test-mode data that fires EVENT_TYPE (${EVENT_TYPES.filter((t) => t.startsWith('contact.')).join(', ')})

  The key comes from CONTACTS_API_KEY; the API from --api-url, else API_URL, else http://127.0.0.1:3000.`

const OPTIONS = {
  'forward-to': { type: 'string' },
  events: { type: 'string' },
  'api-url': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

/** A forwarded event gets this long to be answered; then the next one goes on. */
const FORWARD_TIMEOUT_MS = 10_000
/** Each long poll of the feed waits this long at most (the API's maximum). */
const WAIT_SECONDS = 30

interface FeedPage {
  events: Array<Record<string, unknown> & { id: string; type: string }>
  next_cursor: string
}

/** An answer of the API that is not a 2xx: its problem's code and detail, as the CLI prints them. */
class ApiRefusal extends Error {}

/** Runs `run` with a signal that Ctrl-C (SIGINT) or SIGTERM aborts, so listen ends with exit 0. */
export async function runUntilInterrupted(run: (stop: AbortSignal) => Promise<number>): Promise<number> {
  const stop = new AbortController()
  const interrupt = () => stop.abort()
  process.once('SIGINT', interrupt)
  process.once('SIGTERM', interrupt)
  try {
    return await run(stop.signal)
  } finally {
    process.off('SIGINT', interrupt)
    process.off('SIGTERM', interrupt)
  }
}

/** Runs listen or trigger; resolves with the exit code (listen: when `stop` aborts, 0). */
export async function runListen(
  command: 'listen' | 'trigger',
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: CliIo,
  stop: AbortSignal,
): Promise<number> {
  let values: ReturnType<typeof parse>['values']
  let positionals: string[]
  try {
    ;({ values, positionals } = parse(argv))
    if (values.help) {
      io.out(LISTEN_USAGE)
      return 0
    }
    const key = env.CONTACTS_API_KEY?.trim()
    if (!key) {
      throw new UsageError(`${command} needs the API key in CONTACTS_API_KEY`)
    }
    const api = apiOf(values['api-url'] ?? env.API_URL ?? 'http://127.0.0.1:3000')
    const call = caller(api, key, stop)
    if (command === 'trigger') {
      return await trigger(call, positionals, io)
    }
    if (positionals.length > 0) {
      throw new UsageError(`unexpected argument "${positionals[0]}"`)
    }
    const target = forwardTarget(values['forward-to'])
    const types = eventTypes(values.events)
    return await listen(call, { api, target, types }, io, stop)
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`contacts-api: ${error.message}\n\n${LISTEN_USAGE}`)
      return 2
    }
    if (error instanceof ApiRefusal) {
      io.err(`contacts-api: ${error.message}`)
      return 1
    }
    throw error
  }
}

const parse = (argv: string[]) => parseArguments(argv, OPTIONS)

function apiOf(text: string): URL {
  let url: URL
  try {
    url = new URL(text.replace(/\/+$/, '').replace(/\/api\/v1$/, ''))
  } catch {
    throw new UsageError(`--api-url must be an http(s) URL (got "${text}")`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`--api-url must be an http(s) URL (got "${text}")`)
  }
  return url
}

function forwardTarget(text: string | undefined): URL {
  if (text === undefined) {
    throw new UsageError('listen needs --forward-to URL, e.g. --forward-to http://localhost:4000/hooks')
  }
  try {
    const url = new URL(text)
    if (url.protocol === 'http:' || url.protocol === 'https:') {
      return url
    }
  } catch {
    // Said below.
  }
  throw new UsageError(`--forward-to must be an http(s) URL (got "${text}")`)
}

function eventTypes(text: string | undefined): Set<string> | undefined {
  if (text === undefined) {
    return undefined
  }
  const types = text.split(',').map((type) => type.trim())
  const unknown = types.filter((type) => !(EVENT_TYPES as readonly string[]).includes(type))
  if (unknown.length > 0) {
    throw new UsageError(`--events takes ${EVENT_TYPES.join(', ')} (got "${unknown.join(', ')}")`)
  }
  return new Set(types)
}

type Call = <T>(method: string, path: string, body?: unknown) => Promise<T>

/** Calls the API with the key; a refusal or an unreachable API is an ApiRefusal, said in one line. */
function caller(api: URL, key: string, stop: AbortSignal): Call {
  return async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    let response: Response
    try {
      response = await fetch(new URL(`/api/v1${path}`, api), {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          'user-agent': 'contacts-api-cli',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: stop,
      })
    } catch (error) {
      if (stop.aborted) {
        throw error
      }
      const cause = (error as { cause?: { code?: string; message?: string } }).cause
      throw new ApiRefusal(`cannot reach the API at ${api.origin}: ${cause?.code ?? cause?.message ?? String(error)}`)
    }
    const text = await response.text()
    if (!response.ok) {
      const problem = safeJson(text) as { code?: string; detail?: string } | undefined
      throw new ApiRefusal(
        `the API answered ${response.status}${problem?.code ? ` ${problem.code}` : ''}${problem?.detail ? `: ${problem.detail}` : ''}`,
      )
    }
    return safeJson(text) as T
  }
}

const safeJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

async function listen(
  call: Call,
  options: { api: URL; target: URL; types: Set<string> | undefined },
  io: CliIo,
  stop: AbortSignal,
): Promise<number> {
  try {
    const me = await call<{ id: string; livemode: boolean }>('GET', '/me')
    let cursor = (await call<FeedPage>('GET', '/events?from=now')).next_cursor
    // The receiver checks signatures with this, as with an endpoint's own secret.
    const secret = newWebhookSecret()
    io.out(
      [
        `Ready: forwarding the ${me.livemode ? 'live' : 'test'} events of ${me.id} to ${options.target.href}`,
        `Webhook signing secret of this session (set it as your receiver's secret): ${secret}`,
        'Ctrl-C to stop.',
      ].join('\n'),
    )
    for (;;) {
      const page = await call<FeedPage>(
        'GET',
        `/events?${new URLSearchParams({ after: cursor, wait: String(WAIT_SECONDS), limit: '100' })}`,
      )
      for (const event of page.events) {
        if (options.types === undefined || options.types.has(event.type)) {
          io.out(await forward(event, options.target, secret, stop))
        }
      }
      cursor = page.next_cursor
    }
  } catch (error) {
    if (stop.aborted) {
      return 0
    }
    throw error
  }
}

/** POSTs one event as a delivery would send it; the line to print, whatever the outcome. */
async function forward(
  event: FeedPage['events'][number],
  target: URL,
  secret: string,
  stop: AbortSignal,
): Promise<string> {
  const body = eventPayload(JSON.stringify(event))
  const headers = {
    ...webhookHeaders({ eventId: event.id, timestamp: new Date(), body, secrets: [secret] }),
    'user-agent': WEBHOOK_USER_AGENT,
  }
  const started = performance.now()
  let outcome: string
  try {
    const response = await fetch(target, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.any([AbortSignal.timeout(FORWARD_TIMEOUT_MS), stop]),
    })
    await response.body?.cancel().catch(() => {})
    outcome = String(response.status)
  } catch (error) {
    const name = (error as { name?: string }).name
    const cause = (error as { cause?: { code?: string } }).cause
    outcome = name === 'TimeoutError' ? `timeout after ${FORWARD_TIMEOUT_MS / 1000} s` : (cause?.code ?? 'error')
  }
  const ms = Math.round(performance.now() - started)
  return `${new Date().toISOString()}  ${event.type}  ${event.id}  → ${outcome} (${ms} ms)`
}

/** What each event type needs done, as sample data of the test mode. */
async function trigger(call: Call, positionals: string[], io: CliIo): Promise<number> {
  const [type, ...rest] = positionals
  const types = ['contact.created', 'contact.updated', 'contact.deleted']
  if (type === undefined || !types.includes(type) || rest.length > 0) {
    throw new UsageError(`trigger takes one of ${types.join(', ')}${type ? ` (got "${positionals.join(' ')}")` : ''}`)
  }
  const me = await call<{ livemode: boolean }>('GET', '/me')
  if (me.livemode) {
    throw new ApiRefusal('trigger makes sample data, so it takes a test key (service_test_…): CONTACTS_API_KEY is live')
  }
  const suffix = Math.random().toString(36).slice(2, 10)
  const contact = await call<{ id: string }>('POST', '/contacts', {
    email: `sample-${suffix}@example.com`,
    first_name: 'Sample',
    last_name: 'Contact',
    tags: ['sample'],
  })
  if (type === 'contact.updated') {
    await call('PATCH', `/contacts/${contact.id}`, { first_name: 'Sampled' })
  }
  if (type === 'contact.deleted') {
    await call('DELETE', `/contacts/${contact.id}`)
  }
  io.out(`Triggered ${type} (test mode): contact ${contact.id}`)
  return 0
}
