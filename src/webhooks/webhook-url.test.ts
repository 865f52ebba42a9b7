// The SSRF guard at creation: which addresses and URLs an endpoint may point to. No test here opens a connection.
import { isIP } from 'node:net'
import { describe, expect, it } from 'vitest'
import { staticResolver } from '../../test/static-resolver.js'
import { checkWebhookUrl, classifyAddress, isPublicAddress, resolveWebhookTarget } from './webhook-url.js'

const PUBLIC_V4 = '93.184.215.14'
const PUBLIC_V6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c'

const resolve = staticResolver({
  localhost: ['127.0.0.1', '::1'],
  'public.example': [PUBLIC_V4],
  'dual.example': [PUBLIC_V4, PUBLIC_V6],
  'rebind.example': ['127.0.0.1'],
  'mixed.example': [PUBLIC_V4, '10.0.0.1'],
  'mixed6.example': [PUBLIC_V6, 'fd00::1'],
  'metadata.example': ['169.254.169.254'],
  'mapped.example': ['::ffff:10.0.0.1'],
  'garbage.example': ['not-an-address'],
  'empty.example': [],
})

const check = (url: string, allowPrivate = false) => checkWebhookUrl(url, { allowPrivate, resolve })

// Every special-purpose form, with the ipaddr.js range (or ours) it falls in.
const REFUSED: [string, string][] = [
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.0.0.1', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['169.254.169.254', 'linkLocal'],
  ['100.64.0.1', 'carrierGradeNat'],
  ['100.127.255.254', 'carrierGradeNat'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['255.255.255.255', 'broadcast'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['192.0.0.8', 'reserved'],
  ['192.0.2.1', 'reserved'],
  ['198.51.100.1', 'reserved'],
  ['203.0.113.1', 'reserved'],
  ['198.18.0.1', 'reserved'],
  ['240.0.0.1', 'reserved'],
  ['::1', 'loopback'],
  ['::', 'unspecified'],
  ['fe80::1', 'linkLocal'],
  ['fc00::1', 'uniqueLocal'],
  ['fd00:ec2::254', 'uniqueLocal'],
  ['fec0::1', 'deprecatedSiteLocal'],
  ['ff02::1', 'multicast'],
  ['2001:db8::1', 'reserved'],
  ['2001:2::1', 'benchmarking'],
  ['100::1', 'discard'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.0.0.1', 'private'],
  ['::ffff:169.254.169.254', 'linkLocal'],
  ['::ffff:0:7f00:1', 'rfc6145'],
  ['::7f00:1', 'ipv4Compatible'],
  ['::a00:1', 'ipv4Compatible'],
  ['::808:808', 'ipv4Compatible'],
  ['64:ff9b::127.0.0.1', 'rfc6052'],
  ['64:ff9b::a00:1', 'rfc6052'],
  ['64:ff9b::808:808', 'rfc6052'],
  ['64:ff9b:1::a00:1', 'rfc6052'],
  ['2002:7f00:1::', '6to4'],
  ['2002:a00:1::1', '6to4'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
]

const ACCEPTED = [
  PUBLIC_V4,
  '8.8.8.8',
  '1.1.1.1',
  '172.15.255.255',
  '172.32.0.1',
  '100.63.255.255',
  '100.128.0.1',
  '::ffff:93.184.215.14',
  PUBLIC_V6,
  '2606:4700::1111',
  '2001:4860:4860::8888',
]

describe('classifyAddress', () => {
  it.each(REFUSED)('%s is %s, not public', (address, range) => {
    expect(classifyAddress(address)).toBe(range)
    expect(isPublicAddress(address)).toBe(false)
  })

  it.each(ACCEPTED)('%s is public unicast', (address) => {
    expect(classifyAddress(address)).toBe('unicast')
    expect(isPublicAddress(address)).toBe(true)
  })

  // ipaddr.js alone would read these loosely (0x7f000001 as 127.0.0.1); only canonical forms are addresses.
  it.each(['', 'example.com', '0x7f000001', '127.1', '1.2.3.4.5', '::g'])('%j is not an address', (text) => {
    expect(classifyAddress(text)).toBe('invalid')
  })
})

describe('checkWebhookUrl', () => {
  it('accepts an https URL to a public address and returns it normalised', async () => {
    const result = await check('https://PUBLIC.example:443/hooks?x=1')
    expect(result.ok).toBe(true)
    expect(result.ok && result.url.href).toBe('https://public.example/hooks?x=1')
  })

  it.each([
    `https://${PUBLIC_V4}/`,
    `https://[${PUBLIC_V6}]/hooks`,
    'https://[::ffff:93.184.215.14]/',
    'https://dual.example:8443/',
  ])('accepts %s', async (url) => {
    expect(await check(url)).toMatchObject({ ok: true })
  })

  it.each([
    'https://public.example:22/',
    'https://public.example:5432/',
    'https://public.example:6379/',
    'https://public.example:0/',
    'https://public.example:80/',
  ])('refuses %s: a port outside the list', async (url) => {
    expect(await check(url)).toEqual({ ok: false, reason: 'must use port 443 or one of 8443, 8080, 8000, 9443' })
  })

  it('allows any port with WEBHOOK_ALLOW_PRIVATE_URLS (local receivers listen anywhere)', async () => {
    expect(await checkWebhookUrl('http://127.0.0.1:5432/', { allowPrivate: true })).toMatchObject({ ok: true })
  })

  it.each(REFUSED)('refuses the literal %s (%s)', async (address) => {
    const host = isIP(address) === 6 ? `[${address}]` : address
    const result = await check(`https://${host}/hooks`)
    expect(result).toMatchObject({ ok: false, reason: expect.stringMatching(/^must point to a public address \(/) })
  })

  // WHATWG URL turns each spelling into 127.0.0.1 (or ::ffff:7f00:1 / ::7f00:1) before the address check.
  it.each([
    'https://2130706433/',
    'https://0x7f000001/',
    'https://0x7f.1/',
    'https://0177.0.0.1/',
    'https://017700000001/',
    'https://127.1/',
    'https://127.0.0.1./',
    'https://[::ffff:127.0.0.1]/',
    'https://[0:0:0:0:0:ffff:7f00:1]/',
    'https://[::127.0.0.1]/',
  ])('refuses %s, a loopback address in disguise', async (url) => {
    const result = await check(url)
    expect(result).toMatchObject({ ok: false, reason: expect.stringMatching(/loopback|IPv4-compatible/) })
  })

  // Refused before any lookup, each with the reason the API shows after "url ".
  const REFUSED_URLS: Record<string, string[]> = {
    'must be an https URL': [
      'http://2130706433/',
      'http://127.0.0.1/',
      'http://[::1]/',
      'http://public.example/hooks',
      'ftp://public.example/',
      'file:///etc/passwd',
      'gopher://public.example/',
      'javascript:alert(1)',
    ],
    'must be an absolute https URL': [
      '',
      'public.example/hooks',
      '/hooks',
      'https://',
      'https://exa mple.com/',
      'https://[::1/',
    ],
    'must not contain a username or password': [
      'https://user:pass@public.example/',
      'https://user@public.example/',
      'https://:pass@public.example/',
    ],
    // By name, whatever DNS says (the test resolver does answer for localhost).
    'must not point to localhost or a private network name': [
      'https://localhost/',
      'https://LOCALHOST./',
      'https://api.localhost/',
      'https://metadata.google.internal/',
      'https://printer.local/',
      'https://nas.home.arpa/',
    ],
  }
  it.each(Object.entries(REFUSED_URLS).flatMap(([reason, urls]) => urls.map((url) => [url, reason])))(
    'refuses %j: %s',
    async (url, reason) => {
      expect(await check(url)).toEqual({ ok: false, reason })
    },
  )

  it.each([
    ['https://rebind.example/', '127.0.0.1'],
    ['https://metadata.example/latest/meta-data/', '169.254.169.254'],
    ['https://mapped.example/', '10.0.0.1'],
    ['https://mixed.example/', '10.0.0.1'],
    ['https://mixed6.example/', 'fd00::1'],
  ])('refuses %s, which resolves to a non-public address, without saying which', async (url, address) => {
    const result = await check(url)
    expect(result).toEqual({ ok: false, reason: `host ${new URL(url).hostname} must resolve only to public addresses` })
    expect(JSON.stringify(result)).not.toContain(address)
  })

  it.each(['https://unknown.example/', 'https://empty.example/', 'https://garbage.example/'])(
    'refuses %s, which does not resolve',
    async (url) => {
      expect(await check(url)).toEqual({ ok: false, reason: `host ${new URL(url).hostname} does not resolve` })
    },
  )

  it('with allowPrivate (development): http: and private targets pass, the other rules hold', async () => {
    for (const url of [
      'http://127.0.0.1:3000/hooks',
      'http://localhost:3000/',
      'https://rebind.example/',
      'http://[::1]/',
    ]) {
      expect(await check(url, true)).toMatchObject({ ok: true })
    }
    expect(await check('https://user:pass@127.0.0.1/', true)).toMatchObject({ ok: false })
    expect(await check('ftp://127.0.0.1/', true)).toMatchObject({ ok: false })
    expect(await check('https://unknown.example/', true)).toMatchObject({ ok: false })
  })
})

describe('the address a delivery connects to', () => {
  it('is the checked address in its plain form: an IPv4-mapped answer is dialled as IPv4', async () => {
    const mapped = staticResolver({ 'mapped.test': ['::ffff:93.184.215.14'] })
    const result = await resolveWebhookTarget(
      'https://mapped.test/hooks',
      { allowPrivate: false, resolve: mapped },
      1000,
    )
    expect(result).toMatchObject({ ok: true, target: { addresses: [{ address: '93.184.215.14', family: 4 }] } })
  })
})
