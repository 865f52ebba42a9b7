// Email addresses, for contacts and for people signing in alike: what is accepted, and the form
// in which two addresses are compared (stored in `email_lower` columns).

// Pragmatic: one @, no spaces or quotes in the local part, a dotted domain of valid labels.
const EMAIL =
  /^[^\s@"(),:;<>[\]\\]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/

/** The address trimmed, or undefined when it is not a valid one. */
export function normalizeEmail(raw: string): string | undefined {
  const email = raw.trim()
  return EMAIL.test(email) && email.length <= 254 ? email : undefined
}

/** The form an email is compared in, and stored in `email_lower`: trimmed and lower-cased. */
export const emailKey = (email: string): string => email.trim().toLowerCase()
