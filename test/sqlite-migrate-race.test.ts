// Several processes started together on a new SQLite file (two instances of a deployment, or a
// server and `contacts-api migrate`) must all migrate it or find it migrated: none may fail. Before
// the migration took SQLite's write lock first (BEGIN IMMEDIATE, src/db/migrate.ts), two of them
// could both see no migration applied and both create the tables ("table accounts already exists",
// CI); before busy_timeout was set ahead of the WAL switch, one could fail with "database is locked".
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { cliCommand } from './processes.js'

const PROCESSES = 4

function migrate(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [...cliCommand(), 'migrate'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk) => {
    output += chunk
  })
  child.stderr.on('data', (chunk) => {
    output += chunk
  })
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })))
}

describe('migrating a new SQLite file from several processes at once', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-migrate-race-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it.each([1, 2, 3])(
    'round %i: every process exits 0 and the migrations are applied once',
    async (round) => {
      const env = {
        ...process.env,
        DATABASE_URL: `sqlite:${path.join(dir, `race-${round}.sqlite`)}`,
        LOG_LEVEL: 'warn',
      }
      const results = await Promise.all(Array.from({ length: PROCESSES }, () => migrate(env)))
      for (const result of results) {
        expect(result, result.output).toMatchObject({ code: 0 })
      }
      const status = await migrate({ ...env })
      expect(status.code).toBe(0)
    },
    60_000,
  )
})
