// Checks the commit messages since a base (its id in .ci/commits-base, or --base): a subject of at
// most 72 characters in the imperative, then a blank line before any body. Merges are not checked.
// CI runs it (docs/design.md#commits).
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const SUBJECT_MAX = 72
/** Imperative verbs that end like a past tense or a gerund. */
const VERBS_ENDING_LIKE_TENSES = new Set([
  'bring',
  'embed',
  'exceed',
  'feed',
  'need',
  'ping',
  'proceed',
  'seed',
  'shed',
  'speed',
  'string',
])

/** @param {string} message */
function problemsOf(message) {
  const [subject = '', second] = message.replace(/\n+$/, '').split('\n')
  /** @type {string[]} */
  const problems = []
  if (subject.trim() === '') {
    problems.push('the subject is empty')
  }
  if (subject.length > SUBJECT_MAX) {
    problems.push(`the subject has ${subject.length} characters (at most ${SUBJECT_MAX}; details go in the body)`)
  }
  const first = subject.split(/\s/)[0] ?? ''
  if (/^[a-z]/.test(first)) {
    problems.push('the subject starts with a small letter')
  }
  if (/(ed|ing|s)$/i.test(first) && !VERBS_ENDING_LIKE_TENSES.has(first.toLowerCase()) && !/(ss|us)$/i.test(first)) {
    problems.push(`"${first}" is not the imperative ("Add", not "Added", "Adds" or "Adding")`)
  }
  if (subject.endsWith('.')) {
    problems.push('the subject ends with a full stop')
  }
  if (second !== undefined && second.trim() !== '') {
    problems.push('no blank line between the subject and the body')
  }
  return problems
}

/** @param {string[]} args */
function git(...args) {
  return execFileSync('git', args, { encoding: 'utf8' })
}

function main() {
  const flag = process.argv.indexOf('--base')
  const base = flag >= 0 ? process.argv[flag + 1] : readFileSync('.ci/commits-base', 'utf8').trim()
  if (!base) {
    throw new Error('no base commit: pass --base or write one in .ci/commits-base')
  }
  const commits = git('rev-list', '--no-merges', `${base}..HEAD`).split('\n').filter(Boolean)
  let bad = 0
  for (const commit of commits) {
    const problems = problemsOf(git('log', '-1', '--format=%B', commit))
    if (problems.length > 0) {
      bad++
      console.log(`${commit.slice(0, 10)} ${git('log', '-1', '--format=%s', commit).trim()}`)
      for (const problem of problems) {
        console.log(`  ${problem}`)
      }
    }
  }
  console.log(`${commits.length} commits since ${base.slice(0, 10)}, ${bad} with a message to fix`)
  process.exitCode = bad > 0 ? 1 : 0
}

main()
