// The delivery POST against local receivers. Every connection here goes to 127.0.0.1: names map to it
// through a static resolver, and public addresses appear only where they are refused before any dial.
import { once } from 'node:events'
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { createSecureContext } from 'node:tls'
import { afterEach, describe, expect, it } from 'vitest'
import { staticResolver } from '../../test/static-resolver.js'
import { EndpointConnections, EXCERPT_MAX_BYTES, postWebhook, type WebhookPost } from './webhook-post.js'

type Received = { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }
type Receiver = { port: number; received: Received[]; connections: number }

const servers: (http.Server | https.Server)[] = []

// A throwaway self-signed certificate for hooks.test (test-only key, valid until 2126): no client trusts it.
const SELF_SIGNED = {
  key: `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg3wCNES353Vk1KwZN
mdw3dIMSJoWy7GIIjZfjhIO4iRehRANCAAT6pcKyPWdYNztqfMw2C1bcc5IHhelD
6VLohr0KUL/jTsX6NmpPaserR6d8Se7p95EzpcOa9eR7RLEGKiatgsNW
-----END PRIVATE KEY-----`,
  cert: `-----BEGIN CERTIFICATE-----
MIIBlzCCAT6gAwIBAgIUAh8/1G/zZzf9WWfT8hHXuSGGXZswCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKaG9va3MudGVzdDAgFw0yNjExMjQwOTI2MjRaGA8yMTI2MTAz
MTA5MjYyNFowFTETMBEGA1UEAwwKaG9va3MudGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABPqlwrI9Z1g3O2p8zDYLVtxzkgeF6UPpUuiGvQpQv+NOxfo2ak9q
x6tHp3xJ7un3kTOlw5r15HtEsQYqJq2Cw1ajajBoMB0GA1UdDgQWBBRkJ5NRmUaD
bOZ3lweTIJNO0sfWWTAfBgNVHSMEGDAWgBRkJ5NRmUaDbOZ3lweTIJNO0sfWWTAP
BgNVHRMBAf8EBTADAQH/MBUGA1UdEQQOMAyCCmhvb2tzLnRlc3QwCgYIKoZIzj0E
AwIDRwAwRAIgCioK/oBAltFtIaMS8f/Ev5zw2RG4xk0b2c7AltXDcdUCID3xYuGM
AkdT9uTvF8uyMxUMdMbkXAmKvCxbq9spPv+P
-----END CERTIFICATE-----`,
}

/** A receiver on 127.0.0.1 that records every request and every connection, then answers with `respond`. */
async function startReceiver(
  respond: (request: http.IncomingMessage, response: http.ServerResponse) => void = (_request, response) =>
    response.end('ok'),
): Promise<Receiver> {
  const receiver: Receiver = { port: 0, received: [], connections: 0 }
  const server = http.createServer((request, response) => {
    let body = ''
    request.setEncoding('utf8')
    request.on('data', (chunk: string) => {
      body += chunk
    })
    request.on('end', () => {
      receiver.received.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body })
      respond(request, response)
    })
  })
  server.on('connection', () => {
    receiver.connections += 1
  })
  servers.push(server)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  receiver.port = (server.address() as AddressInfo).port
  return receiver
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    server.close()
    await once(server, 'close')
  }
})

const resolve = staticResolver({
  'hooks.test': ['127.0.0.1'],
  'rebind.example': ['127.0.0.1'],
  'mixed.example': ['93.184.215.14', '127.0.0.1'],
})

const body = JSON.stringify({ type: 'contact.created', data: { object: { id: 'con_1' } } })
const post = (overrides: Partial<WebhookPost> & Pick<WebhookPost, 'url'>) =>
  postWebhook({
    headers: { 'content-type': 'application/json', 'webhook-id': 'evt_1' },
    body,
    timeoutMs: 5000,
    allowPrivate: true,
    resolve,
    ...overrides,
  })

describe('postWebhook: what gets through', () => {
  it('POSTs the headers and body to a local receiver by name, with the name as Host', async () => {
    const receiver = await startReceiver()
    const result = await post({ url: `http://hooks.test:${receiver.port}/hooks?a=1` })
    expect(result).toMatchObject({ ok: true, statusCode: 200, excerpt: 'ok', error: null })
    expect(result.durationMs).toBeGreaterThanOrEqual(0)
    expect(receiver.received).toEqual([
      {
        method: 'POST',
        url: '/hooks?a=1',
        headers: expect.objectContaining({
          host: `hooks.test:${receiver.port}`,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'webhook-id': 'evt_1',
        }),
        body,
      },
    ])
  })

  it('resolves once and connects to the address it checked, not a later answer', async () => {
    const receiver = await startReceiver()
    // A resolver whose second answer differs: the receiver listens only on 127.0.0.1, so reaching it
    // proves the socket used the first (checked) answer and Node did not look the name up again.
    let calls = 0
    const flipping = async () => {
      calls += 1
      return [{ address: calls === 1 ? '127.0.0.1' : '127.0.0.2', family: 4 }]
    }
    const result = await post({ url: `http://flip.test:${receiver.port}/`, resolve: flipping })
    expect(result).toMatchObject({ ok: true, statusCode: 200 })
    expect(calls).toBe(1)
  })

  it('https: the name goes out as SNI to the checked address, and the certificate is verified', async () => {
    const serverNames: string[] = []
    const server = https.createServer({
      SNICallback: (servername, callback) => {
        serverNames.push(servername)
        callback(null, createSecureContext(SELF_SIGNED))
      },
    })
    let requests = 0
    server.on('request', () => {
      requests += 1
    })
    servers.push(server)
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    const result = await post({ url: `https://hooks.test:${port}/` })
    // Reaching the handshake at all proves the dial used the resolver's 127.0.0.1 (real DNS has no hooks.test).
    expect(serverNames).toEqual(['hooks.test'])
    expect(result).toMatchObject({ ok: false, statusCode: null, error: 'tls error (DEPTH_ZERO_SELF_SIGNED_CERT)' })
    expect(requests).toBe(0)
  })

  it('a non-2xx is a failure with its status and excerpt', async () => {
    const receiver = await startReceiver((_request, response) => {
      response.statusCode = 503
      response.end('try later')
    })
    expect(await post({ url: `http://127.0.0.1:${receiver.port}/` })).toMatchObject({
      ok: false,
      statusCode: 503,
      excerpt: 'try later',
      error: null,
    })
  })

  it(`keeps at most ${EXCERPT_MAX_BYTES} bytes of a large response, never half a character`, async () => {
    const receiver = await startReceiver((_request, response) => {
      // 'a' then two-byte characters: byte 1024 is the first half of one, which is left out.
      response.end(`a${'é'.repeat(100_000)}`)
    })
    const result = await post({ url: `http://127.0.0.1:${receiver.port}/` })
    expect(result).toMatchObject({ ok: true, statusCode: 200, error: null })
    expect(Buffer.byteLength(result.excerpt)).toBeLessThanOrEqual(EXCERPT_MAX_BYTES)
    expect(result.excerpt).toBe(`a${'é'.repeat(EXCERPT_MAX_BYTES / 2 - 1)}`)
  })
})

describe('postWebhook: what is refused', () => {
  it('a name that resolves to 127.0.0.1 is blocked without any connection', async () => {
    const receiver = await startReceiver()
    for (const url of [`https://rebind.example:${receiver.port}/`, `https://mixed.example:${receiver.port}/`]) {
      const result = await post({ url, allowPrivate: false })
      expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: '', error: 'blocked address 127.0.0.1' })
    }
    expect(await post({ url: `https://127.0.0.1:${receiver.port}/`, allowPrivate: false })).toMatchObject({
      ok: false,
      error: 'blocked address 127.0.0.1',
    })
    expect(receiver.connections).toBe(0)
  })

  it('http: without allowPrivate is refused before any connection', async () => {
    const receiver = await startReceiver()
    const result = await post({ url: `http://hooks.test:${receiver.port}/`, allowPrivate: false })
    expect(result).toMatchObject({ ok: false, error: 'invalid url: must be an https URL' })
    expect(receiver.connections).toBe(0)
  })

  it('a name that does not resolve is a dns failure', async () => {
    expect(await post({ url: 'http://unknown.test/' })).toMatchObject({ ok: false, error: 'dns failure' })
  })

  it('a redirect is a failure with its status, and is not followed', async () => {
    const target = await startReceiver()
    const receiver = await startReceiver((_request, response) => {
      response.writeHead(302, { location: `http://127.0.0.1:${target.port}/` })
      response.end()
    })
    const result = await post({ url: `http://127.0.0.1:${receiver.port}/` })
    expect(result).toMatchObject({ ok: false, statusCode: 302, error: 'redirect not followed' })
    expect(receiver.received).toHaveLength(1)
    expect(target.connections).toBe(0)
  })

  it('a receiver that never answers hits the timeout', async () => {
    const receiver = await startReceiver(() => {})
    const result = await post({ url: `http://127.0.0.1:${receiver.port}/`, timeoutMs: 300 })
    expect(result).toMatchObject({ ok: false, statusCode: null, error: 'timeout' })
    expect(result.durationMs).toBeGreaterThanOrEqual(290)
    expect(result.durationMs).toBeLessThan(2000)
  })

  it('a receiver that sends its status and then stalls hits the timeout, status kept', async () => {
    const receiver = await startReceiver((_request, response) => {
      response.writeHead(200)
      response.write('partial')
    })
    const result = await post({ url: `http://127.0.0.1:${receiver.port}/`, timeoutMs: 300 })
    expect(result).toMatchObject({ ok: false, statusCode: 200, excerpt: 'partial', error: 'timeout' })
  })

  it('a resolver that hangs hits the same timeout', async () => {
    const hanging = () => new Promise<never>(() => {})
    const result = await post({ url: 'http://slow-dns.test/', resolve: hanging, timeoutMs: 200 })
    expect(result).toMatchObject({ ok: false, statusCode: null, error: 'dns failure' })
    expect(result.durationMs).toBeLessThan(2000)
  })

  it('a closed port is connection refused', async () => {
    const receiver = await startReceiver()
    const port = receiver.port
    for (const server of servers.splice(0)) {
      server.close()
      await once(server, 'close')
    }
    expect(await post({ url: `http://127.0.0.1:${port}/` })).toMatchObject({
      ok: false,
      statusCode: null,
      error: 'connection refused',
    })
  })

  it('a receiver that drops the connection mid-answer is a failure', async () => {
    const receiver = await startReceiver((request) => {
      request.socket.destroy()
    })
    const result = await post({ url: `http://127.0.0.1:${receiver.port}/` })
    expect(result).toMatchObject({ ok: false, statusCode: null, error: 'connection reset' })
  })

  it('a header value with CR/LF is refused without a connection', async () => {
    const receiver = await startReceiver()
    const result = await post({ url: `http://127.0.0.1:${receiver.port}/`, headers: { 'x-evil': 'a\r\nhost: b' } })
    expect(result).toMatchObject({ ok: false, error: 'invalid request' })
    expect(receiver.connections).toBe(0)
  })
})

describe('postWebhook: keep-alive connections of one endpoint', () => {
  it('reuses the endpoint’s own connection, and never another endpoint’s', async () => {
    const receiver = await startReceiver()
    const url = `http://hooks.test:${receiver.port}/hooks`
    const first = new EndpointConnections(8)
    const second = new EndpointConnections(8)
    try {
      for (let i = 0; i < 3; i++) {
        expect(await post({ url, connections: first })).toMatchObject({ ok: true, statusCode: 200 })
      }
      expect(receiver.connections).toBe(1)
      expect(await post({ url, connections: second })).toMatchObject({ ok: true, statusCode: 200 })
      expect(receiver.connections).toBe(2)
    } finally {
      first.close()
      second.close()
    }
  })

  it('a new checked address gets a new connection, made through the check', async () => {
    const receiver = await startReceiver()
    const connections = new EndpointConnections(8)
    try {
      await post({ url: `http://hooks.test:${receiver.port}/`, connections })
      const moved = staticResolver({ 'hooks.test': ['127.0.0.1', '::1'] })
      await post({ url: `http://hooks.test:${receiver.port}/`, connections, resolve: moved })
      expect(receiver.connections).toBe(2)
      const blocked = await post({
        url: `http://hooks.test:${receiver.port}/`,
        connections,
        allowPrivate: false,
      })
      expect(blocked.ok).toBe(false)
      expect(receiver.connections).toBe(2)
      expect(receiver.received).toHaveLength(2)
    } finally {
      connections.close()
    }
  })

  it('a kept-alive connection reset on reuse is sent once more on a new one', async () => {
    const served = new WeakMap<object, number>()
    const receiver = await startReceiver((request, response) => {
      const count = (served.get(request.socket) ?? 0) + 1
      served.set(request.socket, count)
      if (count > 1) {
        request.socket.destroy() // as if it had closed the idle connection just as the request came
        return
      }
      response.end('ok')
    })
    const connections = new EndpointConnections(8)
    try {
      const url = `http://hooks.test:${receiver.port}/`
      expect(await post({ url, connections })).toMatchObject({ ok: true, statusCode: 200 })
      expect(await post({ url, connections })).toMatchObject({ ok: true, statusCode: 200 })
      expect(receiver.connections).toBe(2)
    } finally {
      connections.close()
    }
  })

  it('a reset on a new connection is not sent again', async () => {
    const receiver = await startReceiver((request) => request.socket.destroy())
    const connections = new EndpointConnections(8)
    try {
      const result = await post({ url: `http://hooks.test:${receiver.port}/`, connections })
      expect(result).toMatchObject({ ok: false, statusCode: null, error: 'connection reset' })
      expect(receiver.received).toHaveLength(1)
    } finally {
      connections.close()
    }
  })

  it('a response cut at the excerpt limit closes the connection', async () => {
    const receiver = await startReceiver((_request, response) => response.end('x'.repeat(EXCERPT_MAX_BYTES * 4)))
    const connections = new EndpointConnections(8)
    try {
      await post({ url: `http://hooks.test:${receiver.port}/`, connections })
      await post({ url: `http://hooks.test:${receiver.port}/`, connections })
      expect(receiver.connections).toBe(2)
    } finally {
      connections.close()
    }
  })
})
