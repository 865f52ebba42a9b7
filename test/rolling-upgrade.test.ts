// A rolling upgrade on PostgreSQL (docs/operations.md#upgrades): the previous release serves load
// while this release migrates the database and starts beside it, and the previous one answers every
// request of that load with a 2xx throughout. And the rule that makes it hold: a migration newer
// than the previous release only expands (no drop, no rename, no new NOT NULL on a column it had).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from './dialects.js'
import { createThrowawaySchema, type ThrowawaySchema } from './harness.js'
import { cliCommand, type ServerProcess, startServerProcess } from './processes.js'

/** The release before this one: the commit of the last landing (update it with each release). */
const PREVIOUS_RELEASE = '2a4f932c431b1230b705e6c822657881f2937025'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const databaseUrl = process.env.TEST_DATABASE_URL
const SECRET = 'rolling-upgrade-secret-0123456789abcdef0123'

/** The previous release's build, from git, compiled once per machine with this tree's dependencies. */
function previousRelease(): string {
  const dir = path.join(tmpdir(), `contacts-api-release-${PREVIOUS_RELEASE.slice(0, 12)}`)
  if (existsSync(path.join(dir, 'dist', 'main.js'))) {
    return dir
  }
  mkdirSync(dir, { recursive: true })
  const archive = execFileSync(
    'git',
    ['archive', PREVIOUS_RELEASE, 'src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'],
    {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
    },
  )
  execFileSync('tar', ['-x', '-C', dir], { input: archive })
  if (!existsSync(path.join(dir, 'node_modules'))) {
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir')
  }
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: dir,
  })
  return dir
}

/** Migration files of this tree that the previous release did not have. */
function newMigrations(): string[] {
  const listed = execFileSync('git', ['ls-tree', '--name-only', PREVIOUS_RELEASE, 'src/db/migrations/'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
  const before = new Set(listed.split('\n').map((file) => path.basename(file)))
  return execFileSync('ls', [path.join(ROOT, 'src/db/migrations')], { encoding: 'utf8' })
    .split('\n')
    .filter((file) => /^\d{8}T\d{6}-.*\.ts$/.test(file) && !before.has(file))
}

/** What a migration may not do while the previous release still runs: change what it reads or writes. */
const CONTRACTING =
  /\.(?:dropTable|dropColumn|renameColumn|renameTo|dropConstraint)\(|setNotNull|setDataType|\bdrop\s+(?:table|column)\b|\brename\s+(?:to|column)\b|\bset\s+not\s+null\b/i

describe('migrations newer than the previous release', () => {
  it('only expand: nothing the previous release reads or writes is dropped, renamed or made stricter', () => {
    const files = newMigrations()
    for (const file of files) {
      const source = readFileSync(path.join(ROOT, 'src/db/migrations', file), 'utf8')
      // `down` undoes the migration on purpose; only `up` runs during a rolling upgrade.
      const up = source.split(/export async function down/)[0] ?? ''
      expect(CONTRACTING.test(up), `${file} contracts the schema (docs/operations.md#upgrades)`).toBe(false)
    }
  })
})

// On the PostgreSQL legs only: the SQLite legs run beside the bench, and its processes take
// connections of the same server.
describe.skipIf(!databaseUrl || !testDialects().includes('postgres'))(
  'a rolling upgrade from the previous release on PostgreSQL',
  () => {
    let schema: ThrowawaySchema
    let previous: ServerProcess
    let next: ServerProcess | undefined
    let env: Record<string, string>

    beforeAll(async () => {
      const release = previousRelease()
      schema = await createThrowawaySchema('upgrade')
      env = { ...schema.env, SECRET, RATE_LIMIT_PER_SECOND: '0' }
      // The previous release creates its schema as it would in production, and serves.
      previous = await startServerProcess(env, 'serve', { script: [path.join(release, 'dist/main.js')] })
    }, 180_000)

    afterAll(async () => {
      await next?.stop()
      await previous?.stop()
      await schema?.drop()
    })

    it('the previous release answers its load with 2xx while this release migrates and starts beside it', async () => {
      const created = execFileSync(
        process.execPath,
        [path.join(previousRelease(), 'dist/main.js'), 'accounts', 'create', '--name', 'Upgrade', '--json'],
        {
          env: { ...process.env, ...env, LOG_LEVEL: 'silent' },
          encoding: 'utf8',
        },
      )
      const key = (JSON.parse(created) as { api_key: { secret: string } }).api_key.secret
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
      const failures: string[] = []
      let requests = 0
      let running = true
      const call = async (base: string, method: string, url: string, body?: unknown) => {
        requests++
        try {
          const res = await fetch(`${base}/api/v1${url}`, {
            method,
            headers,
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          })
          const text = await res.text()
          if (res.status < 200 || res.status > 299) {
            failures.push(`${method} ${url}: ${res.status} ${text.slice(0, 200)}`)
          }
          return text ? (JSON.parse(text) as { id?: string; next_cursor?: string | null }) : {}
        } catch (error) {
          failures.push(`${method} ${url}: ${error instanceof Error ? error.message : String(error)}`)
          return {}
        }
      }
      // The load of a busy integration: every kind of request, on two connections' worth of loops.
      const load = async (base: string, worker: number) => {
        for (let i = 0; running; i++) {
          const contact = await call(base, 'POST', '/contacts', {
            email: `u${worker}-${i}@example.com`,
            tags: ['upgrade'],
          })
          if (!contact.id) {
            continue
          }
          await call(base, 'GET', `/contacts/${contact.id}`)
          await call(base, 'PATCH', `/contacts/${contact.id}`, { first_name: `Round ${i}` })
          await call(base, 'GET', '/contacts?limit=20&tag=upgrade')
          await call(base, 'GET', '/events?limit=20')
          await call(base, 'GET', '/me')
          if (i % 3 === 0) {
            await call(base, 'DELETE', `/contacts/${contact.id}`)
          }
        }
      }
      const loops = [load(previous.base, 1), load(previous.base, 2)]
      await new Promise((resolve) => setTimeout(resolve, 1500))
      const beforeUpgrade = requests
      // This release: migrate, then start beside the previous one, on the same database.
      execFileSync(process.execPath, [...cliCommand(), 'migrate'], {
        cwd: ROOT,
        env: { ...process.env, ...env, LOG_LEVEL: 'silent' },
      })
      next = await startServerProcess(env)
      const nextLoop = load(next.base, 3)
      await new Promise((resolve) => setTimeout(resolve, 3000))
      running = false
      await Promise.all([...loops, nextLoop])
      expect(beforeUpgrade).toBeGreaterThan(20)
      expect(requests).toBeGreaterThan(beforeUpgrade + 50)
      expect(failures).toEqual([])
    }, 180_000)
  },
)
