// CSRF's second line: a state-changing web request must come from the app's own pages, as the
// browser tells by `Sec-Fetch-Site` and `Origin`. The form's token stays the first line.
import type { IncomingHttpHeaders } from 'node:http'

/** Methods that change nothing; every other one is checked. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS'])

/**
 * Why a request is refused as cross-origin, or undefined when it may go on (the rules and their
 * reasons: docs/web-security.md, "Forged requests"). `ownOrigins`: APP_URL's origin and the one the
 * request was addressed to, so a direct visit to an instance works too.
 */
export function crossOriginReason(headers: IncomingHttpHeaders, ownOrigins: readonly string[]): string | undefined {
  const site = headerValue(headers['sec-fetch-site'])?.toLowerCase()
  if (site === 'cross-site' || site === 'same-site') {
    return `Sec-Fetch-Site: ${site}`
  }
  const origin = headerValue(headers.origin)
  if (origin !== undefined && !ownOrigins.includes(origin.toLowerCase())) {
    return 'Origin is not this application'
  }
  return undefined
}

/** The origin (`scheme://host[:port]`, lowercase, default port left out) of a URL as browsers send it; undefined if it is none. */
export function originOf(url: string): string | undefined {
  try {
    const origin = new URL(url).origin
    return origin === 'null' ? undefined : origin.toLowerCase()
  } catch {
    return undefined
  }
}

const headerValue = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value.join(',') : value
