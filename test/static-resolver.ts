// A DNS stand-in for webhook tests: names answer from a fixed table, so no test depends on (or leaks to) real DNS.
import { isIP } from 'node:net'
import type { Resolver } from '../src/webhooks/webhook-url.js'

/** Answers each name from `names`; an unknown name fails like NXDOMAIN. */
export function staticResolver(names: Record<string, readonly string[]>): Resolver {
  return async (hostname) => {
    const addresses = Object.hasOwn(names, hostname) ? names[hostname] : undefined
    if (addresses === undefined) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
    }
    return addresses.map((address) => ({ address, family: isIP(address) }))
  }
}
