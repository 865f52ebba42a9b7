// Where to go after signing in or up (`next`): only a path of this app, never another site. A
// link such as /sign-in?next=//evil.example would otherwise make the app an open redirect.

const ORIGIN = 'http://app.invalid'
/** The pages a person is sent back to: an invitation link, or a page of the signed-in app. */
const ALLOWED = /^\/(?:app(?:\/|$)|invitations\/)/
const NEXT_MAX = 2000

/** `value` when it is a same-origin relative path to one of the app's pages; undefined otherwise. */
export function safeNext(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > NEXT_MAX) {
    return undefined
  }
  // Browsers read "\" as "/" and drop tabs and newlines, so "/\evil" or "/\t/evil" is another host.
  if (hasControlOrBackslash(value) || !value.startsWith('/') || value.startsWith('//')) {
    return undefined
  }
  let parsed: URL
  try {
    parsed = new URL(value, ORIGIN)
  } catch {
    return undefined
  }
  if (parsed.origin !== ORIGIN || !ALLOWED.test(parsed.pathname)) {
    return undefined
  }
  return `${parsed.pathname}${parsed.search}`
}

function hasControlOrBackslash(value: string): boolean {
  for (const char of value) {
    const code = char.charCodeAt(0)
    if (char === '\\' || code < 0x20 || code === 0x7f) {
      return true
    }
  }
  return false
}

/** `path` with `?next=` (and the email to fill in) when there is somewhere to return to. */
export function withNext(path: string, next: string | undefined, email?: string): string {
  if (next === undefined) {
    return path
  }
  const query = new URLSearchParams({ next, ...(email ? { email } : {}) })
  return `${path}?${query.toString()}`
}
