// `contacts-api backup` and `restore` on SQLite: a backup taken while a server writes holds every
// contact acknowledged before it began, whole, with its events, and a server starts on its restore;
// every refusal is one line, exit 1, nothing changed; kill -9 mid-backup leaves the source whole and
// nothing under the target's name. On PostgreSQL both print the commands.
import { spawn } from 'node:child_process'
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { cliCommand, startServerProcess } from './processes.js'

const APP_SECRET = 'backup-test-secret-0123456789abcdef0123456789'

async function cli(argv: string[], env: Record<string, string>) {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, env, { out: (text) => out.push(text), err: (text) => err.push(text) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

const sha = (file: string) => readFileSync(file).toString('base64')

describe('backup and restore on SQLite', () => {
  let dir: string
  let env: Record<string, string>
  let key: string
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'backup-'))
    env = { DATABASE_URL: `sqlite:${path.join(dir, 'live.sqlite')}`, SECRET: APP_SECRET, LOG_LEVEL: 'silent' }
    const created = await cli(['accounts', 'create', '--name', 'Acme', '--json'], env)
    key = (JSON.parse(created.out) as { api_key: { secret: string } }).api_key.secret
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('a backup taken while a server writes holds every contact acknowledged before it, and restores', async () => {
    const server = await startServerProcess(env)
    const acknowledged = new Map<string, unknown>()
    let writing = true
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        const res = await fetch(`${server.base}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ email: `w${i}@example.com`, first_name: `Writer ${i}`, tags: ['backup'] }),
        })
        const body = (await res.json()) as { id: string }
        expect(res.status).toBe(201)
        acknowledged.set(body.id, body)
      }
    })()
    try {
      while (acknowledged.size < 50) {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      const before = new Map(acknowledged)
      const target = path.join(dir, 'during.sqlite')
      const backup = await cli(['backup', '--to', target], env)
      expect(backup.code, backup.err).toBe(0)
      expect(backup.out).toContain(`Backed up`)
      expect(backup.out).toContain('SECRET')
      // Its contacts and sealed secrets are for this user alone, as the database's are.
      expect(statSync(target).mode & 0o777).toBe(0o600)
      writing = false
      await writer
      expect(acknowledged.size).toBeGreaterThan(before.size) // the writes went on during the backup

      const restoredEnv = { ...env, DATABASE_URL: `sqlite:${path.join(dir, 'restored.sqlite')}` }
      const restore = await cli(['restore', '--from', target], restoredEnv)
      expect(restore.code, restore.err).toBe(0)
      expect(statSync(path.join(dir, 'restored.sqlite')).mode & 0o777).toBe(0o600)
      const restored = await startServerProcess(restoredEnv)
      try {
        for (const [id, body] of before) {
          const res = await fetch(`${restored.base}/api/v1/contacts/${id}`, {
            headers: { authorization: `Bearer ${key}` },
          })
          expect(res.status).toBe(200)
          expect(await res.json()).toEqual(body)
        }
        const events = new Set<string>()
        let after = ''
        for (;;) {
          const res = await fetch(`${restored.base}/api/v1/events?limit=100${after ? `&after=${after}` : ''}`, {
            headers: { authorization: `Bearer ${key}` },
          })
          const page = (await res.json()) as {
            events: Array<{ data: { object: { id: string } } }>
            next_cursor: string
          }
          for (const event of page.events) {
            events.add(event.data.object.id)
          }
          if (page.events.length < 100) {
            break
          }
          after = encodeURIComponent(page.next_cursor)
        }
        for (const id of before.keys()) {
          expect(events.has(id), id).toBe(true)
        }
      } finally {
        await restored.stop()
      }
    } finally {
      writing = false
      await writer.catch(() => {})
      await server.stop()
    }
  }, 60_000)

  it('refuses, in one line and changing nothing: an existing target, a path under a file, a damaged or foreign file, a newer schema', async () => {
    const good = path.join(dir, 'good.sqlite')
    expect((await cli(['backup', '--to', good], env)).code).toBe(0)
    const live = path.join(dir, 'live.sqlite')
    const liveBefore = statSync(live).mtimeMs

    const exists = await cli(['backup', '--to', good], env)
    expect(exists).toMatchObject({ code: 1, out: '' })
    expect(exists.err).toMatch(/^contacts-api: .*good\.sqlite exists: a backup never overwrites a file/)
    const underFile = await cli(['backup', '--to', path.join(good, 'x.sqlite')], env)
    expect(underFile.code).toBe(1)
    expect(underFile.err).toContain('is not a directory')
    const missingDir = await cli(['backup', '--to', path.join(dir, 'no-such-dir', 'x.sqlite')], env)
    expect(missingDir.code).toBe(1)
    expect(missingDir.err).toContain(`${path.join(dir, 'no-such-dir')} does not exist`)

    const target = { ...env, DATABASE_URL: `sqlite:${path.join(dir, 'target.sqlite')}` }
    const truncated = path.join(dir, 'truncated.sqlite')
    writeFileSync(truncated, readFileSync(good).subarray(0, 8192))
    const text = path.join(dir, 'text.sqlite')
    writeFileSync(text, 'not a database\n')
    const newer = path.join(dir, 'newer.sqlite')
    copyFileSync(good, newer)
    const db = new SQLite(newer)
    db.prepare(
      "insert into kysely_migration (name, timestamp) values ('29991231T000000_from_the_future', '2999-12-31')",
    ).run()
    db.close()
    for (const [file, message] of [
      [truncated, 'is not a readable SQLite database'],
      [text, 'is not a readable SQLite database'],
      [newer, 'was made by a newer release (its migration 29991231T000000_from_the_future is unknown here)'],
      [path.join(dir, 'missing.sqlite'), 'there is no file'],
    ] as const) {
      const refused = await cli(['restore', '--from', file, '--force'], target)
      expect(refused.code, file).toBe(1)
      expect(refused.err).toContain(message)
      expect(refused.err.split('\n')).toHaveLength(1)
      expect(existsSync(path.join(dir, 'target.sqlite'))).toBe(false)
    }

    // A database that holds accounts is replaced only with --force.
    const live2 = { ...env }
    const withData = await cli(['restore', '--from', good], live2)
    expect(withData.code).toBe(1)
    expect(withData.err).toContain('holds accounts')
    expect(statSync(live).mtimeMs).toBe(liveBefore)
    expect(
      (
        await cli(['restore', '--from', good, '--force'], {
          ...env,
          DATABASE_URL: `sqlite:${path.join(dir, 'copy.sqlite')}`,
        })
      ).code,
    ).toBe(0)
    expect(readdirSync(dir).filter((name) => name.endsWith('.partial'))).toEqual([])
  })

  it('refuses a restore over a database a running server has open, and the server keeps its data', async () => {
    const live = path.join(dir, 'live.sqlite')
    const backup = path.join(dir, 'for-open.sqlite')
    expect((await cli(['backup', '--to', backup], env)).code).toBe(0)
    const server = await startServerProcess(env)
    try {
      const refused = await cli(['restore', '--from', backup, '--force'], env)
      expect(refused).toMatchObject({ code: 1, out: '' })
      expect(refused.err).toBe(
        `contacts-api: ${live} is open in another process (a running server?): stop it first; nothing was changed`,
      )
      const res = await fetch(`${server.base}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } })
      expect(res.status).toBe(200)
    } finally {
      await server.stop()
    }
    // Stopped, the same restore goes through.
    expect((await cli(['restore', '--from', backup, '--force'], env)).code).toBe(0)
  }, 60_000)

  it('restores without SECRET only with the secret the backup was taken with', async () => {
    const backup = path.join(dir, 'with-secret.sqlite')
    expect((await cli(['backup', '--to', backup], env)).code).toBe(0)
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'restore-secret-'))
    try {
      const { SECRET: _, ...noSecret } = env
      const target = { ...noSecret, DATABASE_URL: `sqlite:${path.join(elsewhere, 'db.sqlite')}` }
      // None kept: refused, nothing written.
      const refused = await cli(['restore', '--from', backup], target)
      expect(refused.code).toBe(1)
      expect(refused.err).toContain(`${path.join(elsewhere, 'secret')} does not exist: set SECRET`)
      expect(readdirSync(elsewhere)).toEqual([])
      // Kept beside the backup (as the backup's message says): copied beside the restored database.
      writeFileSync(path.join(dir, 'secret'), 'the-secret-kept-with-the-backup', { mode: 0o600 })
      const restored = await cli(['restore', '--from', backup], target)
      expect(restored.code, restored.err).toBe(0)
      expect(restored.out).toContain(`Copied the backup's secret file to ${path.join(elsewhere, 'secret')}`)
      expect(readFileSync(path.join(elsewhere, 'secret'), 'utf8')).toBe('the-secret-kept-with-the-backup')
      expect(statSync(path.join(elsewhere, 'secret')).mode & 0o777).toBe(0o600)
      // A secret file of another database already there is replaced by the backup's, and kept aside.
      writeFileSync(path.join(elsewhere, 'secret'), 'a-fresh-database-secret', { mode: 0o600 })
      const replaced = await cli(['restore', '--from', backup, '--force'], target)
      expect(replaced.code, replaced.err).toBe(0)
      expect(replaced.out).toContain(`Replaced the secret file ${path.join(elsewhere, 'secret')} with the backup's`)
      expect(readFileSync(path.join(elsewhere, 'secret'), 'utf8')).toBe('the-secret-kept-with-the-backup')
      const keptAside = readdirSync(elsewhere).filter((name) => name.startsWith('secret.before-restore-'))
      expect(keptAside).toHaveLength(1)
      expect(readFileSync(path.join(elsewhere, keptAside[0] ?? ''), 'utf8')).toBe('a-fresh-database-secret')
    } finally {
      rmSync(path.join(dir, 'secret'), { force: true })
      rmSync(elsewhere, { recursive: true, force: true })
    }
  })

  it('replaces a damaged database with --force, and restores through a link to a file not there yet', async () => {
    const backup = path.join(dir, 'for-damaged.sqlite')
    expect((await cli(['backup', '--to', backup], env)).code).toBe(0)
    const damaged = path.join(dir, 'damaged.sqlite')
    writeFileSync(damaged, 'garbage, not a database\n')
    const target = { ...env, DATABASE_URL: `sqlite:${damaged}` }
    const refused = await cli(['restore', '--from', backup], target)
    expect(refused).toMatchObject({ code: 1, out: '' })
    expect(refused.err).toBe(
      `contacts-api: ${damaged} is not a readable Contacts API database: restore replaces it with --force; nothing was changed`,
    )
    // Ours, with accounts, seen through another database's write-ahead log: another database.
    const withForeignWal = path.join(dir, 'foreign-wal.sqlite')
    copyFileSync(backup, withForeignWal)
    const other = new SQLite(path.join(dir, 'other.sqlite'))
    other.pragma('journal_mode = WAL')
    other.pragma('wal_autocheckpoint = 0')
    other.exec("create table notes (body text); insert into notes values ('another database')")
    copyFileSync(path.join(dir, 'other.sqlite-wal'), `${withForeignWal}-wal`)
    other.close()
    const foreign = await cli(['restore', '--from', backup], { ...env, DATABASE_URL: `sqlite:${withForeignWal}` })
    expect(foreign.code).toBe(1)
    expect(foreign.err).toContain('is not a readable Contacts API database')
    const forced = await cli(['restore', '--from', backup, '--force'], target)
    expect(forced.code, forced.err).toBe(0)
    expect(new SQLite(damaged, { readonly: true }).pragma('quick_check')).toEqual([{ quick_check: 'ok' }])

    const link = path.join(dir, 'link-to-later.sqlite')
    const later = path.join(dir, 'later.sqlite')
    symlinkSync(later, link)
    const linked = await cli(['restore', '--from', backup], { ...env, DATABASE_URL: `sqlite:${link}` })
    expect(linked.code, linked.err).toBe(0)
    expect(lstatSync(link).isSymbolicLink()).toBe(true)
    expect(statSync(later).isFile()).toBe(true)
  })

  it('restores what a database in write-ahead-log mode holds, and says the count it restored', async () => {
    const live = path.join(dir, 'wal-source.sqlite')
    copyFileSync(path.join(dir, 'for-damaged.sqlite'), live)
    const writer = new SQLite(live)
    writer.pragma('journal_mode = WAL')
    writer.pragma('wal_autocheckpoint = 0')
    const before = (writer.prepare('select count(*) as n from contacts').get() as { n: number }).n
    // A contact only in the write-ahead log: a copy of the main file alone would miss it.
    const [row] = writer.prepare('select * from contacts limit 1').all() as Array<Record<string, unknown>>
    writer
      .prepare(
        `insert into contacts (${Object.keys(row ?? {}).join(', ')}) values (${Object.keys(row ?? {})
          .map(() => '?')
          .join(', ')})`,
      )
      .run(
        ...Object.entries(row ?? {}).map(([column, value]) =>
          column === 'id' ? 'con_in_the_wal' : column === 'email_lower' ? 'wal@example.com' : value,
        ),
      )
    const into = path.join(dir, 'from-wal.sqlite')
    const restored = await cli(['restore', '--from', live], { ...env, DATABASE_URL: `sqlite:${into}` })
    writer.close()
    expect(restored.code, restored.err).toBe(0)
    expect(restored.out).toContain(`(${before + 1} contacts)`)
    const check = new SQLite(into, { readonly: true })
    expect(check.prepare("select count(*) as n from contacts where id = 'con_in_the_wal'").get()).toEqual({ n: 1 })
    check.close()
  })

  it('refuses standard output, a link, and a directory as a backup', async () => {
    const dash = await cli(['backup', '--to', '-'], env)
    expect(dash.code).toBe(1)
    expect(dash.err).toContain('not to standard output')
    const link = path.join(dir, 'dangling.sqlite')
    symlinkSync(path.join(dir, 'nowhere', 'x.sqlite'), link)
    const linked = await cli(['backup', '--to', link], env)
    expect(linked.code).toBe(1)
    expect(linked.err).toContain('exists: a backup never overwrites a file')
    const fromDir = await cli(['restore', '--from', dir, '--force'], {
      ...env,
      DATABASE_URL: `sqlite:${path.join(dir, 'from-dir.sqlite')}`,
    })
    expect(fromDir.code).toBe(1)
    expect(fromDir.err).toBe(`contacts-api: ${dir} is not a file (a backup is one file); nothing was changed`)
  })

  it('kill -9 in the middle of a backup leaves the source whole and nothing under the target name', async () => {
    const big = path.join(dir, 'big.sqlite')
    copyFileSync(path.join(dir, 'good.sqlite'), big)
    const db = new SQLite(big)
    db.exec('create table filler (x blob)')
    const insert = db.prepare('insert into filler (x) values (randomblob(1048576))')
    db.transaction(() => {
      for (let i = 0; i < 300; i++) {
        insert.run()
      }
    })()
    db.close()
    const source = sha(big)
    const target = path.join(dir, 'killed.sqlite')
    const child = spawn(process.execPath, [...cliCommand(), 'backup', '--to', target], {
      env: { ...process.env, ...env, DATABASE_URL: `sqlite:${big}` },
      stdio: 'ignore',
    })
    // Killed once its partial file has appeared: mid-copy.
    for (let i = 0; i < 500 && !readdirSync(dir).some((name) => name.startsWith('.killed.sqlite.')); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    child.kill('SIGKILL')
    await new Promise((resolve) => child.once('exit', resolve))
    expect(existsSync(target)).toBe(false)
    expect(sha(big)).toBe(source)
    const check = new SQLite(big, { readonly: true })
    expect(check.pragma('quick_check')).toEqual([{ quick_check: 'ok' }])
    check.close()
  }, 60_000)
})

describe('backup and restore on PostgreSQL', () => {
  it('print the pg_dump and pg_restore commands for the database, without its password', async () => {
    const env = { DATABASE_URL: 'postgres://app:hunter2@db.internal:5432/contacts', SECRET: APP_SECRET }
    const backup = await cli(['backup', '--to', 'contacts.dump'], env)
    expect(backup.code).toBe(0)
    expect(backup.out).toContain(
      "pg_dump --format=custom --file='contacts.dump' 'postgres://app@db.internal:5432/contacts'",
    )
    expect(backup.out).not.toContain('hunter2')
    const restore = await cli(['restore', '--from', 'contacts.dump'], env)
    expect(restore.out).toContain(
      "pg_restore --no-owner --exit-on-error --dbname='postgres://app@db.internal:5432/contacts' 'contacts.dump'",
    )
    expect(restore.out).not.toContain('hunter2')
    expect((await cli(['backup'], env)).code).toBe(2)
  })
})
