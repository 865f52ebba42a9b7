// The reference page's samples work: every curl line, run by a shell against a real server, gets a
// 2xx; every SDK line type-checks against the SDK's source. A wrong path, a misquoted body or a
// renamed SDK method fails here.
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestAccount, type TestHarness } from '../../test/harness.js'
import { staticResolver } from '../../test/static-resolver.js'
import { SAMPLE_IDS, SAMPLES, sampleIdempotencyKey } from './openapi-samples.js'

const run = promisify(execFile)

interface CodeSample {
  lang: string
  label: string
  source: string
}
type Operations = Record<string, Record<string, { operationId: string; 'x-codeSamples'?: CodeSample[] }>>

/** Each operation's samples, by operationId, as the served document has them. */
function samplesOf(document: { paths: Operations }): Map<string, { curl: string; sdk: string }> {
  const found = new Map<string, { curl: string; sdk: string }>()
  for (const item of Object.values(document.paths)) {
    for (const operation of Object.values(item)) {
      const samples = operation['x-codeSamples'] ?? []
      found.set(operation.operationId, {
        curl: samples.find((s) => s.label === 'curl')?.source ?? '',
        sdk: samples.find((s) => s.label !== 'curl')?.source ?? '',
      })
    }
  }
  return found
}

// The order a session would call them in: what a sample reads or changes exists by then.
const SESSION = [
  'getLiveness',
  'getReadiness',
  'getAccount',
  'createContact',
  'listContacts',
  'getContact',
  'updateContact',
  'upsertContact',
  'batchContacts',
  'listEvents',
  'getEvent',
  'createWebhookEndpoint',
  'listWebhookEndpoints',
  'getWebhookEndpoint',
  'updateWebhookEndpoint',
  'rollWebhookEndpointSecret',
  'testWebhookEndpoint',
  'listWebhookDeliveries',
  'getWebhookDelivery',
  'retryWebhookDelivery',
  'listWebhookAttempts',
  'recoverWebhookDeliveries',
  'deleteWebhookEndpoint',
  'listRequestLogs',
  'getRequestLog',
  'deleteContact',
]

describe('the reference page samples', () => {
  it('cover every operation, and the session above calls each one', async () => {
    const t = await createTestHarness({ dialect: 'sqlite' })
    try {
      const document = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
      const samples = samplesOf(document)
      expect([...samples.keys()].sort()).toEqual(Object.keys(SAMPLES).sort())
      expect([...SESSION].sort()).toEqual(Object.keys(SAMPLES).sort())
      const keys = new Set<string>()
      for (const { curl, sdk } of samples.values()) {
        expect(curl).toMatch(/^curl /)
        expect(sdk).not.toBe('')
        keys.add(/Idempotency-Key: ([\w-]+)/.exec(curl)?.[1] ?? '')
      }
      // No two POST samples share an Idempotency-Key (pasting one after another must not be a 422).
      const posts = [...samples.values()].filter(({ curl }) => curl.startsWith('curl -X POST'))
      expect(keys.size - 1).toBe(posts.length)
      // Swagger UI shows them in the description.
      expect(document.paths['/api/v1/contacts'].post.description).toContain('```sh\ncurl -X POST')
    } finally {
      await t.close()
    }
  })

  it('the SDK samples, as served, type-check against the SDK', async () => {
    const t = await createTestHarness({ dialect: 'sqlite' })
    const document = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
    await t.close()
    const here = fileURLToPath(new URL('.', import.meta.url))
    const sdkEntry = fileURLToPath(new URL('../../packages/client/src/index.js', import.meta.url))
    const file = `${here}__samples_check__.ts`
    const IMPORT = "import { createClient } from '@contacts-api/client'"
    const bodies = [...samplesOf(document)].map(([id, { sdk }]) => {
      expect(sdk.startsWith(IMPORT) || sdk.startsWith('const baseUrl')).toBe(true)
      return `export async function ${id}() {\n${sdk.replace(IMPORT, '')}\n}`
    })
    const source = [`import { createClient } from '${sdkEntry}'`, ...bodies].join('\n')
    const options: ts.CompilerOptions = {
      strict: true,
      noEmit: true,
      noUnusedLocals: false,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
      skipLibCheck: true,
    }
    const host = ts.createCompilerHost(options)
    const read = host.readFile.bind(host)
    host.readFile = (name) => (name === file ? source : read(name))
    const exists = host.fileExists.bind(host)
    host.fileExists = (name) => name === file || exists(name)
    const program = ts.createProgram([file], options, host)
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file?.fileName === file)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
    expect(problems).toEqual([])
  })

  describe.each(testDialects())('every curl sample, run by a shell against the server on %s', (dialect) => {
    let t: TestHarness
    let base: string
    let acme: TestAccount
    beforeAll(async () => {
      t = await createTestHarness({ dialect, resolve: staticResolver({ 'example.com': ['93.184.216.34'] }) })
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
      acme = await t.createAccount('Acme')
    })
    afterAll(() => t.close())

    it('answers each with a 2xx', async () => {
      const document = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json()
      const samples = samplesOf(document)
      // The samples' example ids, replaced by the ones this session creates.
      const ids = new Map<string, string>()
      const statuses: Record<string, number> = {}
      for (const operationId of SESSION) {
        let command = (samples.get(operationId)?.curl ?? '').replaceAll('http://api.test', base)
        for (const [example, real] of ids) {
          command = command.replaceAll(example, real)
        }
        // A fresh key: the test runs the samples once per dialect on one account's worth of keys.
        command = command.replace(sampleIdempotencyKey(operationId), randomUUID())
        const { stdout } = await run('sh', ['-c', `${command} -s -o /dev/stderr -w '%{http_code}'`], {
          env: { PATH: process.env.PATH, CONTACTS_API_KEY: acme.key },
        }).catch((error: { stdout: string; stderr: string }) => error)
        statuses[operationId] = Number(stdout)
        const made = await createdId(t, acme, operationId, ids)
        if (made) {
          ids.set(made[0], made[1])
        }
      }
      const failed = Object.entries(statuses).filter(([, status]) => status < 200 || status > 299)
      expect(failed).toEqual([])
    })
  })
})

/** The example id a sample stands for, and the real one it just created, read through the API. */
async function createdId(
  t: TestHarness,
  account: TestAccount,
  operationId: string,
  ids: Map<string, string>,
): Promise<[string, string] | undefined> {
  const first = async (url: string, list: string) =>
    ((await t.inject(account, { method: 'GET', url })).json()[list][0]?.id as string | undefined) ?? ''
  switch (operationId) {
    case 'createContact':
      return [SAMPLE_IDS.contact, await first('/api/v1/contacts', 'contacts')]
    case 'listEvents':
      return [SAMPLE_IDS.event, await first('/api/v1/events', 'events')]
    case 'createWebhookEndpoint':
      return [SAMPLE_IDS.endpoint, await first('/api/v1/webhook_endpoints', 'webhook_endpoints')]
    case 'listRequestLogs':
      return [SAMPLE_IDS.request, await first('/api/v1/request_logs', 'request_logs')]
    case 'testWebhookEndpoint':
      return [
        SAMPLE_IDS.delivery,
        await first(`/api/v1/webhook_endpoints/${ids.get(SAMPLE_IDS.endpoint)}/deliveries`, 'deliveries'),
      ]
    default:
      return undefined
  }
}
