// The contact's rules that the store, the CSV and the pages share: the email key, the stored rows,
// the checked parse of a stored body.
import { describe, expect, it } from 'vitest'
import { emailKey } from '../lib/email.js'
import { applyContactInput, emptyContact, parseStoredContact, toContactRows } from './contacts.js'

const NOW = '2026-11-24T09:00:00.000Z'
const ada = applyContactInput(
  emptyContact('con_01JD0000000000000000000000', NOW, true),
  { email: ' Ada@Example.com ', first_name: 'Ada', company: 'Analytical  Engines', tags: ['vip', 'math'] },
  NOW,
)

describe('emailKey', () => {
  it('is the email trimmed and lower-cased', () => {
    expect(emailKey('  Ada@Example.COM ')).toBe('ada@example.com')
  })
})

describe('toContactRows', () => {
  it('derives the row, the tag rows and the term rows from the contact', () => {
    const rows = toContactRows('acct_1', ada)
    expect(rows.contact).toEqual({
      account_id: 'acct_1',
      id: ada.id,
      email_lower: 'ada@example.com',
      search: '\nada@example.com\nada\nanalytical engines',
      created_at: NOW,
      updated_at: NOW,
      body: JSON.stringify(ada),
    })
    expect(rows.tags).toEqual([
      { account_id: 'acct_1', tag: 'vip', contact_id: ada.id },
      { account_id: 'acct_1', tag: 'math', contact_id: ada.id },
    ])
    expect(rows.terms.map((row) => row.term)).toEqual(['ada@example.com', 'ada', 'analytical engines'])
  })
})

describe('parseStoredContact', () => {
  it('returns a stored contact as it was', () => {
    expect(parseStoredContact(JSON.stringify(ada))).toEqual(ada)
  })

  it.each([
    ['a missing field', JSON.stringify({ ...ada, tags: undefined }), /\/tags/],
    ['a wrong type', JSON.stringify({ ...ada, email: 42 }), /\/email/],
    ['a bad timestamp', JSON.stringify({ ...ada, updated_at: 'yesterday' }), /\/updated_at/],
    ['not a contact at all', '[]', /not a valid contact/],
  ])('throws on %s, naming the problem', (_name, body, message) => {
    expect(() => parseStoredContact(body)).toThrow(message)
  })
})
