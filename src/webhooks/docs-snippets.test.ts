// The two verification examples of docs/webhooks.md, run as written against real signatures
// (signing.ts webhookHeaders): the node:crypto function imported, the standardwebhooks receiver
// started as a process and sent deliveries over HTTP.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { newWebhookSecret } from './secrets.js'
import { webhookHeaders } from './signing.js'

const GUIDE = fileURLToPath(new URL('../../docs/webhooks.md', import.meta.url))

/** The ```js block that follows `<!-- snippet: name -->` in the guide. */
async function snippet(name: string): Promise<string> {
  const guide = await readFile(GUIDE, 'utf8')
  const match = new RegExp(`<!-- snippet: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(guide)
  if (!match?.[1]) {
    throw new Error(`docs/webhooks.md has no snippet ${name}`)
  }
  return match[1]
}

const body = JSON.stringify({
  type: 'contact.created',
  timestamp: '2026-11-24T09:00:00.000Z',
  data: { object: { object: 'contact', id: 'con_01JDOCS', email: 'ada@example.com' } },
})

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'webhook-docs-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('docs/webhooks.md: verifying with node:crypto only', () => {
  type Verify = (secret: string, headers: Record<string, string>, body: string) => unknown
  let verifyDelivery: Verify

  beforeAll(async () => {
    const file = path.join(dir, 'verify.mjs')
    await writeFile(file, await snippet('verify-node-crypto'))
    ;({ verifyDelivery } = (await import(/* @vite-ignore */ pathToFileURL(file).href)) as { verifyDelivery: Verify })
  })

  it('accepts a real delivery and returns the parsed body', () => {
    const secret = newWebhookSecret()
    const headers = webhookHeaders({ eventId: 'evt_1', timestamp: new Date(), body, secrets: [secret] })
    expect(verifyDelivery(secret, headers, body)).toEqual(JSON.parse(body))
  })

  it('during a roll accepts either secret, and refuses a third', () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()]
    const headers = webhookHeaders({ eventId: 'evt_2', timestamp: new Date(), body, secrets: [current, previous] })
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2)
    expect(verifyDelivery(current, headers, body)).toEqual(JSON.parse(body))
    expect(verifyDelivery(previous, headers, body)).toEqual(JSON.parse(body))
    expect(() => verifyDelivery(newWebhookSecret(), headers, body)).toThrow('no matching signature')
  })

  it('refuses a changed body, a changed id, missing headers and a timestamp over 5 minutes away', () => {
    const secret = newWebhookSecret()
    const headers = webhookHeaders({ eventId: 'evt_3', timestamp: new Date(), body, secrets: [secret] })
    expect(() => verifyDelivery(secret, headers, body.replace('ada', 'eve'))).toThrow('no matching signature')
    expect(() => verifyDelivery(secret, { ...headers, 'webhook-id': 'evt_4' }, body)).toThrow('no matching signature')
    const { 'webhook-signature': _, ...unsigned } = headers
    expect(() => verifyDelivery(secret, unsigned, body)).toThrow('missing webhook headers')
    for (const offsetMs of [-6 * 60_000, 6 * 60_000]) {
      const at = new Date(Date.now() + offsetMs)
      const off = webhookHeaders({ eventId: 'evt_5', timestamp: at, body, secrets: [secret] })
      expect(() => verifyDelivery(secret, off, body)).toThrow('timestamp outside the tolerance')
    }
  })
})

describe('docs/webhooks.md: the standardwebhooks receiver', () => {
  const secret = newWebhookSecret()
  let receiver: ChildProcess
  let url: string
  let output = ''

  beforeAll(async () => {
    // The package as this project resolves it: the receiver runs from a temporary directory.
    const entry = pathToFileURL(createRequire(import.meta.url).resolve('standardwebhooks')).href
    const source = (await snippet('receiver-standardwebhooks')).replace("from 'standardwebhooks'", `from '${entry}'`)
    const file = path.join(dir, 'receiver.mjs')
    await writeFile(file, source)
    const port = await freePort()
    url = `http://127.0.0.1:${port}/hooks`
    receiver = spawn(process.execPath, [file], {
      env: { PATH: process.env.PATH, WEBHOOK_SECRET: secret, RECEIVER_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    receiver.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8')
    })
    await waitForListener(url)
  })
  afterAll(() => {
    receiver?.kill()
  })

  const post = (headers: Record<string, string>, sent = body) => fetch(url, { method: 'POST', headers, body: sent })

  it('answers 204 to a real delivery and handles it once, however often it comes', async () => {
    const headers = webhookHeaders({ eventId: 'evt_01JDOCS1', timestamp: new Date(), body, secrets: [secret] })
    expect((await post(headers)).status).toBe(204)
    const retry = webhookHeaders({ eventId: 'evt_01JDOCS1', timestamp: new Date(), body, secrets: [secret] })
    expect((await post(retry)).status).toBe(204)
    await expect.poll(() => output).toContain('evt_01JDOCS1 contact.created con_01JDOCS\n')
    expect(output.match(/evt_01JDOCS1/g)).toHaveLength(1)
  })

  it('accepts a delivery signed with a new and the old secret during a roll', async () => {
    const headers = webhookHeaders({
      eventId: 'evt_01JDOCS2',
      timestamp: new Date(),
      body,
      secrets: [newWebhookSecret(), secret],
    })
    expect((await post(headers)).status).toBe(204)
  })

  it('answers 400 to a changed body, another secret and a stale timestamp', async () => {
    const headers = webhookHeaders({ eventId: 'evt_01JDOCS3', timestamp: new Date(), body, secrets: [secret] })
    expect((await post(headers, body.replace('ada', 'eve'))).status).toBe(400)
    const forged = webhookHeaders({
      eventId: 'evt_01JDOCS3',
      timestamp: new Date(),
      body,
      secrets: [newWebhookSecret()],
    })
    expect((await post(forged)).status).toBe(400)
    const stale = webhookHeaders({
      eventId: 'evt_01JDOCS3',
      timestamp: new Date(Date.now() - 6 * 60_000),
      body,
      secrets: [secret],
    })
    expect((await post(stale)).status).toBe(400)
    expect(output).not.toContain('evt_01JDOCS3')
  })
})

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (address === null || typeof address === 'string') {
    throw new Error('no port')
  }
  return address.port
}

/** Until the receiver answers (any status): it has started listening. */
async function waitForListener(url: string): Promise<void> {
  const deadline = Date.now() + 10_000
  for (;;) {
    try {
      await fetch(url, { method: 'POST', body: '' })
      return
    } catch (error) {
      if (Date.now() > deadline) {
        throw error
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}
