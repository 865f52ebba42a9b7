// `npm run migration:new NAME` (scripts/new-migration.ts): the names it accepts, the file and index
// line it writes, and what it refuses.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createMigration, MigrationNameError, migrationNames } from '../scripts/new-migration.js'

const now = new Date('2026-11-24T09:30:05.123Z')

describe('migration:new', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'contacts-migrations-'))
    writeFileSync(path.join(dir, '20261122T000000-init.ts'), '')
    writeFileSync(path.join(dir, 'index.ts'), "export * as m20261122T000000_init from './20261122T000000-init.js'\n")
  })
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  it('names the file by the UTC second and the export after it', () => {
    expect(migrationNames('add-contact-notes', now)).toEqual({
      stem: '20261124T093005-add-contact-notes',
      exportName: 'm20261124T093005_add_contact_notes',
    })
    expect(migrationNames('add_notes2', now).stem).toBe('20261124T093005-add-notes2')
  })

  it.each(['', 'Add-notes', 'add notes', '-notes', 'notes-', 'add--notes', '2fa', 'notes.ts', 'a'.repeat(61)])(
    'refuses the name %j',
    (name) => {
      expect(() => migrationNames(name, now)).toThrow(MigrationNameError)
    },
  )

  it('writes the template and appends it to the index', () => {
    const file = createMigration(dir, 'add-notes', now)
    expect(path.basename(file)).toBe('20261124T093005-add-notes.ts')
    expect(readFileSync(file, 'utf8')).toContain('export async function up(_db: MigrationDb, _dialect: Dialect)')
    expect(readFileSync(path.join(dir, 'index.ts'), 'utf8').split('\n')).toEqual([
      "export * as m20261122T000000_init from './20261122T000000-init.js'",
      "export * as m20261124T093005_add_notes from './20261124T093005-add-notes.js'",
      '',
    ])
  })

  it('refuses a name already used, and a timestamp before the last migration', () => {
    expect(() => createMigration(dir, 'init', now)).toThrow(MigrationNameError)
    expect(() => createMigration(dir, 'later', new Date('2026-11-21T00:00:00Z'))).toThrow(/sort before/)
    expect(readFileSync(path.join(dir, 'index.ts'), 'utf8').split('\n')).toHaveLength(2)
  })
})
