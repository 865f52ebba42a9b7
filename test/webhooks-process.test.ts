// `serve` as a user runs it, with webhooks: the worker inside it delivers to a real receiver, the
// start warns about WEBHOOK_ALLOW_PRIVATE_URLS, and nothing it logs (at debug) holds a signing
// secret or a signature.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient, verifyWebhook } from '../packages/client/src/index.js'
import { runCli } from '../src/cli/cli.js'
import { cliCommand, freePort } from './processes.js'
import { startReceiver, type WebhookReceiver } from './webhook-receiver.js'

describe('webhooks from contacts-api serve in a real process', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-webhooks-'))
  let env: NodeJS.ProcessEnv
  let base = ''
  let server: ChildProcess
  let receiver: WebhookReceiver
  let logs = ''

  beforeAll(async () => {
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    env = {
      ...process.env,
      DATABASE_URL: `sqlite:${path.join(dir, 'contacts.sqlite')}`,
      PORT: String(port),
      LOG_LEVEL: 'debug',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '1',
    }
    receiver = await startReceiver()
    server = spawn(process.execPath, [...cliCommand(), 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    server.stdout?.on('data', (chunk) => {
      logs += chunk
    })
    await new Promise<void>((resolve, reject) => {
      let stderr = ''
      server.stderr?.on('data', (chunk) => {
        stderr += chunk
        if (stderr.includes('Contacts API listening')) {
          resolve()
        }
      })
      server.once('exit', (code) => reject(new Error(`serve exited early (${code}): ${stderr}`)))
    })
  })
  afterAll(async () => {
    server.kill('SIGKILL')
    await receiver.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('warns at start that private URLs are allowed', async () => {
    for (let i = 0; i < 100 && !logs.includes('WEBHOOK_ALLOW_PRIVATE_URLS'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const warning = logs
      .trim()
      .split('\n')
      .filter((line) => line.includes('WEBHOOK_ALLOW_PRIVATE_URLS'))
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .find((line) => line.msg.includes('WEBHOOK_ALLOW_PRIVATE_URLS'))
    expect(warning?.level).toBe(40) // pino's warn
  })

  it('delivers signed events, retries a failure, and never logs a secret or a signature', async () => {
    const out: string[] = []
    expect(
      await runCli(['accounts', 'create', '--name', 'Acme', '--json'], env, { out: (t) => out.push(t), err: () => {} }),
    ).toBe(0)
    const key = JSON.parse(out[0] ?? '{}').api_key.secret as string
    // As a client developer would: the SDK (packages/client) for the API and for verifying deliveries.
    const client = createClient({ baseUrl: base, apiKey: key })
    const endpoint = await client.webhookEndpoints.create({ url: `${receiver.url}/hooks` })
    const rolled = await client.webhookEndpoints.rollSecret(endpoint.id)
    // The first attempt fails, the retry (1 s later) succeeds.
    let calls = 0
    receiver.answer(() => (++calls === 1 ? { status: 500, body: 'try again' } : { status: 200 }))
    await client.contacts.create({ email: 'ada@example.com' })
    const [first, second] = await receiver.waitFor(2, 10_000)
    for (const delivery of [first, second]) {
      const headers = delivery?.headers as Record<string, string>
      // Both secrets sign during the roll's overlap: either verifies.
      expect(verifyWebhook(rolled.secret, delivery?.body ?? '', headers)).toMatchObject({
        type: 'contact.created',
        data: { object: { email: 'ada@example.com' } },
      })
      expect(verifyWebhook(endpoint.secret, delivery?.body ?? '', headers)).toMatchObject({
        type: 'contact.created',
      })
    }
    expect(second?.headers['webhook-id']).toBe(first?.headers['webhook-id'])
    // The receiver has the retry before the worker has recorded its outcome: wait for the record.
    let deliveries: Array<{ status: string; attempts: number }> = []
    for (let i = 0; i < 100; i++) {
      deliveries = (await client.webhookEndpoints.deliveries.list(endpoint.id)).deliveries
      if (deliveries[0]?.status === 'succeeded') {
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(deliveries).toMatchObject([{ status: 'succeeded', attempts: 2 }])

    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(logs.length).toBeGreaterThan(0)
    for (const secret of [endpoint.secret, rolled.secret]) {
      expect(logs).not.toContain(secret.slice('whsec_'.length, 20))
    }
    for (const delivery of [first, second]) {
      for (const signature of String(delivery?.headers['webhook-signature']).split(' ')) {
        expect(logs).not.toContain(signature.slice(3, 23))
      }
    }
  })
})
