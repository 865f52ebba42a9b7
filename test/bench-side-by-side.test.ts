// bench/side-by-side.ts refuses a bad command line before it seeds or starts anything: it exits 1
// with the reason, and leaves no temporary directory behind.
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import os from 'node:os'
import { describe, expect, it } from 'vitest'

const ownDirectories = () => readdirSync(os.tmpdir()).filter((name) => name.startsWith('side-by-side-'))

function sideBySide(...args: string[]) {
  const before = ownDirectories()
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/side-by-side.ts', ...args], {
    encoding: 'utf8',
    timeout: 30_000,
  })
  return { status: run.status, stderr: run.stderr, left: ownDirectories().filter((name) => !before.includes(name)) }
}

describe('bench/side-by-side.ts with a bad command line', () => {
  it.each([
    [['--rounds=0'], /--rounds must be a whole number of at least 1 \(got 0\)/],
    [['--seconds=abc'], /--seconds must be a whole number of at least 1 \(got abc\)/],
    [['--b-env=REQUEST_LOG_MAX_PER_DAY'], /--b-env takes NAME=value pairs separated by commas \(got "REQUEST_LOG/],
    [['--path=api/v1/me'], /--path must start with \/ \(got api\/v1\/me\)/],
    [['--speed=2'], /unknown option --speed/],
    [['--a=/nonexistent', '--b=/nonexistent'], /\/nonexistent\/dist\/main\.js is missing/],
  ])('%j exits 1 with its reason, and starts nothing', (args, reason) => {
    const { status, stderr, left } = sideBySide(...args)
    expect(status).toBe(1)
    expect(stderr).toMatch(reason)
    expect(stderr).not.toMatch(/^\s+at /m)
    expect(left).toEqual([])
  })
})
