// Email addresses, for contacts and for people signing in alike: what is accepted, and the form
// in which two addresses are compared (stored in `email_lower` columns).

// RFC 5321's dot-atom mailbox, as JSON Schema's `format: email` reads it, with one widening: the local
// part may hold letters, marks and digits beyond ASCII (RFC 6531), which people have
// (docs/api-decisions.md, "Email addresses").
const ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\p{L}\\p{M}\\p{N}-]+"
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
const EMAIL = new RegExp(`^(?=[^@]{1,64}@)${ATOM}(?:\\.${ATOM})*@${LABEL}(?:\\.${LABEL})+$`, 'u')

/** The address trimmed, or undefined when it is not a valid one. */
export function normalizeEmail(raw: string): string | undefined {
  const email = raw.trim()
  return email.length <= 254 && EMAIL.test(email) ? email : undefined
}

/** The looser rule of emails stored before the one above, so an older stored contact still reads. */
export const looksLikeStoredEmail = (email: string): boolean => /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)

/** The form an email is compared in, and stored in `email_lower`: trimmed and lower-cased. */
export const emailKey = (email: string): string => email.trim().toLowerCase()
