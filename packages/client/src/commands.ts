// `listen` forwards an account's events to a local URL as signed webhook deliveries, as
// `stripe listen` does (no endpoint, no public URL); `trigger` makes sample test-mode data to fire
// them. One implementation for this package's bin (`npx @contacts-api/client listen`) and the
// server's `contacts-api listen` (docs/webhooks.md#receive-webhooks-on-your-laptop).
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { type ContactsClient, createClient } from './client.js'
import { ApiError } from './errors.js'
import type { RetryInfo } from './fetch.js'
import type { Account, Event } from './types.js'
import { VERSION } from './version.js'
import { newWebhookSecret, webhookHeaders } from './webhooks.js'

type EventType = Event['type']

/** The list as given, once it names every event type of the API's schema (else a compile error). */
const everyType = <const T extends readonly EventType[]>(
  types: T & ([Exclude<EventType, T[number]>] extends [never] ? unknown : { missing: Exclude<EventType, T[number]> }),
): T => types

/** Every type of the events feed: a type the API adds and this list lacks fails to compile. */
const EVENT_TYPES = everyType(['contact.created', 'contact.updated', 'contact.deleted', 'api_key.exposed'])

const usage = (program: string) => `Usage: ${program} listen --forward-to URL [--events TYPES] [--api-url URL]
       ${program} trigger EVENT_TYPE [--api-url URL]

  listen    follows the account's events (from now on) and POSTs each to URL, signed per Standard
            Webhooks with a secret printed at start; one line per event. Ctrl-C stops it.
            --events: a comma-separated list of types (default: all): ${EVENT_TYPES.join(', ')}
  trigger   makes sample test-mode data that fires EVENT_TYPE (${TRIGGERED.join(', ')})

  The key comes from CONTACTS_API_KEY; the API from --api-url, else API_URL, else http://127.0.0.1:3000.`

/** What the commands print with: a line (or lines) at a time. */
export interface CommandIo {
  out(text: string): void
  err(text: string): void
}

/** The User-Agent of a forwarded event: the one the API's deliveries send. */
const FORWARD_USER_AGENT = `ContactsAPI-Webhooks/${VERSION}`
/** A forwarded event gets this long to be answered; then the next one goes on. */
const FORWARD_TIMEOUT_MS = 10_000
/** The event types trigger can fire with sample data. */
const TRIGGERED = ['contact.created', 'contact.updated', 'contact.deleted'] as const

class UsageError extends Error {}

/** The API's refusal, or its absence, said in one line. */
class Refusal extends Error {}

/**
 * Runs `listen` or `trigger` (argv's first word) with their arguments; resolves with the exit code:
 * 0 (listen: once `stop` aborts), 1 when the API refuses or cannot be reached, 2 for bad arguments.
 * `program` names the command in messages.
 */
export async function runCommand(
  program: string,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  io: CommandIo,
  stop: AbortSignal,
): Promise<number> {
  try {
    const [command, ...rest] = argv
    if (command === '--help' || command === '-h' || command === 'help') {
      io.out(usage(program))
      return 0
    }
    if (command === undefined) {
      throw new UsageError('listen or trigger?')
    }
    if (command !== 'listen' && command !== 'trigger') {
      throw new UsageError(`unknown command "${command}"`)
    }
    const { values, positionals } = parseCommandArguments(rest)
    if (values.help) {
      io.out(usage(program))
      return 0
    }
    const apiKey = env.CONTACTS_API_KEY?.trim()
    if (!apiKey) {
      throw new UsageError(`${command} needs the API key in CONTACTS_API_KEY`)
    }
    const given = values['api-url'] ?? env.API_URL ?? 'http://127.0.0.1:3000'
    const api = httpUrl(given.replace(/\/+$/, '').replace(/\/api\/v1$/, ''), '--api-url')
    // While the API is away, listen says so at each retry (the client's), then goes on where it was.
    const onRetry = ({ status, error, waitMs }: RetryInfo) =>
      io.err(
        `${program}: the API ${status ? `answered ${status}` : `is unreachable (${causeOf(error)})`}; retrying in ${(waitMs / 1000).toFixed(1)} s`,
      )
    const client = (maxRetries?: number) =>
      createClient({ baseUrl: api.href, apiKey, onRetry, ...(maxRetries === undefined ? {} : { maxRetries }) })
    // Refused at once when the API is not there or refuses the key; listen's retries then ride out a restart.
    const whoAmI = () => reachable(api, () => client(0).me({ signal: stop }))
    if (command === 'trigger') {
      const type = triggeredType(positionals)
      return await trigger(client(), type, (await whoAmI()).livemode, io)
    }
    if (positionals.length > 0) {
      throw new UsageError(`unexpected argument "${positionals[0]}"`)
    }
    const forwardTo = values['forward-to']
    if (forwardTo === undefined) {
      throw new UsageError('listen needs --forward-to URL, e.g. --forward-to http://localhost:4000/hooks')
    }
    const target = httpUrl(forwardTo, '--forward-to')
    const types = eventTypes(values.events)
    return await listen(client(), await whoAmI(), { target, types }, io, stop)
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${program}: ${error.message}\n\n${usage(program)}`)
      return 2
    }
    if (error instanceof ApiError) {
      io.err(`${program}: the API answered ${error.status} ${error.code}${error.detail ? `: ${error.detail}` : ''}`)
      return 1
    }
    if (error instanceof Refusal) {
      io.err(`${program}: ${error.message}`)
      return 1
    }
    throw error
  }
}

function parseCommandArguments(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      options: {
        'forward-to': { type: 'string' },
        events: { type: 'string' },
        'api-url': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    })
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

/** An http(s) URL given as `flag`, or a usage error naming it. */
function httpUrl(text: string, flag: string): URL {
  try {
    const url = new URL(text)
    if (url.protocol === 'http:' || url.protocol === 'https:') {
      return url
    }
  } catch {
    // Said below.
  }
  throw new UsageError(`${flag} must be an http(s) URL (got "${text}")`)
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

async function listen(
  client: ContactsClient,
  me: Account,
  options: { target: URL; types: Set<string> | undefined },
  io: CommandIo,
  stop: AbortSignal,
): Promise<number> {
  try {
    // The feed's end now, before saying Ready: nothing committed after the line is missed.
    const { next_cursor: now } = await client.events.list({ from: 'now' }, { signal: stop })
    const events = client.events.follow({ signal: stop, ...(now ? { after: now } : {}) })
    // The receiver checks signatures with this, as with an endpoint's own secret.
    const secret = newWebhookSecret()
    const receiver = withoutCredentials(options.target)
    io.out(
      [
        `Ready: forwarding the ${me.livemode ? 'live' : 'test'} events of ${me.id} to ${shown(options.target)}`,
        `Webhook signing secret of this session (set it as your receiver's secret): ${secret}`,
        'Ctrl-C to stop.',
      ].join('\n'),
    )
    for await (const event of events) {
      if (options.types === undefined || options.types.has(event.type)) {
        io.out(await forward(event, receiver, secret, stop))
      }
    }
    return 0
  } catch (error) {
    if (stop.aborted) {
      return 0
    }
    // The client's retries are spent: said in one line, as at start.
    throw error instanceof ApiError ? error : new Refusal(`lost the API: ${causeOf(error)}`)
  }
}

async function reachable<T>(api: URL, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if (error instanceof ApiError || (error as { name?: string }).name === 'AbortError') {
      throw error
    }
    throw new Refusal(`cannot reach the API at ${api.origin}: ${causeOf(error)}`)
  }
}

/** A network error's code (ECONNREFUSED), else its message. */
function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } } | undefined)?.cause
  return cause?.code ?? cause?.message ?? String(error)
}

/** Where events go: fetch refuses a URL with credentials, so they go as Basic authorization, as a browser sends them. */
interface Receiver {
  url: URL
  authorization?: string
}

/** The URL without its user and password, and those as a Basic authorization header. */
function withoutCredentials(target: URL): Receiver {
  if (target.username === '' && target.password === '') {
    return { url: target }
  }
  const url = new URL(target)
  url.username = ''
  url.password = ''
  const credentials = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`
  return { url, authorization: `Basic ${Buffer.from(credentials).toString('base64')}` }
}

/** The URL as printed: a password in it is not. */
function shown(url: URL): string {
  if (url.password === '') {
    return url.href
  }
  const copy = new URL(url)
  copy.password = '***'
  return copy.href
}

/** POSTs one event as a delivery would send it; the line to print, whatever the outcome. */
async function forward(
  event: Event,
  { url, authorization }: Receiver,
  secret: string,
  stop: AbortSignal,
): Promise<string> {
  // A delivery's body: the event's type, time and mode, then its data.
  const body = JSON.stringify({
    type: event.type,
    timestamp: event.created_at,
    livemode: event.livemode,
    data: event.data,
  })
  const headers = {
    ...webhookHeaders(secret, { id: event.id, timestamp: new Date(), body }),
    'content-type': 'application/json',
    'user-agent': FORWARD_USER_AGENT,
    // As a delivery sends without tracing: a fresh, unsampled W3C trace context.
    traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`,
  }
  const started = performance.now()
  let outcome: string
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: authorization ? { ...headers, authorization } : headers,
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

function triggeredType(positionals: readonly string[]): (typeof TRIGGERED)[number] {
  const [type, ...rest] = positionals
  const known = TRIGGERED.find((one) => one === type)
  if (!known || rest.length > 0) {
    throw new UsageError(
      `trigger takes one of ${TRIGGERED.join(', ')}${type ? ` (got "${positionals.join(' ')}")` : ''}`,
    )
  }
  return known
}

/** Makes sample test-mode data that fires the event type. */
async function trigger(
  client: ContactsClient,
  type: (typeof TRIGGERED)[number],
  livemode: boolean,
  io: CommandIo,
): Promise<number> {
  if (livemode) {
    throw new Refusal('trigger makes sample data, so it takes a test key (service_test_…): CONTACTS_API_KEY is live')
  }
  const suffix = Math.random().toString(36).slice(2, 10)
  const contact = await client.contacts.create({
    email: `sample-${suffix}@example.com`,
    first_name: 'Sample',
    last_name: 'Contact',
    tags: ['sample'],
  })
  if (type === 'contact.updated') {
    await client.contacts.update(contact.id, { first_name: 'Sampled' })
  }
  if (type === 'contact.deleted') {
    await client.contacts.delete(contact.id)
  }
  io.out(`Triggered ${type} (test mode): contact ${contact.id}`)
  return 0
}
