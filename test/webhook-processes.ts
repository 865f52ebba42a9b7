// Helpers for the webhook tests through real processes (webhooks-crash, webhooks-workers): an
// account made with the CLI, as an operator would, and an endpoint made through the API, or
// directly against the same database when POST /webhook_endpoints is not on this branch yet.
import { randomBytes } from 'node:crypto'
import { expect } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { loadConfig } from '../src/config.js'
import { openDatabase } from '../src/db/database.js'
import { createEndpoint } from '../src/webhooks/endpoint-lifecycle.js'
import { webhookSecretKey } from '../src/webhooks/secrets.js'
import { defaultResolver } from '../src/webhooks/webhook-url.js'

export const testSecret = () => randomBytes(32).toString('hex')

/** `contacts-api accounts create --json`: the account's id and its API key. */
export async function createAccount(env: Record<string, string | undefined>, name: string) {
  const out: string[] = []
  const code = await runCli(
    ['accounts', 'create', '--name', name, '--json'],
    { ...process.env, ...env },
    { out: (text) => out.push(text), err: (text) => out.push(text) },
  )
  expect(code, out.join('\n')).toBe(0)
  const created = JSON.parse(out[0] ?? '{}') as { account: { id: string }; api_key: { secret: string } }
  return { accountId: created.account.id, key: created.api_key.secret }
}

/** An endpoint for every event, through POST /api/v1/webhook_endpoints when the route exists. */
export async function createWebhookEndpoint(
  env: Record<string, string | undefined>,
  base: string,
  account: { accountId: string; key: string },
  url: string,
): Promise<{ id: string; via: 'http' | 'createEndpoint' }> {
  const res = await fetch(`${base}/api/v1/webhook_endpoints`, {
    method: 'POST',
    headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url }),
  })
  if (res.status !== 404) {
    const body = (await res.json()) as { id: string }
    expect(res.status, JSON.stringify(body)).toBe(201)
    return { id: body.id, via: 'http' }
  }
  // The route is being added on another branch: the same action the route calls, on the same database.
  const config = loadConfig({ ...process.env, ...env })
  const database = openDatabase(config.database)
  try {
    const { endpoint } = await createEndpoint(
      {
        db: database.db,
        secretKey: webhookSecretKey(config.secret as string),
        allowPrivateUrls: true,
        resolve: defaultResolver,
      },
      account.accountId,
      { url },
      undefined,
      new Date(),
    )
    return { id: endpoint.id, via: 'createEndpoint' }
  } finally {
    await database.close()
  }
}

/** The deliveries' rows by status, read from the database the processes share. */
export async function deliveryStatuses(env: Record<string, string | undefined>): Promise<Record<string, number>> {
  const database = openDatabase(loadConfig({ ...process.env, ...env }).database)
  try {
    const rows = await database.db
      .selectFrom('webhook_deliveries')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy('status')
      .execute()
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]))
  } finally {
    await database.close()
  }
}

/** Polls `check` until it holds or `timeoutMs` passes; returns whether it held. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if (await check()) {
      return true
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return check()
}

export interface Receipt {
  webhookId: string
  type: string
  objectId: string
  body: string
  path: string
  at: number
}

export function receiptOf(delivery: {
  headers: Record<string, unknown>
  body: string
  path: string
  at: number
}): Receipt {
  const parsed = JSON.parse(delivery.body) as { type: string; data: { object: { id: string } } }
  return {
    webhookId: String(delivery.headers['webhook-id']),
    type: parsed.type,
    objectId: parsed.data.object.id,
    body: delivery.body,
    path: delivery.path,
    at: delivery.at,
  }
}
