// The key format's pure functions: the checked read of stored scopes.
import { describe, expect, it } from 'vitest'
import { parseStoredScopes } from './api-key.js'

describe('parseStoredScopes', () => {
  it('reads the lists the store writes', () => {
    expect(parseStoredScopes('["read","write"]')).toEqual(['read', 'write'])
    expect(parseStoredScopes('["read"]')).toEqual(['read'])
  })

  it.each(['"read"', '["admin"]', '[1]', '{"0":"read"}', 'null', 'not json'])('refuses %s', (text) => {
    expect(() => parseStoredScopes(text)).toThrow()
  })
})
