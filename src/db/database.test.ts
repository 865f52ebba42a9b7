// The SQLite connection settings every durability and integrity promise rests on (docs/design.md#identifiers-and-storage).
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { openDatabase } from './database.js'

const dir = mkdtempSync(path.join(tmpdir(), 'contacts-db-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('SQLite connection', () => {
  it.each([
    ['NORMAL', 1],
    ['FULL', 2],
  ] as const)(
    'synchronous=%s: WAL, foreign keys on, a busy timeout, the synchronous level asked for',
    async (level, code) => {
      const handle = openDatabase({ kind: 'sqlite', path: path.join(dir, `${level}.sqlite`), synchronous: level })
      try {
        const pragma = async (name: string) =>
          Object.values((await sql.raw<Record<string, unknown>>(`pragma ${name}`).execute(handle.db)).rows[0] ?? {})[0]
        expect(await pragma('journal_mode')).toBe('wal')
        expect(await pragma('foreign_keys')).toBe(1)
        expect(await pragma('synchronous')).toBe(code)
        expect(await pragma('busy_timeout')).toBe(5000)
        expect(await pragma('cache_size')).toBe(-4096)
      } finally {
        await handle.close()
      }
    },
  )
})

describe('SQLite files', () => {
  it('are readable by the service user only: the database, its WAL and shared memory (mode 0600)', async () => {
    const file = path.join(dir, 'private', 'contacts.sqlite')
    const handle = openDatabase({ kind: 'sqlite', path: file, synchronous: 'NORMAL' })
    try {
      await sql`create table t (a integer)`.execute(handle.db)
      await sql`insert into t values (1)`.execute(handle.db)
      for (const name of [file, `${file}-wal`, `${file}-shm`]) {
        expect([name, statSync(name).mode & 0o777]).toEqual([name, 0o600])
      }
    } finally {
      await handle.close()
    }
  })
})

describe('an existing SQLite file readable by others', () => {
  it('is narrowed to 0600 at start, its WAL and shared memory too', async () => {
    const file = path.join(dir, 'wide', 'contacts.sqlite')
    mkdirSync(path.dirname(file), { recursive: true })
    for (const name of [file, `${file}-wal`, `${file}-shm`]) {
      writeFileSync(name, '')
      chmodSync(name, 0o644)
    }
    const handle = openDatabase({ kind: 'sqlite', path: file, synchronous: 'NORMAL' })
    try {
      await sql`create table t (a integer)`.execute(handle.db)
      for (const name of [file, `${file}-wal`, `${file}-shm`]) {
        expect([name, statSync(name).mode & 0o777]).toEqual([name, 0o600])
      }
    } finally {
      await handle.close()
    }
  })
})
