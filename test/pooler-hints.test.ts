// Behind a transaction pooler without DATABASE_POOLER=transaction, the driver's named statements
// meet server connections that another client prepared on (42P05) or that lack the one this client
// prepared (26000): the error then says which setting fixes it (src/db/database.ts), and a start
// that fails on it, or on an unreachable DATABASE_DIRECT_URL, is one line naming the setting
// (src/cli/cli.ts). Both refusals are provoked here on the real server, on one connection, the
// way a pooler provokes them by switching connections under the client.
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/cli.js'
import { openDatabase, POOLER_HINT } from '../src/db/database.js'
import { freePort } from './processes.js'

const url = process.env.TEST_DATABASE_URL

describe.skipIf(!url)('a named statement refused by the server names DATABASE_POOLER=transaction', () => {
  const onOneConnection = async (run: (exec: (query: ReturnType<typeof sql>) => Promise<unknown>) => Promise<void>) => {
    // The server itself, never the pooler: named statements are on only when no pooler is declared.
    const database = openDatabase({ kind: 'postgres', url: url ?? '' })
    try {
      await database.db.connection().execute((connection) => run((query) => query.execute(connection)))
    } finally {
      await database.close()
    }
  }
  const failure = async (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    )

  it('42P05: the name is already taken on the server connection (another client prepared it there)', async () => {
    await onOneConnection(async (exec) => {
      // Unnamed (not a data statement), so it takes the name this client's first statement will get.
      await exec(sql.raw('prepare contacts_api_0 as select 1'))
      const error = await failure(exec(sql`select ${1}::int as one`))
      expect(error?.code).toBe('42P05')
      expect(error?.message).toBe(`prepared statement "contacts_api_0" already exists: ${POOLER_HINT}`)
    })
  })

  it('26000: the statement this client prepared is not on the server connection it now has', async () => {
    await onOneConnection(async (exec) => {
      expect(await exec(sql`select ${1}::int as one`)).toEqual({ rows: [{ one: 1 }] })
      await exec(sql.raw('deallocate all'))
      const error = await failure(exec(sql`select ${1}::int as one`))
      expect(error?.code).toBe('26000')
      expect(error?.message).toBe(`prepared statement "contacts_api_0" does not exist: ${POOLER_HINT}`)
    })
  })

  it('other errors are left as they are', async () => {
    await onOneConnection(async (exec) => {
      const error = await failure(exec(sql`select ${1}::int / 0 as one`))
      expect(error?.code).toBe('22012')
      expect(error?.message).toBe('division by zero')
    })
  })
})

describe.skipIf(!url)('a start that fails on a setting says which, in one line', () => {
  it('an unreachable DATABASE_DIRECT_URL', async () => {
    const err: string[] = []
    const code = await runCli(
      ['serve'],
      {
        DATABASE_URL: url ?? '',
        DATABASE_DIRECT_URL: 'postgres://postgres@127.0.0.1:1/nowhere',
        SECRET: 'pooler-hints-test-secret-0123456789abcdef',
        PORT: String(await freePort()),
      },
      { out: () => {}, err: (text) => err.push(text) },
    )
    expect(code).toBe(1)
    expect(err).toHaveLength(1)
    expect(err[0]).toMatch(
      /^contacts-api: cannot start: DATABASE_DIRECT_URL: cannot LISTEN for key revocations and feed commits there: /,
    )
    expect(err[0]).not.toContain('\n')
  })
})
