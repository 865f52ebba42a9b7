// scripts/check-commits.mjs, run as CI runs it, on a throwaway repository with good and bad messages.
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const SCRIPT = path.resolve(import.meta.dirname, '..', 'scripts', 'check-commits.mjs')

describe('the commit message check', () => {
  const repo = mkdtempSync(path.join(tmpdir(), 'contacts-commits-'))
  afterAll(() => rmSync(repo, { recursive: true, force: true }))
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], {
      cwd: repo,
      encoding: 'utf8',
    }).trim()
  const commit = (message: string) => git('commit', '--allow-empty', '-q', '-m', message)
  const check = () => {
    const run = spawnSync(process.execPath, [SCRIPT], { cwd: repo, encoding: 'utf8' })
    return { status: run.status, output: run.stdout + run.stderr }
  }

  git('init', '-q')
  commit('A message of the old rules, long enough to fail the subject rule if it were checked at all')
  mkdirSync(path.join(repo, '.ci'))
  writeFileSync(path.join(repo, '.ci', 'commits-base'), `${git('rev-parse', 'HEAD')}\n`)

  it('passes imperative subjects of up to 72 characters, with a body after a blank line', () => {
    commit('Seed the bench through the contact service')
    commit(`Add ${'x'.repeat(68)}\n\nThe why, the figures and the details.`)
    expect(check()).toEqual({ status: 0, output: expect.stringContaining('2 commits since') })
  })

  it('names each commit whose message breaks a rule, and fails', () => {
    commit(`Add ${'x'.repeat(69)}`)
    commit('Added the request log')
    commit('Adds the request log')
    commit('add the request log.')
    commit('Add the request log\nwith its body on the next line')
    const { status, output } = check()
    expect(status).toBe(1)
    expect(output).toContain('the subject has 73 characters')
    expect(output).toContain('"Added" is not the imperative')
    expect(output).toContain('"Adds" is not the imperative')
    expect(output).toContain('the subject starts with a small letter')
    expect(output).toContain('the subject ends with a full stop')
    expect(output).toContain('no blank line between the subject and the body')
    expect(output).toContain('7 commits since')
    expect(output).toContain('5 with a message to fix')
  })
})
