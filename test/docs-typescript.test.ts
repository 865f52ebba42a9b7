// Every TypeScript example of the guides (README.md, docs/*.md, packages/client/README.md),
// type-checked as written against the SDK's source: a renamed method or option breaks the build of
// the guides, not the reader's. A fragment may use the names GIVEN declares (a client, an id, …),
// as its prose says; an example that imports nothing from the SDK gets its exports.
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const GUIDES = [
  'README.md',
  'packages/client/README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
]
const SDK = path.join(ROOT, 'packages/client/src/index.ts')

/** What the guides' fragments take as given, said in their prose. */
const GIVEN = `import type { Contact, ContactBatch, Event, createClient as Create } from '${SDK.replace(/\.ts$/, '.js')}'
declare global {
  const client: ReturnType<typeof Create>
  const id: string
  const baseUrl: string
  const apiKey: string
  const operations: ContactBatch['operations']
  function loadCursor(): Promise<string | undefined>
  function handle(event: Event): Promise<void>
  function saveCursor(cursor: string | undefined): Promise<void>
  const log: { warn(message: string): void }
  function store(contacts: Contact[]): void
  /** In a webhook receiver: the request's raw body and its headers. */
  const rawBody: string
  const request: { headers: Record<string, string> }
}
export {}
`
const SDK_IMPORT = `import { ApiError, createClient, etagOf, lastResponseOf, verifyWebhook } from '@contacts-api/client'\n`

function examples(): Array<{ where: string; source: string }> {
  return GUIDES.flatMap((guide) => {
    const text = readFileSync(path.join(ROOT, guide), 'utf8')
    return [...text.matchAll(/```(?:ts|typescript)\n([\s\S]*?)```/g)].map((match) => {
      const code = match[1] ?? ''
      return {
        where: `${guide}:${text.slice(0, match.index).split('\n').length}`,
        source: /from '@contacts-api\/client'/.test(code) ? code : SDK_IMPORT + code,
      }
    })
  })
}

describe('the guides’ TypeScript examples', () => {
  it('type-check against the SDK as written', () => {
    const found = examples()
    expect(found.length).toBeGreaterThan(5)
    const dir = path.join(ROOT, 'test', '__guides__')
    const files = new Map(found.map((example, i) => [path.join(dir, `example-${i}.mts`), example]))
    const given = path.join(dir, 'given.d.mts')
    const options: ts.CompilerOptions = {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
      skipLibCheck: true,
      baseUrl: ROOT,
      paths: { '@contacts-api/client': [SDK] },
    }
    const host = ts.createCompilerHost(options)
    const read = host.readFile.bind(host)
    host.readFile = (name) => (name === given ? GIVEN : (files.get(name)?.source ?? read(name)))
    const exists = host.fileExists.bind(host)
    host.fileExists = (name) => name === given || files.has(name) || exists(name)
    const program = ts.createProgram([given, ...files.keys()], options, host)
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file && (files.has(d.file.fileName) || d.file.fileName === given))
      .map((d) => {
        const where = d.file && (files.get(d.file.fileName)?.where ?? 'given')
        return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
      })
    expect(problems).toEqual([])
  })
})
