// `contacts-api scan` run as a hook runs it: a child process in a temp tree, no database, no SECRET.
// Exact stdout lines, exit codes 0/1/2, what is skipped, and no full key in any output.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keyScanPattern, SCAN_MAX_BYTES } from '../src/api-keys/key-scan.js'
import { cliCommand } from './processes.js'

const ROOT = path.resolve(import.meta.dirname, '..')

/** A key built here, so that this file holds none for a scan of the repository to find. */
const key = (prefix: string, mode: string, last4: string, length = 32) =>
  `${prefix}_${mode}_${'k3Y'.repeat(11).slice(0, length - 4)}${last4}`

const LIVE = key('service', 'live', 'Lv01')
const TEST = key('service', 'test', 'Ts02')
const QUOTED = key('service', 'live', 'Qt03')
const IN_URL = key('service', 'live', 'Ur04')
const HIDDEN = [
  key('service', 'live', 'Bn05'),
  key('service', 'live', 'Nm06'),
  key('service', 'live', 'Gt07'),
  key('service', 'live', 'Al08'),
  key('service', 'live', 'Lk09'),
]
const ACME = key('acme', 'live', 'Ac10')
const ALL_KEYS = [LIVE, TEST, QUOTED, IN_URL, ...HIDDEN, ACME]

let tree: string
let outside: string

beforeAll(() => {
  tree = mkdtempSync(path.join(tmpdir(), 'contacts-scan-'))
  outside = mkdtempSync(path.join(tmpdir(), 'contacts-scan-outside-'))
  const write = (file: string, content: string | Buffer) => {
    mkdirSync(path.dirname(path.join(tree, file)), { recursive: true })
    writeFileSync(path.join(tree, file), content)
  }
  write('.env', `# local settings\nCONTACTS_API_KEY=${LIVE}\n`)
  write('config/keys.json', `{\n  "mode": "test",\n  "key": "${TEST}"\n}\n`)
  write('src/client.ts', `const key = '${QUOTED}'\nfetch('https://example.com/hook?key=${IN_URL}&x=1')\n`)
  write('app.bin', Buffer.concat([Buffer.from([0x7f, 0x45, 0x00, 0x01]), Buffer.from(HIDDEN[0] ?? '')]))
  write('node_modules/pkg/index.js', `module.exports = '${HIDDEN[1]}'\n`)
  write('.git/config', `[remote]\n  token = ${HIDDEN[2]}\n`)
  write('docs.md', `Example: \`${HIDDEN[3]}\` <!-- gitleaks:allow -->\n`)
  write('acme.env', `ACME=${ACME}\n`)
  write(
    'near-misses.txt',
    [
      key('service', 'live', 'Sh31', 31),
      key('service', 'live', 'Lo33', 33),
      key('other', 'live', 'Ot32'),
      `x${key('service', 'live', 'Xp32')}`,
      `${key('service', 'live', 'Us32')}_suffix`,
      key('service', 'prod', 'Pr32'),
      key('SERVICE', 'live', 'Up32'),
    ].join('\n'),
  )
  writeFileSync(path.join(outside, 'secret.txt'), `${HIDDEN[4]}\n`)
  symlinkSync(outside, path.join(tree, 'linked-dir'))
  symlinkSync(path.join(outside, 'secret.txt'), path.join(tree, 'linked-file.txt'))
})

afterAll(() => {
  rmSync(tree, { recursive: true, force: true })
  rmSync(outside, { recursive: true, force: true })
})

interface Run {
  code: number | null
  out: string[]
  err: string[]
}

/** The CLI's node arguments with absolute paths, so that the process can run in the temp tree. */
function command(): string[] {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  return cliCommand().map((arg) => (arg === 'tsx' ? tsx : arg.startsWith('-') ? arg : path.join(ROOT, arg)))
}

const runs: Run[] = []

/** Runs `contacts-api scan ARGS` in the tree with only PATH and the given variables set. */
function scan(args: string[], env: Record<string, string> = {}, cwd = tree): Run {
  const child = spawnSync(process.execPath, [...command(), 'scan', ...args], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '',
      ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
      ...env,
    },
    encoding: 'utf8',
  })
  const lines = (text: string) => text.split('\n').filter((line) => line !== '')
  const run = { code: child.status, out: lines(child.stdout), err: lines(child.stderr) }
  runs.push(run)
  return run
}

describe('contacts-api scan', () => {
  it('with no path, walks the current directory and prints path:line: and the redacted key of each', () => {
    const run = scan([])
    expect(run.out).toEqual([
      '.env:2: service_live_…Lv01',
      'config/keys.json:3: service_test_…Ts02',
      'src/client.ts:1: service_live_…Qt03',
      'src/client.ts:2: service_live_…Ur04',
    ])
    expect(run.code).toBe(1)
    expect(run.err).toEqual([expect.stringMatching(/^contacts-api: scan: 4 API keys in \d+ files scanned\. /)])
  })

  it('prints each path as given, and scans a file named under node_modules', () => {
    const run = scan(['./src', 'config/keys.json', 'node_modules/pkg/index.js'])
    expect(run.out).toEqual([
      './src/client.ts:1: service_live_…Qt03',
      './src/client.ts:2: service_live_…Ur04',
      'config/keys.json:3: service_test_…Ts02',
      'node_modules/pkg/index.js:1: service_live_…Nm06',
    ])
    expect(run.code).toBe(1)
  })

  it('exits 0 and prints nothing when the files hold no key: binary, allowed lines, near misses', () => {
    const run = scan(['app.bin', 'docs.md', 'near-misses.txt', 'acme.env'])
    expect(run).toEqual({ code: 0, out: [], err: [] })
  })

  it('follows no symbolic link, and says so for one it is given', () => {
    const run = scan(['linked-dir', 'linked-file.txt', 'near-misses.txt'])
    expect(run.out).toEqual([])
    expect(run.err).toEqual([
      'contacts-api: scan: skipped linked-dir: a symbolic link (not followed; end the path with / to scan its directory)',
      'contacts-api: scan: skipped linked-file.txt: a symbolic link (not followed; end the path with / to scan its directory)',
    ])
    expect(run.code).toBe(0)
    expect(scan(['linked-dir/']).out).toEqual(['linked-dir/secret.txt:1: service_live_…Lk09'])
  })

  it('uses KEY_PREFIX, or --prefix over it, and needs neither a database nor a SECRET', () => {
    // Settings the server would refuse, as another repository's environment may hold.
    const server = { DATABASE_URL: 'mysql://elsewhere', SECRET: 'short', PORT: 'http' }
    expect(scan(['acme.env', '.env'], { KEY_PREFIX: 'acme', ...server })).toMatchObject({
      code: 1,
      out: ['acme.env:1: acme_live_…Ac10'],
    })
    expect(scan(['--prefix', 'service', 'acme.env', '.env'], { KEY_PREFIX: 'acme' }).out).toEqual([
      '.env:2: service_live_…Lv01',
    ])
  })

  it('--json prints one object with findings, skipped and failed paths', () => {
    const run = scan(['--json', '.env', 'linked-file.txt'])
    expect(run.code).toBe(1)
    expect(run.err).toEqual([])
    expect(run.out).toHaveLength(1)
    expect(JSON.parse(run.out[0] ?? '')).toEqual({
      findings: [{ path: '.env', line: 2, key: 'service_live_…Lv01' }],
      skipped: [{ path: 'linked-file.txt', reason: expect.stringContaining('symbolic link') }],
      failed: [],
      files_scanned: 1,
    })
  })

  it(`skips a file over ${SCAN_MAX_BYTES} bytes with a note, exit 0`, () => {
    const big = path.join(outside, 'big.sql')
    writeFileSync(big, '')
    // Sparse: the size is what counts, and nothing is written.
    truncateSync(big, SCAN_MAX_BYTES + 1)
    const run = scan([big])
    expect(run).toEqual({
      code: 0,
      out: [],
      err: [`contacts-api: scan: skipped ${big}: ${SCAN_MAX_BYTES + 1} bytes, over the ${SCAN_MAX_BYTES}-byte limit`],
    })
  })

  it('exits 2 on bad arguments and on a path it cannot read, echoing no key', () => {
    expect(scan(['--name', 'x'])).toMatchObject({ code: 2, out: [], err: [expect.stringContaining("'--name'")] })
    expect(scan(['--prefix', 'Bad!'])).toMatchObject({ code: 2, out: [] })
    expect(scan(['--prefix', LIVE])).toEqual({
      code: 2,
      out: [],
      err: ['contacts-api: scan: --prefix must be 1-20 lowercase letters or digits (got "[REDACTED]")'],
    })
    expect(scan([], { KEY_PREFIX: 'Not Valid' })).toMatchObject({
      code: 2,
      out: [],
      err: [expect.stringContaining('KEY_PREFIX must be')],
    })
    expect(scan(['missing.txt', 'near-misses.txt'])).toEqual({
      code: 2,
      out: [],
      err: ['contacts-api: scan: cannot read missing.txt: no such file or directory'],
    })
    // A key found wins over a path that could not be read: the hook must say "key".
    expect(scan(['missing.txt', '.env']).code).toBe(1)
  })

  it('--help prints its usage, exit 0', () => {
    const run = scan(['--help'])
    expect(run.code).toBe(0)
    expect(run.out[0]).toBe('Usage: contacts-api scan [--prefix PREFIX] [--json] [PATH...]')
  })

  it('a file named like a key is printed redacted', () => {
    const dir = mkdtempSync(path.join(outside, 'named-'))
    writeFileSync(path.join(dir, `${TEST}.txt`), `${TEST}\n`)
    expect(scan([], {}, dir).out).toEqual(['service_test_…Ts02.txt:1: service_test_…Ts02'])
  })

  it('no run printed a whole key, on stdout or stderr', () => {
    expect(runs.length).toBeGreaterThan(10)
    const printed = runs.flatMap((run) => [...run.out, ...run.err]).join('\n')
    for (const whole of ALL_KEYS) {
      expect(printed).not.toContain(whole)
    }
    expect(printed).not.toMatch(/_(live|test)_[A-Za-z0-9]{32}/)
  })
})

describe('the gitleaks rule in docs/key-safety.md', () => {
  it('is the regular expression scan uses', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/key-safety.md'), 'utf8')
    const rule = /^regex = '''(.+)'''$/m.exec(doc)?.[1]
    expect(rule).toBe(keyScanPattern('service').source)
  })
})
