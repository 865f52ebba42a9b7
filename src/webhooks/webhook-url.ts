// Webhook URL rules (SSRF guard): https only, no credentials, and every address the host resolves to is public.
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

export type ResolvedAddress = { address: string; family: number }
/** Resolves a host name to every address (A and AAAA). Injectable so tests never touch real DNS. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>

export type WebhookUrlOptions = {
  /** WEBHOOK_ALLOW_PRIVATE_URLS: development and tests only; allows http: and non-public addresses. */
  allowPrivate: boolean
  resolve?: Resolver
}

/** A URL that passed every rule, and the checked addresses to connect to (canonical, IPv4-mapped unwrapped). */
export type WebhookTarget = { url: URL; hostname: string; addresses: ResolvedAddress[] }

export type WebhookTargetFailure =
  | { kind: 'invalid'; reason: string }
  | { kind: 'dns'; reason: string }
  | { kind: 'blocked'; reason: string; address: string }

export type WebhookUrlCheck = { ok: true; url: URL } | { ok: false; reason: string }

export const defaultResolver: Resolver = (hostname) => lookup(hostname, { all: true })

/** The ports a webhook URL may name (WHATWG parsing drops :443 from https URLs, so none is 443). */
export const WEBHOOK_PORTS: readonly number[] = [443, 8443, 8080, 8000, 9443]

// A name lookup at creation must not hold a request for getaddrinfo's full retry cycle.
const CREATE_RESOLVE_TIMEOUT_MS = 5000

// Names that never reach the public internet, whatever a resolver answers: localhost (RFC 6761), mDNS
// (.local), home networks (.home.arpa) and ICANN's private-use .internal (GCP's metadata.google.internal).
const PRIVATE_NAME = /(^|\.)(localhost|local|internal|home\.arpa)$/

// ipaddr.js names no range for IPv4-compatible IPv6 (::a.b.c.d, deprecated by RFC 4291) and calls it unicast;
// nothing public uses it, and some stacks route it to the embedded IPv4 address (::127.0.0.1 → loopback).
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96')

const RANGE_DESCRIPTIONS: Record<string, string> = {
  unspecified: 'an unspecified address',
  broadcast: 'a broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address',
  private: 'a private network address',
  uniqueLocal: 'a unique local (private) address',
  reserved: 'a reserved or documentation address',
  benchmarking: 'a benchmarking address',
  '6to4': 'a 6to4 address',
  teredo: 'a Teredo address',
  rfc6052: 'a NAT64 address',
  rfc6145: 'an IPv4-translated address',
  ipv4Compatible: 'an IPv4-compatible IPv6 address',
}

/**
 * The ipaddr.js range name of an address (`unicast` for a public one), after unwrapping IPv4-mapped IPv6
 * (::ffff:10.0.0.1 is 10.0.0.1, `private`). Anything that does not parse as an IP address is `invalid`.
 */
export function classifyAddress(address: string): string {
  if (isIP(address) === 0) {
    return 'invalid'
  }
  const ip = ipaddr.process(address)
  const range = ip.range()
  if (range === 'unicast' && ip.kind() === 'ipv6' && ip.match(IPV4_COMPATIBLE)) {
    return 'ipv4Compatible'
  }
  return range
}

/**
 * Only `unicast` is public. Every other name ipaddr.js knows (loopback, private, linkLocal, 6to4, teredo,
 * rfc6052 …) is refused whole: a translation prefix may embed any IPv4 address, including a private one.
 */
export const isPublicAddress = (address: string): boolean => classifyAddress(address) === 'unicast'

/** For creating or changing an endpoint: the rules, with reasons that read after "url " in a 400 message. */
export async function checkWebhookUrl(raw: string, options: WebhookUrlOptions): Promise<WebhookUrlCheck> {
  const result = await resolveWebhookTarget(raw, options, CREATE_RESOLVE_TIMEOUT_MS)
  return result.ok ? { ok: true, url: result.target.url } : { ok: false, reason: result.failure.reason }
}

/**
 * Parses the URL, applies the rules, resolves the host once and checks every address. The delivery connects
 * only to `target.addresses`, so a name cannot resolve to a public address here and a private one at dial time.
 */
export async function resolveWebhookTarget(
  raw: string | URL,
  { allowPrivate, resolve = defaultResolver }: WebhookUrlOptions,
  timeoutMs: number,
): Promise<{ ok: true; target: WebhookTarget } | { ok: false; failure: WebhookTargetFailure }> {
  const invalid = (reason: string) => ({ ok: false as const, failure: { kind: 'invalid' as const, reason } })
  let url: URL
  try {
    // WHATWG parsing first: 2130706433, 0x7f.1, 0177.0.0.1 and 127.1 all become 127.0.0.1, and
    // [::ffff:127.0.0.1] becomes [::ffff:7f00:1], so the address rules see one canonical form.
    url = new URL(raw)
  } catch {
    return invalid('must be an absolute https URL')
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return invalid('must be an https URL')
  }
  // Credentials in a URL end up in logs and the UI, and the receiver cannot tell them from a secret.
  if (url.username !== '' || url.password !== '') {
    return invalid('must not contain a username or password')
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1')
  // Every trailing dot: `localhost..` must meet the name rule as `localhost` does.
  const name = hostname.replace(/\.+$/, '')

  const literal = isIP(hostname) !== 0
  let addresses: ResolvedAddress[]
  if (literal) {
    addresses = [{ address: hostname, family: isIP(hostname) }]
  } else {
    if (!allowPrivate && PRIVATE_NAME.test(name)) {
      return invalid('must not point to localhost or a private network name')
    }
    const resolved = await withTimeout(resolveQuietly(resolve, hostname), timeoutMs)
    if (resolved === 'timeout') {
      return { ok: false, failure: { kind: 'dns', reason: `host ${name} did not resolve in time` } }
    }
    if (resolved.length === 0) {
      return { ok: false, failure: { kind: 'dns', reason: `host ${name} does not resolve` } }
    }
    addresses = resolved
  }

  const checked: ResolvedAddress[] = []
  for (const { address } of addresses) {
    const range = classifyAddress(address)
    if (range === 'invalid') {
      return { ok: false, failure: { kind: 'dns', reason: `host ${name} does not resolve` } }
    }
    // Every address must pass, not just the first: a client (or Node's happy-eyeballs) may pick any of them.
    if (range !== 'unicast' && !allowPrivate) {
      const description = RANGE_DESCRIPTIONS[range] ?? 'a non-public address'
      // For a name, the address stays unsaid: echoing what our resolver answers would let tenants map
      // internal DNS through the API's error messages.
      const reason = literal
        ? `must point to a public address (${hostname} is ${description})`
        : `host ${name} must resolve only to public addresses`
      return { ok: false, failure: { kind: 'blocked', reason, address } }
    }
    const ip = ipaddr.process(address)
    checked.push({ address: ip.toString(), family: ip.kind() === 'ipv4' ? 4 : 6 })
  }
  // A port outside the list could aim a delivery at a database or mail server on a public host
  // (SSH 22, PostgreSQL 5432, Redis 6379, …): the HTTPS ports receivers use, nothing else.
  if (!allowPrivate && url.port !== '' && !WEBHOOK_PORTS.includes(Number(url.port))) {
    return invalid(`must use port 443 or one of ${WEBHOOK_PORTS.filter((p) => p !== 443).join(', ')}`)
  }
  return { ok: true, target: { url, hostname, addresses: checked } }
}

// A resolver that throws (NXDOMAIN, SERVFAIL, bad input) is a name that does not resolve.
async function resolveQuietly(resolve: Resolver, hostname: string): Promise<ResolvedAddress[]> {
  try {
    return await resolve(hostname)
  } catch {
    return []
  }
}

/** Races a promise against a timer; the timer never keeps the process alive and is always cleared. */
async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<'timeout'>((settle) => {
    timer = setTimeout(() => settle('timeout'), Math.max(0, ms))
    timer.unref()
  })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}
