// Every write of a contact goes through the contact service (contact-service.ts): no other file
// writes the contact tables, and only the service reaches the modules that do.
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = path.resolve(import.meta.dirname, '../..')

/** The project's TypeScript outside tests, dist and node_modules, as paths from the root. */
function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      return ['node_modules', 'dist', 'results'].includes(entry.name) ? [] : sources(relative)
    }
    return /\.m?ts$/.test(entry.name) && !entry.name.endsWith('.test.ts') ? [relative] : []
  })
}

const ALL = ['src', 'bench', 'scripts', 'test', 'packages'].flatMap(sources)
const TABLES = '(contacts|contact_tags|contact_terms|contact_counts)'
const WRITES = [
  new RegExp(`\\b(insert\\s+into|update|delete\\s+from)\\s+"?${TABLES}"?[\\s(]`, 'i'),
  new RegExp(`\\b(insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\\(\\s*['"]${TABLES}['"]`),
]

describe('the contact service is the only writer of contacts', () => {
  it('no file but the write path holds SQL that writes the contact tables', () => {
    const writers = ALL.filter((file) =>
      WRITES.some((write) => write.test(readFileSync(path.join(ROOT, file), 'utf8'))),
    )
    // contacts.store.ts: the no-op UPDATE that locks a contact. Migrations change the schema.
    expect(writers.filter((file) => !file.startsWith('src/db/migrations/'))).toEqual([
      'src/contacts/contact-writes.postgres.ts',
      'src/contacts/contact-writes.sqlite.ts',
      'src/contacts/contact-writes.ts',
      'src/contacts/contacts.store.ts',
    ])
  })

  it('only the service reaches the write path', () => {
    const importers = (module: string) =>
      ALL.filter((file) =>
        new RegExp(`from '\\./${module}\\.js'|/contacts/${module}\\.js'`).test(
          readFileSync(path.join(ROOT, file), 'utf8'),
        ),
      )
    expect(importers('contact-writes')).toEqual([
      'src/contacts/contact-operations.ts',
      'src/contacts/contact-service.ts',
    ])
    expect(importers('contact-operations').filter((file) => !isTypeOnly(file, 'contact-operations'))).toEqual([
      'src/contacts/contact-service.ts',
    ])
  })

  it('finds a write where one is', () => {
    expect(WRITES[0]?.test('await sql`insert into contacts (id) values (1)`')).toBe(true)
    expect(WRITES[0]?.test('delete from contact_tags where')).toBe(true)
    expect(WRITES[1]?.test(".insertInto('contact_terms')")).toBe(true)
    expect(WRITES[0]?.test('select id from contacts where')).toBe(false)
  })
})

/** Whether the file imports only types from the module (the batch route's answer types). */
function isTypeOnly(file: string, module: string): boolean {
  const lines = readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .filter((line) => line.includes(`${module}.js'`))
  return lines.every((line) => line.startsWith('import type '))
}
