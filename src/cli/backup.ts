// `contacts-api backup --to FILE` and `contacts-api restore --from FILE [--force]`
// (docs/operations.md#backup-and-restore). On SQLite, a backup is `VACUUM INTO`: one read
// transaction, so a consistent copy while the server writes; written under a temporary name and
// renamed, so a backup cut short leaves no file under the target's name. On PostgreSQL both print
// the pg_dump / pg_restore commands for the configured database.
import {
  chmodSync,
  closeSync,
  constants,
  copyFileSync,
  existsSync,
  fsyncSync,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { ConfigError, loadConfig } from '../config.js'
import { knownMigrations } from '../db/migrate.js'
import { localSecretFile } from '../deps.js'
import { parseArguments, UsageError } from './arguments.js'
import type { CliIo } from './io.js'

const USAGE = `Usage: contacts-api backup --to FILE
       contacts-api restore --from FILE [--force]

  backup    SQLite: a consistent copy of the database while the server runs, to a new FILE.
            PostgreSQL: prints the pg_dump command for DATABASE_URL.
  restore   SQLite: replaces the database with FILE's (stop the server first); refuses a database
            that holds accounts unless --force. PostgreSQL: prints the pg_restore command.
  Keep the SECRET the database was used with beside its backup (the command says which).`

/** A refusal said in one line: exit 1, nothing changed. */
class Refusal extends Error {}

const OPTIONS = {
  to: { type: 'string' },
  from: { type: 'string' },
  force: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

export async function runBackup(
  command: 'backup' | 'restore',
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: CliIo,
): Promise<number> {
  try {
    const { values, positionals } = parse(argv)
    if (values.help) {
      io.out(USAGE)
      return 0
    }
    if (positionals.length > 0) {
      throw new UsageError(`unexpected argument "${positionals[0]}"`)
    }
    const file = command === 'backup' ? values.to : values.from
    if (!file) {
      throw new UsageError(`${command} needs ${command === 'backup' ? '--to FILE' : '--from FILE'}`)
    }
    const { database } = loadConfig(env)
    if (database.kind === 'postgres') {
      io.out(command === 'backup' ? pgDumpCommand(database.url, file) : pgRestoreCommand(database.url, file))
      return 0
    }
    if (database.path === ':memory:') {
      throw new Refusal('DATABASE_URL is sqlite::memory:, which has nothing to back up or restore into')
    }
    io.out(
      command === 'backup'
        ? backupSqlite(database.path, path.resolve(file), secretOf(database.path, env))
        : restoreSqlite(path.resolve(file), database.path, values.force === true, env),
    )
    return 0
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`contacts-api: ${error.message}\n\n${USAGE}`)
      return 2
    }
    if (error instanceof ConfigError) {
      io.err(`contacts-api: invalid configuration: ${error.problems.join('; ')}`)
      return 2
    }
    if (error instanceof Refusal) {
      io.err(`contacts-api: ${error.message}`)
      return 1
    }
    throw error
  }
}

const parse = (argv: string[]) => parseArguments(argv, OPTIONS)

/** Which secret the database's sealed values need: the environment's, or the file beside it. */
const secretOf = (databasePath: string, env: NodeJS.ProcessEnv): string =>
  env.SECRET ? 'the SECRET it runs with (from the environment)' : `the secret file ${localSecretFile(databasePath)}`

function backupSqlite(source: string, target: string, secret: string): string {
  if (!existsSync(source)) {
    throw new Refusal(`there is no database at ${source} to back up`)
  }
  if (path.basename(target) === '-') {
    throw new Refusal('a backup is written to a file (--to FILE), not to standard output')
  }
  const dir = path.dirname(target)
  const dirStat = statSync(dir, { throwIfNoEntry: false })
  if (!dirStat?.isDirectory()) {
    throw new Refusal(`cannot write ${target}: ${dir} ${dirStat ? 'is not a directory' : 'does not exist'}`)
  }
  // lstat: a link, even one to nowhere, is a file a backup would replace.
  if (lstatSync(target, { throwIfNoEntry: false })) {
    throw new Refusal(`${target} exists: a backup never overwrites a file; choose a new name`)
  }
  try {
    const contacts = writeWhole(target, (partial) => copyDatabase(source, partial))
    return [
      `Backed up ${source} to ${target} (${statSync(target).size} bytes, ${contacts} contacts).`,
      `It needs ${secret}: keep a copy of it with the backup, or the restored database's webhook secrets, sessions and cursors cannot be read.`,
    ].join('\n')
  } catch (error) {
    throw new Refusal(`cannot back up to ${target}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * Writes `target` through a file beside it (so the rename is atomic; named by the process, so two
 * runs never share it), renamed once `fill` has written it whole: a write cut short leaves nothing
 * under the target's name. `beforeRename` runs just before the rename.
 */
function writeWhole<T>(target: string, fill: (partial: string) => T, beforeRename = () => {}): T {
  const dir = path.dirname(target)
  const partial = path.join(dir, `.${path.basename(target)}.${process.pid}.partial`)
  try {
    const result = fill(partial)
    beforeRename()
    renameSync(partial, target)
    syncFile(dir)
    return result
  } catch (error) {
    rmSync(partial, { force: true })
    throw error
  }
}

/**
 * A consistent copy of the database at `source` (its write-ahead log included) to the new file
 * `copy`, with `VACUUM INTO`: one read transaction, while writers go on. Readable by this user
 * alone, as the database is, and synced. Returns the copy's contact count.
 */
function copyDatabase(source: string, copy: string): number {
  const db = new SQLite(source, { readonly: true, fileMustExist: true })
  try {
    db.pragma('busy_timeout = 10000')
    db.prepare('VACUUM INTO ?').run(copy)
  } finally {
    db.close()
  }
  chmodSync(copy, 0o600)
  syncFile(copy)
  // Counted in the copy: the source has gone on meanwhile.
  const written = new SQLite(copy, { readonly: true, fileMustExist: true })
  try {
    return (written.prepare('select count(*) as n from contacts').get() as { n: number }).n
  } finally {
    written.close()
  }
}

function restoreSqlite(source: string, configured: string, force: boolean, env: NodeJS.ProcessEnv): string {
  checkBackup(source)
  const target = whereLinked(configured)
  const current = databaseState(target)
  if (current !== 'empty' && !force) {
    throw new Refusal(
      current === 'unreadable'
        ? `${target} is not a readable Contacts API database: restore replaces it with --force; nothing was changed`
        : `${target} holds accounts: restore replaces the whole database. Stop the server, then run again with --force`,
    )
  }
  const secret = secretPlan(source, configured, env)
  if (current !== 'unreadable') {
    refuseWhileOpen(target)
  }
  let contacts: number
  try {
    contacts = writeWhole(
      target,
      // Through SQLite, not a file copy: a backup still in write-ahead-log mode keeps its last writes there.
      (partial) => copyDatabase(source, partial),
      () => {
        // The old database's write-ahead log belongs to the old file: left there, SQLite would replay it.
        for (const suffix of ['-wal', '-shm']) {
          rmSync(`${target}${suffix}`, { force: true })
        }
      },
    )
    if (secret.copy) {
      if (existsSync(secret.copy.to)) {
        renameSync(secret.copy.to, secret.copy.keptAs)
      }
      copyFileSync(secret.copy.from, secret.copy.to, constants.COPYFILE_EXCL)
      chmodSync(secret.copy.to, 0o600)
    }
  } catch (error) {
    throw new Refusal(`cannot restore into ${target}: ${error instanceof Error ? error.message : String(error)}`)
  }
  return [`Restored ${source} into ${target} (${contacts} contacts).`, secret.said].join('\n')
}

/** A database reached through a link (even one to a file not there yet) is replaced where it is, not the link. */
function whereLinked(file: string): string {
  const stat = lstatSync(file, { throwIfNoEntry: false })
  if (stat?.isSymbolicLink()) {
    return existsSync(file) ? realpathSync(file) : path.resolve(path.dirname(file), readlinkSync(file))
  }
  return file
}

/**
 * A server with the database open would go on writing to the file restore replaces, and its writes
 * would be lost: leaving write-ahead-log mode needs the only connection, so it fails while another
 * process has the file open (the mode is set again by the server's next start).
 */
function refuseWhileOpen(target: string): void {
  if (!existsSync(target)) {
    return
  }
  const db = new SQLite(target, { fileMustExist: true })
  try {
    db.pragma('busy_timeout = 0')
    db.pragma('journal_mode = DELETE')
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY') {
      throw new Refusal(`${target} is open in another process (a running server?): stop it first; nothing was changed`)
    }
    throw error
  } finally {
    db.close()
  }
}

/**
 * Without SECRET the server reads the secret file beside its database. The restored database's
 * webhook secrets, sessions and cursors need the secret the backup was taken with: the file kept
 * beside the backup is copied there (the one there before is kept as `secret.before-restore-TIME`);
 * without one, a secret file already there is used (said), and with neither restore refuses.
 */
function secretPlan(
  source: string,
  target: string,
  env: NodeJS.ProcessEnv,
): { copy?: { from: string; to: string; keptAs: string }; said: string } {
  const needed = localSecretFile(target)
  const beside = localSecretFile(source)
  if (env.SECRET) {
    return {
      said: existsSync(beside)
        ? `Start the server with the SECRET the backup was taken with: SECRET is set here, so the secret file beside the backup (${beside}) is not used.`
        : 'Start the server with the SECRET the backup was taken with.',
    }
  }
  const kept = existsSync(beside) && path.resolve(beside) !== path.resolve(needed)
  if (kept && existsSync(needed) && readFileSync(beside).equals(readFileSync(needed))) {
    return { said: `It uses the secret file ${needed}, the same as the one beside the backup.` }
  }
  if (kept) {
    // Named by the time, so a second restore never overwrites what the first one kept.
    const keptAs = `${needed}.before-restore-${new Date().toISOString().replace(/[-:]|\.\d+/g, '')}`
    return {
      copy: { from: beside, to: needed, keptAs },
      said: existsSync(needed)
        ? `Replaced the secret file ${needed} with the backup's (the one there before is ${keptAs}).`
        : `Copied the backup's secret file to ${needed}: the server will use it.`,
    }
  }
  if (existsSync(needed)) {
    return {
      said: `It uses the secret file ${needed}, which was there before: if the backup was taken with another secret, put that one there before starting the server.`,
    }
  }
  throw new Refusal(
    `the backup needs the secret it was taken with, and ${needed} does not exist: set SECRET, or copy the secret file kept with the backup to ${needed} (or beside the backup); nothing was changed`,
  )
}

/** Refuses anything but a whole database of a schema this release knows. */
function checkBackup(file: string): void {
  const stat = statSync(file, { throwIfNoEntry: false })
  if (!stat) {
    throw new Refusal(`there is no file ${file}`)
  }
  if (!stat.isFile()) {
    throw new Refusal(`${file} is not a file (a backup is one file); nothing was changed`)
  }
  let db: SQLite.Database | undefined
  try {
    db = new SQLite(file, { readonly: true, fileMustExist: true })
    const [check] = db.pragma('quick_check') as Array<{ quick_check: string }>
    if (check?.quick_check !== 'ok') {
      throw new Refusal(`${file} is damaged (quick_check: ${check?.quick_check ?? 'no answer'}); nothing was changed`)
    }
    const hasMigrations = db
      .prepare("select 1 from sqlite_master where type = 'table' and name = 'kysely_migration'")
      .get()
    if (!hasMigrations) {
      throw new Refusal(`${file} is not a Contacts API database (it has no migrations table); nothing was changed`)
    }
    const known = new Set(knownMigrations())
    const names = (db.prepare('select name from kysely_migration').all() as Array<{ name: string }>).map((r) => r.name)
    const unknown = names.find((name) => !known.has(name))
    if (unknown) {
      throw new Refusal(
        `${file} was made by a newer release (its migration ${unknown} is unknown here): restore it with that release; nothing was changed`,
      )
    }
  } catch (error) {
    if (error instanceof Refusal) {
      throw error
    }
    throw new Refusal(
      `${file} is not a readable SQLite database (${error instanceof Error ? error.message : String(error)}); nothing was changed`,
    )
  } finally {
    db?.close()
  }
}

/**
 * What restore would replace: nothing of value (no file, no table, or this service's tables and no
 * account), a database with accounts, or anything else: a file SQLite cannot read, or other
 * tables (another application's database, or ours seen through another database's `-wal`).
 */
function databaseState(file: string): 'empty' | 'accounts' | 'unreadable' {
  if (!existsSync(file)) {
    return 'empty'
  }
  let db: SQLite.Database | undefined
  try {
    db = new SQLite(file, { readonly: true, fileMustExist: true })
    const rows = db.prepare("select name from sqlite_master where type = 'table'").all() as Array<{ name: string }>
    const tables = new Set(rows.map((row) => row.name))
    if (tables.size === 0) {
      return 'empty'
    }
    if (!tables.has('accounts') || !tables.has('kysely_migration')) {
      return 'unreadable'
    }
    return db.prepare('select 1 from accounts limit 1').get() !== undefined ? 'accounts' : 'empty'
  } catch {
    // Damaged, or not a database: what a restore is for, with --force.
    return 'unreadable'
  } finally {
    db?.close()
  }
}

function syncFile(file: string): void {
  const fd = openSync(file, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** The URL as the command line shows it: no password (pg_dump reads PGPASSWORD or ~/.pgpass). */
function withoutPassword(url: string): { url: string; hadPassword: boolean } {
  const parsed = new URL(url)
  const hadPassword = parsed.password !== ''
  parsed.password = ''
  return { url: parsed.toString(), hadPassword }
}

const quoted = (text: string): string => `'${text.replaceAll("'", "'\\''")}'`

function pgDumpCommand(url: string, file: string): string {
  const { url: shown, hadPassword } = withoutPassword(url)
  const database = new URL(url).pathname.slice(1)
  return [
    `PostgreSQL: back up the database ${database} with pg_dump (a consistent snapshot while the service runs):`,
    `  pg_dump --format=custom --file=${quoted(file)} ${quoted(shown)}`,
    ...(hadPassword ? ['  (the password is not shown: set PGPASSWORD, or use ~/.pgpass)'] : []),
    'Keep the SECRET the service runs with beside the dump: webhook secrets, sessions and cursors need it.',
  ].join('\n')
}

function pgRestoreCommand(url: string, file: string): string {
  const { url: shown, hadPassword } = withoutPassword(url)
  const database = new URL(url).pathname.slice(1)
  return [
    `PostgreSQL: restore into the database ${database} (create it empty first; stop the service) with pg_restore:`,
    `  pg_restore --no-owner --exit-on-error --dbname=${quoted(shown)} ${quoted(file)}`,
    ...(hadPassword ? ['  (the password is not shown: set PGPASSWORD, or use ~/.pgpass)'] : []),
    'Then start the service with the SECRET the dump was taken with; it migrates what is older.',
  ].join('\n')
}
