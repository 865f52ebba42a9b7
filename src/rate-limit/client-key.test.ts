import { describe, expect, it } from 'vitest'
import { clientKey } from './client-key.js'

describe('clientKey', () => {
  it.each([
    ['192.0.2.1', '192.0.2.1'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:DB8:0001:0002:ffff::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1:2:3:4', 'fe80:0:0:0::/64'],
  ])('%s counts as %s', (ip, key) => {
    expect(clientKey(ip)).toBe(key)
  })

  it('two addresses in one /64 share a key; the next /64 does not', () => {
    expect(clientKey('2001:db8:a:b::1')).toBe(clientKey('2001:db8:a:b:ffff:ffff:ffff:ffff'))
    expect(clientKey('2001:db8:a:c::1')).not.toBe(clientKey('2001:db8:a:b::1'))
  })
})
