// Several processes opening a new SQLite file at the same moment (two instances of a deployment, a
// server and the CLI) must all open it. Switching the file to WAL needs its exclusive lock; when two
// connections that both hold the shared lock ask for it, SQLite answers SQLITE_BUSY at once instead
// of calling the busy handler (it would deadlock), so busy_timeout does not help: CI's api-only
// test saw "database is locked" from `PRAGMA journal_mode = WAL`. openSqlite retries the switch.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const PROCESSES = 6
const ROUNDS = 16
const FIXTURE = path.resolve(import.meta.dirname, 'fixtures', 'open-sqlite-at.ts')

/** One process that opens file `open-<round>.sqlite` of `dir` at `first + round × gap`, each round. */
function openEach(dir: string, first: number, gap: number): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, dir, String(first), String(gap), String(ROUNDS)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let output = ''
  child.stderr.on('data', (chunk) => {
    output += chunk
  })
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })))
}

describe('opening a new SQLite file from several processes at once', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'contacts-open-race-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it(`${PROCESSES} processes × ${ROUNDS} new files: every one opens it`, async () => {
    // Far enough ahead for every process to have loaded the app's modules; the processes start once
    // and meet at each file's start line.
    const results = await Promise.all(Array.from({ length: PROCESSES }, () => openEach(dir, Date.now() + 3000, 100)))
    expect(results.filter((r) => r.code !== 0).map((r) => `${r.code} ${r.output}`)).toEqual([])
  }, 120_000)
})
