// contacts-api listen and trigger against a served app (docs/webhooks.md#receive-webhooks-on-your-laptop):
// events forwarded signed with the session's secret, a hanging receiver timed out without holding up
// the next event, Ctrl-C ending with 0, and one-line refusals for a bad key or an unreachable API.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { runCommand } from '@contacts-api/client'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import type { CliIo } from '../src/cli/io.js'
import { runListen } from '../src/cli/listen.js'
import { createTestHarness, type TestAccount, type TestHarness } from './harness.js'
import { createContact } from './helpers.js'

interface Received {
  path: string
  headers: IncomingHttpHeaders
  body: string
}

const lines = () => {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { out: (text) => out.push(...text.split('\n')), err: (text) => err.push(text) }
  return { out, err, io }
}

const until = async (check: () => boolean, ms = 15_000): Promise<void> => {
  for (const deadline = Date.now() + ms; !check(); ) {
    if (Date.now() > deadline) {
      throw new Error('timed out waiting')
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe('contacts-api listen and trigger', () => {
  let t: TestHarness
  let acme: TestAccount
  let api: string
  let receiver: Server
  let target: string
  const received: Received[] = []
  /** Requests to /hang get no answer: the forwarder's timeout must end them. */
  let hangs = 0

  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite' })
    acme = await t.createAccount('Listener')
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    api = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    receiver = createServer((request, response) => {
      let body = ''
      request.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8')
      })
      request.on('end', () => {
        received.push({ path: request.url ?? '', headers: request.headers, body })
        if (request.url === '/hang' && hangs++ === 0) {
          return
        }
        response.writeHead(204).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    target = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    receiver.closeAllConnections()
    receiver.close()
    await t.close()
  })

  it('forwards each new event signed with the secret it printed, one line each, and Ctrl-C ends it with 0', async () => {
    await createContact(t, acme, { first_name: 'Before' })
    const { out, err, io } = lines()
    const stop = new AbortController()
    const env = { CONTACTS_API_KEY: acme.key }
    const running = runListen('listen', ['--forward-to', `${target}/hooks`, '--api-url', api], env, io, stop.signal)
    await until(() => out.some((line) => line.includes('Ctrl-C')))
    const secret = /whsec_[A-Za-z0-9+/=]+/.exec(out.join('\n'))?.[0] ?? ''
    expect(out[0]).toBe(`Ready: forwarding the live events of ${acme.id} to ${target}/hooks`)

    const made = await createContact(t, acme, { first_name: 'Forwarded' })
    await until(() => received.some((r) => r.path === '/hooks'))
    const [delivery] = received.filter((r) => r.path === '/hooks')
    const payload = new Webhook(secret).verify(delivery?.body ?? '', delivery?.headers as Record<string, string>) as {
      type: string
      data: { object: { id: string } }
    }
    expect(payload.type).toBe('contact.created')
    expect(payload.data.object.id).toBe(made.id)
    expect(delivery?.headers['user-agent']).toMatch(/^ContactsAPI-Webhooks\//)
    expect(delivery?.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    // Only what came after the start: the contact made before is not forwarded.
    expect(received.filter((r) => r.path === '/hooks')).toHaveLength(1)
    await until(() => out.some((line) => line.includes('→')))
    expect(out.find((line) => line.includes('→'))).toMatch(/ {2}contact\.created {2}evt_\w+ {2}→ 204 \(\d+ ms\)$/)

    stop.abort()
    expect(await running).toBe(0)
    expect(err).toEqual([])
  })

  it('gives up on a receiver that hangs and goes on with the next event', { timeout: 30_000 }, async () => {
    const { out, io } = lines()
    const stop = new AbortController()
    const env = { CONTACTS_API_KEY: acme.key }
    const running = runListen(
      'listen',
      ['--forward-to', `${target}/hang`, '--api-url', api, '--events', 'contact.updated'],
      env,
      io,
      stop.signal,
    )
    await until(() => out.some((line) => line.includes('Ctrl-C')))
    const contact = await createContact(t, acme, { first_name: 'Slow' })
    for (const first_name of ['One', 'Two']) {
      await t.inject(acme, { method: 'PATCH', url: `/api/v1/contacts/${contact.id}`, payload: { first_name } })
    }
    await until(() => out.filter((line) => line.includes('→')).length === 2, 25_000)
    const outcomes = out.filter((line) => line.includes('→'))
    // --events: the create was not forwarded; the first update timed out, the second was answered.
    expect(outcomes.map((line) => line.split('  ')[1])).toEqual(['contact.updated', 'contact.updated'])
    expect(outcomes[0]).toMatch(/→ timeout after 10 s/)
    expect(outcomes[1]).toMatch(/→ 204/)
    stop.abort()
    expect(await running).toBe(0)
  })

  it('refuses a bad key, an unreachable API and missing arguments in one line, without a stack trace', async () => {
    const stop = new AbortController().signal
    const bad = lines()
    const env = { CONTACTS_API_KEY: `service_live_${'x'.repeat(32)}` }
    expect(await runListen('listen', ['--forward-to', `${target}/hooks`, '--api-url', api], env, bad.io, stop)).toBe(1)
    expect(bad.err).toEqual([expect.stringMatching(/^contacts-api: the API answered 401 invalid_api_key/)])

    const away = lines()
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const nowhere = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`
    await new Promise((resolve) => closed.close(resolve))
    const unreachable = ['--forward-to', `${target}/hooks`, '--api-url', nowhere]
    expect(await runListen('listen', unreachable, { CONTACTS_API_KEY: acme.key }, away.io, stop)).toBe(1)
    expect(away.err).toEqual([`contacts-api: cannot reach the API at ${nowhere}: ECONNREFUSED`])

    // A password in the forward URL is not printed; the credentials go as Basic authorization.
    const secretive = lines()
    const stopSoon = new AbortController()
    const withCredentials = target.replace('http://', 'http://me:hunter2@')
    const listening = runListen(
      'listen',
      ['--forward-to', `${withCredentials}/credentials`, '--api-url', api],
      { CONTACTS_API_KEY: acme.key },
      secretive.io,
      stopSoon.signal,
    )
    await until(() => secretive.out.some((line) => line.startsWith('Ready')))
    await createContact(t, acme, { first_name: 'Authorized' })
    await until(() => received.some((r) => r.path === '/credentials'))
    stopSoon.abort()
    expect(await listening).toBe(0)
    expect(secretive.out[0]).toBe(
      `Ready: forwarding the live events of ${acme.id} to ${target.replace('http://', 'http://me:***@')}/credentials`,
    )
    expect(received.find((r) => r.path === '/credentials')?.headers.authorization).toBe(
      `Basic ${Buffer.from('me:hunter2').toString('base64')}`,
    )

    // Nothing at all is a usage error; --help is the usage, exit 0.
    const help = lines()
    expect(await runCommand('contacts-api-client', ['--help'], {}, help.io, stop)).toBe(0)
    expect(help.out[0]).toMatch(/^Usage: contacts-api-client listen/)
    const nothing = lines()
    expect(await runCommand('contacts-api-client', [], {}, nothing.io, stop)).toBe(2)
    expect(nothing.err[0]).toMatch(/^contacts-api-client: listen or trigger\?/)

    for (const [argv, env, message] of [
      [['--api-url', api], { CONTACTS_API_KEY: acme.key }, 'listen needs --forward-to URL'],
      [['--forward-to', 'ftp://x'], { CONTACTS_API_KEY: acme.key }, '--forward-to must be an http(s) URL'],
      [['--forward-to', target, '--events', 'contact.merged'], { CONTACTS_API_KEY: acme.key }, '--events takes'],
      [['--forward-to', target], {}, 'listen needs the API key in CONTACTS_API_KEY'],
    ] as const) {
      const run = lines()
      expect(await runCli(['listen', ...argv], env, run.io)).toBe(2)
      expect(run.err[0]).toContain(message)
    }
  })

  it('trigger makes sample test-mode data that fires the event, and refuses a live key', async () => {
    const live = lines()
    const env = { CONTACTS_API_KEY: acme.key, API_URL: api }
    expect(await runCli(['trigger', 'contact.created'], env, live.io)).toBe(1)
    expect(live.err).toEqual([expect.stringContaining('takes a test key (service_test_…)')])

    const testKey = await t.createKey(acme, { test: true })
    for (const type of ['contact.created', 'contact.updated', 'contact.deleted']) {
      const run = lines()
      expect(await runCli(['trigger', type], { CONTACTS_API_KEY: testKey, API_URL: api }, run.io)).toBe(0)
      expect(run.out[0]).toMatch(new RegExp(`^Triggered ${type} \\(test mode\\): contact con_\\w+$`))
    }
    const feed = await fetch(`${api}/api/v1/events?limit=100`, { headers: { authorization: `Bearer ${testKey}` } })
    const types = ((await feed.json()) as { events: Array<{ type: string }> }).events.map((e) => e.type)
    expect(types.filter((type) => type === 'contact.created')).toHaveLength(3)
    expect(types).toContain('contact.updated')
    expect(types).toContain('contact.deleted')
    const wrong = lines()
    expect(await runCli(['trigger', 'contact.merged'], { CONTACTS_API_KEY: testKey, API_URL: api }, wrong.io)).toBe(2)
  })
})
