// A request example per operation, in curl and with the SDK, both derived from one description of
// the request; openapi-samples.test.ts runs every curl line and type-checks every SDK line.

import { createHash } from 'node:crypto'

/** The ids the samples use: those of the document's own examples. */
export const SAMPLE_IDS = {
  contact: 'con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2A',
  event: 'evt_01JD3Z8Q4R5S6T7V8W9X0Y1Z2C',
  endpoint: 'we_01JD3Z8Q4R5S6T7V8W9X0Y1Z2F',
  delivery: 'wd_01JD3Z8Q4R5S6T7V8W9X0Y1Z2G',
  request: 'req_01JD3Z8Q4R5S6T7V8W9X0Y1Z2H',
} as const

/** The sample's Idempotency-Key: one per operation, so pasting samples never reuses a key. */
export const sampleIdempotencyKey = (operationId: string): string =>
  createHash('sha256')
    .update(operationId)
    .digest('hex')
    .slice(0, 32)
    .replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-')

type Value = string | number | boolean | null | readonly Value[] | { readonly [key: string]: Value }

export interface Sample {
  /** Values of the path's `{name}` segments. */
  readonly path?: Readonly<Record<string, string>>
  readonly query?: Readonly<Record<string, string | number>>
  readonly body?: { readonly [key: string]: Value }
  /** The SDK call, given the arguments rendered as TypeScript (`args.body` is the body literal). */
  readonly sdk: (args: { body: string; query: string }) => string
}

const CONTACT_INPUT = {
  email: 'ada@example.com',
  first_name: 'Ada',
  last_name: 'Lovelace',
  phone: '+44 1632 960961',
  tags: ['vip'],
  custom_fields: { plan: 'pro' },
}
const ENDPOINT_INPUT = {
  // A name that resolves publicly (the API refuses one that does not); put your receiver's here.
  url: 'https://example.com/webhooks/contacts',
  events: ['contact.created', 'contact.updated'],
  description: 'CRM sync',
}
const contact = { id: SAMPLE_IDS.contact }
const endpoint = { id: SAMPLE_IDS.endpoint }
const delivery = { id: SAMPLE_IDS.endpoint, delivery_id: SAMPLE_IDS.delivery }
const q = (id: string) => `'${id}'`

/** Every operation of the API, by operationId (the test fails when one has no sample). */
export const SAMPLES: Readonly<Record<string, Sample>> = {
  getAccount: { sdk: () => 'const account = await client.me()' },
  listContacts: {
    query: { limit: 50, tag: 'vip' },
    sdk: ({ query }) =>
      `const page = await client.contacts.list(${query})\n` +
      `// or every page, fetched as the loop goes:\nfor await (const contact of client.contacts.all({ tag: 'vip' })) {\n  console.log(contact.id)\n}`,
  },
  createContact: {
    body: CONTACT_INPUT,
    sdk: ({ body }) => `const contact = await client.contacts.create(${body})`,
  },
  upsertContact: {
    body: { email: 'ada@example.com', company: 'Analytical Engines' },
    sdk: ({ body }) => `const { contact, created } = await client.contacts.upsert(${body})`,
  },
  batchContacts: {
    body: {
      operations: [
        { op: 'create', contact: { email: 'grace@example.com', first_name: 'Grace' } },
        { op: 'upsert', contact: { email: 'ada@example.com', tags: ['vip', 'speaker'] } },
        { op: 'update', id: SAMPLE_IDS.contact, contact: { company: 'Analytical Engines' } },
      ],
    },
    sdk: ({ body }) =>
      `const { results } = await client.contacts.batch(${body})\n` +
      `for (const result of results) {\n  if ('problem' in result) console.error(result.status, result.problem.detail)\n}`,
  },
  getContact: { path: contact, sdk: () => `const contact = await client.contacts.get(${q(contact.id)})` },
  updateContact: {
    path: contact,
    body: { job_title: 'Mathematician', custom_fields: { plan: null } },
    sdk: ({ body }) => `const contact = await client.contacts.update(${q(contact.id)}, ${body})`,
  },
  deleteContact: { path: contact, sdk: () => `await client.contacts.delete(${q(contact.id)})` },
  listEvents: {
    query: { limit: 100 },
    sdk: ({ query }) =>
      `const page = await client.events.list(${query})\n` +
      `// or from the start of the feed:\nfor await (const event of client.events.all()) {\n  console.log(event.type, event.data.object.id)\n}`,
  },
  getEvent: {
    path: { id: SAMPLE_IDS.event },
    sdk: () => `const event = await client.events.get(${q(SAMPLE_IDS.event)})`,
  },
  listRequestLogs: {
    query: { status: '4xx', limit: 20 },
    sdk: ({ query }) =>
      `const page = await client.requestLogs.list(${query})\n` +
      `// or every one, newest first:\nfor await (const entry of client.requestLogs.all({ status: '5xx' })) {\n  console.log(entry.id, entry.path, entry.error_code)\n}`,
  },
  getRequestLog: {
    path: { id: SAMPLE_IDS.request },
    sdk: () => `const entry = await client.requestLogs.get(${q(SAMPLE_IDS.request)})`,
  },
  listWebhookEndpoints: { sdk: () => 'const page = await client.webhookEndpoints.list()' },
  createWebhookEndpoint: {
    body: ENDPOINT_INPUT,
    sdk: ({ body }) =>
      `const endpoint = await client.webhookEndpoints.create(${body})\n// endpoint.secret (whsec_…) is shown this once: store it`,
  },
  getWebhookEndpoint: {
    path: endpoint,
    sdk: () => `const endpoint = await client.webhookEndpoints.get(${q(endpoint.id)})`,
  },
  updateWebhookEndpoint: {
    path: endpoint,
    body: { events: ['contact.deleted'] },
    sdk: ({ body }) => `const endpoint = await client.webhookEndpoints.update(${q(endpoint.id)}, ${body})`,
  },
  deleteWebhookEndpoint: { path: endpoint, sdk: () => `await client.webhookEndpoints.delete(${q(endpoint.id)})` },
  rollWebhookEndpointSecret: {
    path: endpoint,
    body: { expire_old_in_seconds: 3600 },
    sdk: ({ body }) => `const endpoint = await client.webhookEndpoints.rollSecret(${q(endpoint.id)}, ${body})`,
  },
  testWebhookEndpoint: {
    path: endpoint,
    body: {},
    sdk: () => `const delivery = await client.webhookEndpoints.test(${q(endpoint.id)})`,
  },
  listWebhookDeliveries: {
    path: endpoint,
    query: { status: 'failed' },
    sdk: ({ query }) => `const page = await client.webhookEndpoints.deliveries.list(${q(endpoint.id)}, ${query})`,
  },
  getWebhookDelivery: {
    path: delivery,
    sdk: () =>
      `const delivery = await client.webhookEndpoints.deliveries.get(${q(delivery.id)}, ${q(delivery.delivery_id)})`,
  },
  retryWebhookDelivery: {
    path: delivery,
    body: {},
    sdk: () =>
      `const delivery = await client.webhookEndpoints.deliveries.retry(${q(delivery.id)}, ${q(delivery.delivery_id)})`,
  },
  listWebhookAttempts: {
    path: delivery,
    sdk: () =>
      `const page = await client.webhookEndpoints.deliveries.attempts.list(${q(delivery.id)}, ${q(delivery.delivery_id)})`,
  },
  recoverWebhookDeliveries: {
    path: endpoint,
    body: { since: '2026-11-22T00:00:00Z' },
    sdk: ({ body }) => `const recovery = await client.webhookEndpoints.recover(${q(endpoint.id)}, ${body})`,
  },
  getLiveness: { sdk: () => "const { status } = await fetch(new URL('/healthz', baseUrl))" },
  getReadiness: { sdk: () => "const { status } = await fetch(new URL('/readyz', baseUrl))" },
}

/** A value as a TypeScript literal, on one line: `{ email: 'ada@example.com', tags: ['vip'] }`. */
export function tsLiteral(value: Value): string {
  if (Array.isArray(value)) {
    return `[${value.map(tsLiteral).join(', ')}]`
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).map(
      ([key, item]) => `${/^[A-Za-z_$][\w$]*$/.test(key) ? key : `'${key}'`}: ${tsLiteral(item as Value)}`,
    )
    return entries.length === 0 ? '{}' : `{ ${entries.join(', ')} }`
  }
  return typeof value === 'string' ? `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'` : String(value)
}

/** Text in single quotes for a POSIX shell. */
const shellQuoted = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`

/** The curl command of a sample: `$CONTACTS_API_KEY` holds the key. */
export function curlSample(
  operationId: string,
  method: string,
  path: string,
  apiUrl: string,
  sample: Sample,
  isPublic: boolean,
): string {
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => sample.path?.[name] ?? `{${name}}`)
  const query = sample.query
    ? `?${new URLSearchParams(Object.entries(sample.query).map(([k, v]): [string, string] => [k, String(v)]))}`
    : ''
  const lines = [
    `curl${method === 'GET' ? '' : ` -X ${method}`} ${shellQuoted(`${apiUrl.replace(/\/+$/, '')}${filled}${query}`)}`,
  ]
  if (!isPublic) {
    lines.push('-H "Authorization: Bearer $CONTACTS_API_KEY"')
  }
  if (method === 'POST') {
    // Any unique value per operation; a retry with the same one replays the first answer.
    lines.push(`-H 'Idempotency-Key: ${sampleIdempotencyKey(operationId)}'`)
  }
  if (sample.body) {
    lines.push("-H 'Content-Type: application/json'", `-d ${shellQuoted(JSON.stringify(sample.body))}`)
  }
  return lines.join(' \\\n  ')
}

/** The SDK lines of a sample, after the client's creation. */
export function sdkSample(sample: Sample, apiUrl: string, isPublic: boolean): string {
  const call = sample.sdk({
    body: sample.body ? tsLiteral(sample.body) : '{}',
    query: sample.query ? tsLiteral(sample.query) : '{}',
  })
  if (isPublic) {
    return `const baseUrl = '${apiUrl}'\n${call}`
  }
  return (
    "import { createClient } from '@contacts-api/client'\n\n" +
    `const client = createClient({ baseUrl: '${apiUrl}', apiKey: process.env.CONTACTS_API_KEY ?? '' })\n` +
    call
  )
}

interface DocumentOperation {
  operationId?: string
  description?: string
  security?: unknown[]
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const

/**
 * The document's paths, each operation with its samples: as `x-codeSamples` (read by Redoc, Scalar
 * and others) and at the end of its description, which Swagger UI at /docs renders as Markdown.
 * An operation with no sample throws, so a new route cannot ship without one.
 */
export function withCodeSamples<P extends Record<string, object | undefined>>(paths: P, apiUrl: string): P {
  const out: Record<string, object | undefined> = {}
  for (const [path, item] of Object.entries(paths)) {
    const operations: Record<string, unknown> = { ...item }
    for (const method of METHODS) {
      const operation = operations[method] as DocumentOperation | undefined
      if (!operation) {
        continue
      }
      const sample = SAMPLES[operation.operationId ?? '']
      if (!sample) {
        throw new Error(
          `openapi-samples.ts has no sample for ${method.toUpperCase()} ${path} (${operation.operationId})`,
        )
      }
      const isPublic = Array.isArray(operation.security) && operation.security.length === 0
      const curl = curlSample(operation.operationId ?? '', method.toUpperCase(), path, apiUrl, sample, isPublic)
      const sdk = sdkSample(sample, apiUrl, isPublic)
      operations[method] = {
        ...operation,
        description:
          `${operation.description ?? ''}\n\n**curl**\n\n\`\`\`sh\n${curl}\n\`\`\`\n\n**TypeScript SDK**\n\n\`\`\`ts\n${sdk}\n\`\`\``.trimStart(),
        'x-codeSamples': [
          { lang: 'Shell', label: 'curl', source: curl },
          { lang: 'TypeScript', label: isPublic ? 'TypeScript' : 'SDK', source: sdk },
        ],
      }
    }
    out[path] = operations
  }
  return out as P
}
