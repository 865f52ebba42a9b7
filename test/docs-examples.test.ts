// Every curl example of the guides (README.md, docs/*.md), run as written by bash against a server:
// each answer must be what the guide means, a 2xx, or a 404 for an id it made up, unless an
// `<!-- example: statuses … -->` comment just before the block names others. `<!-- example: not
// run (why) -->` skips a block, and says why to whoever reads the source. The guide's
// `http://127.0.0.1:3000` is this server's address; `$API`, `$CONTACTS_API_KEY`, `$READ_ONLY_KEY`
// and `$ID` (a contact of the account) are set as the guides ask the reader to.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestHarness, type TestHarness } from './harness.js'
import { staticResolver } from './static-resolver.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const GUIDES = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
]
/** Ids the guides make up: a 404 for them is the right answer. */
const MADE_UP_ID = /\b(?:we_123|wd_456|req_01JD3Z8Q4R5S6T7V8W9X0Y1Z2\w|con_01JD3Z8Q4R5S6T7V8W9X0Y1Z2\w)\b/
/** Each HTTP status curl got, on stderr, where the example's own output does not go. */
const PREAMBLE = `curl() { command curl -w '%{stderr}HTTP_STATUS %{http_code}\\n' "$@"; }\n`

interface Example {
  guide: string
  line: number
  script: string
  /** The statuses the guide means; undefined: 2xx, or 404 for a made-up id. */
  statuses: number[] | undefined
  skipped: string | undefined
}

function examplesOf(guide: string): Example[] {
  const text = readFileSync(path.join(ROOT, guide), 'utf8')
  const examples: Example[] = []
  for (const match of text.matchAll(/(?:<!-- example: ([^\n]*?) -->\n)?```(?:sh|bash|shell)\n([\s\S]*?)```/g)) {
    const [, mark, script = ''] = match
    if (!script.includes('curl')) {
      continue
    }
    const statuses = /^statuses ([\d ]+)$/.exec(mark ?? '')?.[1]
    examples.push({
      guide,
      line: text.slice(0, match.index).split('\n').length,
      script,
      statuses: statuses?.split(' ').map(Number),
      skipped: mark?.startsWith('not run') ? mark : undefined,
    })
  }
  return examples
}

const run = promisify(execFile)

describe('the guides’ curl examples, run as written', () => {
  let t: TestHarness
  let base: string
  beforeAll(async () => {
    t = await createTestHarness({ dialect: 'sqlite', resolve: staticResolver({ 'example.com': ['93.184.216.34'] }) })
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
  })
  afterAll(() => t.close())

  it('every guide has its examples marked or run', () => {
    const all = GUIDES.flatMap(examplesOf)
    expect(all.length).toBeGreaterThan(25)
    for (const example of all.filter((e) => e.skipped)) {
      expect(example.skipped, `${example.guide}:${example.line}`).toMatch(/^not run \(.+\)$/)
    }
  })

  it.each(GUIDES.filter((guide) => examplesOf(guide).some((e) => !e.skipped)))('%s', async (guide) => {
    // A fresh account per guide: its examples build on each other, in order, and on nothing else.
    const account = await t.createAccount(guide)
    const readOnly = await t.createKey(account, { scopes: ['read'] })
    const contact = await t.inject(account, {
      method: 'POST',
      url: '/api/v1/contacts',
      payload: { email: 'example-id@example.com' },
    })
    const env = {
      PATH: process.env.PATH ?? '',
      API: `${base}/api/v1`,
      CONTACTS_API_KEY: account.key,
      READ_ONLY_KEY: readOnly,
      ID: contact.json().id as string,
    }
    for (const example of examplesOf(guide).filter((e) => !e.skipped)) {
      const where = `${example.guide}:${example.line}`
      const script = PREAMBLE + example.script.replaceAll('http://127.0.0.1:3000', base)
      const { stderr } = await run('bash', ['-c', script], { env, timeout: 20_000 }).catch((error) => {
        throw new Error(`${where} failed: ${error.stderr ?? error.message}`)
      })
      const statuses = [...stderr.matchAll(/^HTTP_STATUS (\d+)$/gm)].map((m) => Number(m[1]))
      expect(statuses.length, `${where}: no request made`).toBeGreaterThan(0)
      for (const status of statuses) {
        const meant = example.statuses
          ? example.statuses.includes(status)
          : (status >= 200 && status < 300) || (status === 404 && MADE_UP_ID.test(example.script))
        expect(meant, `${where} answered ${status} (all: ${statuses.join(', ')})`).toBe(true)
      }
    }
  })
})
