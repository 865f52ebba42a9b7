// Migrations on every dialect: up on a fresh database, down to nothing and up again, and the
// same schema (columns, tenant-first primary keys and foreign keys) on SQLite and PostgreSQL.
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAccountWithKey } from '../src/accounts/accounts.js'
import { liveTenant } from '../src/accounts/tenant.js'
import { createContactService } from '../src/contacts/contact-service.js'
import type { DatabaseHandle } from '../src/db/database.js'
import { isMigrated, migrateDown, migrateToLatest, migrationStatus } from '../src/db/migrate.js'
import { inTransaction } from '../src/db/transaction.js'
import { listEventRows } from '../src/events/events.store.js'
import { systemClock } from '../src/lib/clock.js'
import { type TestDialect, testDialects } from './dialects.js'
import { openTestDatabase } from './harness.js'
import { recordEvent } from './helpers.js'
import { MIGRATIONS, TABLES } from './schema-expectations.js'

const TENANT_TABLES = [
  'api_key_usage',
  'api_keys',
  'contact_tags',
  'contact_terms',
  'contacts',
  'events',
  'idempotency_keys',
]
/** docs/design.md#identifiers-and-storage's one exception: authentication finds the tenant from the key's digest. */
const UNIQUE_WITHOUT_TENANT = new Set(['api_keys_key_hash_key', 'users_email_key'])

/** A fresh, empty database of the dialect, as the harness opens them; dispose also closes it. */
async function openFresh(dialect: TestDialect): Promise<{ database: DatabaseHandle; dispose(): Promise<void> }> {
  const { database, dispose } = await openTestDatabase(dialect)
  return {
    database,
    async dispose() {
      await database.close()
      await dispose()
    },
  }
}

interface SchemaShape {
  /** `table.column`, sorted. */
  columns: string[]
  /** Primary-key columns in key order, by table. */
  primaryKeys: Record<string, string[]>
  /** Every foreign key's local columns in key order, by table. */
  foreignKeys: Record<string, string[][]>
  /** Every unique index created by the migrations (not the primary keys): name → columns. */
  uniqueIndexes: Record<string, { table: string; columns: string[] }>
}

/** The application's tables (not Kysely's bookkeeping) as the database itself describes them. */
async function describeSchema({ db, dialect }: DatabaseHandle): Promise<SchemaShape> {
  const shape: SchemaShape = { columns: [], primaryKeys: {}, foreignKeys: {}, uniqueIndexes: {} }
  const ours = (table: string) => !table.startsWith('kysely_') && !table.startsWith('sqlite_')

  if (dialect === 'sqlite') {
    const tables = (
      await sql<{ name: string }>`select name from sqlite_master where type = 'table' order by name`.execute(db)
    ).rows
      .map((r) => r.name)
      .filter(ours)
    for (const table of tables) {
      const columns = (
        await sql<{ name: string; pk: number }>`select name, pk from pragma_table_info(${table})`.execute(db)
      ).rows
      shape.columns.push(...columns.map((c) => `${table}.${c.name}`))
      shape.primaryKeys[table] = columns
        .filter((c) => c.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((c) => c.name)
      const fks = (
        await sql<{
          id: number
          seq: number
          from: string
        }>`select id, seq, "from" from pragma_foreign_key_list(${table})`.execute(db)
      ).rows
      const byId = new Map<number, Array<{ seq: number; from: string }>>()
      for (const fk of fks) {
        byId.set(fk.id, [...(byId.get(fk.id) ?? []), fk])
      }
      shape.foreignKeys[table] = [...byId.values()].map((cols) => cols.sort((a, b) => a.seq - b.seq).map((c) => c.from))
      const indexes = (
        await sql<{
          name: string
          unique: number
          origin: string
        }>`select name, "unique", origin from pragma_index_list(${table})`.execute(db)
      ).rows.filter((i) => i.unique === 1 && i.origin === 'c')
      for (const index of indexes) {
        const columns = (
          await sql<{ seqno: number; name: string }>`select seqno, name from pragma_index_info(${index.name})`.execute(
            db,
          )
        ).rows
        shape.uniqueIndexes[index.name] = {
          table,
          columns: columns.sort((a, b) => a.seqno - b.seqno).map((c) => c.name),
        }
      }
    }
  } else {
    const columns = (
      await sql<{ table_name: string; column_name: string }>`
        select table_name, column_name from information_schema.columns
        where table_schema = current_schema()`.execute(db)
    ).rows.filter((r) => ours(r.table_name))
    shape.columns.push(...columns.map((c) => `${c.table_name}.${c.column_name}`))
    const keyColumns = (
      await sql<{ constraint_type: string; constraint_name: string; table_name: string; column_name: string }>`
        select tc.constraint_type, tc.constraint_name, tc.table_name, kcu.column_name
        from information_schema.table_constraints tc
        join information_schema.key_column_usage kcu
          on kcu.constraint_schema = tc.constraint_schema and kcu.constraint_name = tc.constraint_name
         and kcu.table_name = tc.table_name
        where tc.table_schema = current_schema() and tc.constraint_type in ('PRIMARY KEY', 'FOREIGN KEY')
        order by tc.table_name, tc.constraint_name, kcu.ordinal_position`.execute(db)
    ).rows.filter((r) => ours(r.table_name))
    const foreign = new Map<string, { table: string; columns: string[] }>()
    for (const row of keyColumns) {
      if (row.constraint_type === 'PRIMARY KEY') {
        shape.primaryKeys[row.table_name] = [...(shape.primaryKeys[row.table_name] ?? []), row.column_name]
      } else {
        const fk = foreign.get(row.constraint_name) ?? { table: row.table_name, columns: [] }
        fk.columns.push(row.column_name)
        foreign.set(row.constraint_name, fk)
      }
    }
    for (const table of new Set(columns.map((c) => c.table_name))) {
      shape.foreignKeys[table] = [...foreign.values()].filter((fk) => fk.table === table).map((fk) => fk.columns)
    }
    // Unique indexes that are not a primary key, with their columns in index order.
    const indexes = (
      await sql<{ index_name: string; table_name: string; column_name: string }>`
        select i.relname as index_name, t.relname as table_name, a.attname as column_name
        from pg_index x
        join pg_class i on i.oid = x.indexrelid
        join pg_class t on t.oid = x.indrelid
        join pg_namespace n on n.oid = t.relnamespace
        cross join lateral unnest(x.indkey) with ordinality as k(attnum, position)
        join pg_attribute a on a.attrelid = t.oid and a.attnum = k.attnum
        where n.nspname = current_schema() and x.indisunique and not x.indisprimary
        order by i.relname, k.position`.execute(db)
    ).rows.filter((r) => ours(r.table_name))
    for (const row of indexes) {
      const index = shape.uniqueIndexes[row.index_name] ?? { table: row.table_name, columns: [] }
      index.columns.push(row.column_name)
      shape.uniqueIndexes[row.index_name] = index
    }
  }
  shape.columns.sort()
  for (const table of Object.keys(shape.foreignKeys)) {
    shape.foreignKeys[table]?.sort((a, b) => a.join().localeCompare(b.join()))
  }
  return shape
}

const tablesOf = async (database: DatabaseHandle): Promise<string[]> =>
  [...new Set((await describeSchema(database)).columns.map((c) => c.split('.')[0] ?? ''))].sort()

describe.each(testDialects())('migrations on %s', (dialect) => {
  let database: DatabaseHandle
  let dispose: () => Promise<void>
  beforeAll(async () => {
    ;({ database, dispose } = await openFresh(dialect))
  })
  afterAll(() => dispose?.())

  it('migrate up on a fresh database creates every table', async () => {
    expect(await tablesOf(database)).toEqual([])
    expect(await isMigrated(database)).toBe(false)
    expect(await migrationStatus(database)).toEqual(MIGRATIONS.map((name) => ({ name, executed_at: null })))

    expect(await migrateToLatest(database)).toEqual(MIGRATIONS)
    expect(await tablesOf(database)).toEqual(TABLES)
    expect(await isMigrated(database)).toBe(true)
    expect(await migrationStatus(database)).toEqual(
      MIGRATIONS.map((name) => ({
        name,
        executed_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      })),
    )
    expect(await migrateToLatest(database)).toEqual([])
  })

  it('migrate down to nothing, then up again', async () => {
    const { account } = await createAccountWithKey(database.db, {
      name: 'Before',
      now: new Date(),
      keyPrefix: 'service',
    })
    expect(account.name).toBe('Before')

    // One migration at a time, newest first.
    for (const name of [...MIGRATIONS].reverse()) {
      expect(await migrateDown(database)).toEqual([name])
    }
    expect(await tablesOf(database)).toEqual([])
    expect(await isMigrated(database)).toBe(false)
    expect(await migrateDown(database)).toEqual([])

    expect(await migrateToLatest(database)).toEqual(MIGRATIONS)
    expect(await tablesOf(database)).toEqual(TABLES)
    expect(await isMigrated(database)).toBe(true)
    // Fresh tables: the account from before the round trip is gone, and new rows go in.
    expect(await database.db.selectFrom('accounts').selectAll().execute()).toEqual([])
    await createAccountWithKey(database.db, { name: 'After', now: new Date(), keyPrefix: 'service' })
    // The account and its test environment (src/accounts/tenant.ts).
    expect(await database.db.selectFrom('accounts').select('name').execute()).toEqual([
      { name: 'After' },
      { name: 'After' },
    ])
    expect(await database.db.selectFrom('api_keys').select('name').execute()).toEqual([{ name: 'Default' }])
  })

  it('the contact_terms migration fills the table from existing contacts as the write path would', async () => {
    const { account } = await createAccountWithKey(database.db, {
      name: 'Terms',
      now: new Date(),
      keyPrefix: 'service',
    })
    const contacts = createContactService({
      db: database.db,
      clock: systemClock,
      maxContacts: 100,
      maxTestContacts: 100,
    })
    for (const input of [
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ADA@example.com', company: 'Analytical  Engines' },
      { first_name: 'Same', last_name: 'same' },
      { phone: '+44 1632 960961', job_title: 'no searchable value' },
    ]) {
      await contacts.create(liveTenant(account.id), input)
    }
    const terms = () =>
      database.db
        .selectFrom('contact_terms')
        .select(['account_id', 'contact_id', 'term'])
        .orderBy('contact_id')
        .orderBy('term')
        .execute()
    const written = await terms()
    expect(written.map((row) => row.term)).toEqual(['ada', 'ada@example.com', 'analytical engines', 'lovelace', 'same'])

    // Undo the migrations down to this one (and later ones, whatever they are), then redo them.
    const undone: string[] = []
    while (!undone.includes('20261123T120000_contact_terms')) {
      const [name] = await migrateDown(database)
      expect(name).toBeDefined()
      undone.push(name as string)
    }
    expect(await migrateToLatest(database)).toEqual(undone.reverse())
    expect(await terms()).toEqual(written)
  })

  it('the event feed position migration puts existing events first, in id order, and old-release inserts still get a position', async () => {
    const { account } = await createAccountWithKey(database.db, { name: 'Feed', now: new Date(), keyPrefix: 'service' })
    const undone: string[] = []
    while (!undone.includes('20261124T094444_event_feed_position')) {
      const [name] = await migrateDown(database)
      expect(name).toBeDefined()
      undone.push(name as string)
    }
    // Events as the previous release wrote them: no position.
    const insertOld = (id: string) =>
      sql`insert into events (account_id, id, type, created_at, body)
          values (${account.id}, ${id}, 'contact.created', '2026-11-01T00:00:00.000Z', '{}')`.execute(database.db)
    for (const id of ['evt_01M00000000000000000000002', 'evt_01M00000000000000000000001']) {
      await insertOld(id)
    }
    expect(await migrateToLatest(database)).toEqual(undone.reverse())
    await inTransaction(database.db, (trx) =>
      recordEvent(trx, account.id, 'contact.created', JSON.stringify({}), new Date().toISOString()),
    )
    // On the PostgreSQL server another suite's open transaction can hold the feed back a moment.
    const read = async (afterId: string | undefined, count: number) => {
      const deadline = Date.now() + 10_000
      for (;;) {
        const rows = await listEventRows(database.db, account.id, { afterId, fetch: 10 })
        if (rows.length >= count || Date.now() > deadline) {
          return rows
        }
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }
    const feed = await read(undefined, 3)
    expect(feed.map((row) => row.position?.split(':')[0])).toEqual(['0', '0', expect.stringMatching(/^[1-9]\d*$/)])
    expect(feed.map((row) => row.id).slice(0, 2)).toEqual([
      'evt_01M00000000000000000000001',
      'evt_01M00000000000000000000002',
    ])
    if (dialect !== 'sqlite') {
      // An instance still on the previous release during a deploy: the column default gives its
      // event the writing transaction's id, after everything before it.
      await insertOld('evt_01M00000000000000000000003')
      const after = await read(feed.at(-1)?.position, 1)
      expect(after.map((row) => row.id)).toEqual(['evt_01M00000000000000000000003'])
    }
  })

  it("the import file parts migration moves an unfinished job's file to part 0, and back down", async () => {
    const { account } = await createAccountWithKey(database.db, {
      name: 'Parts',
      now: new Date(),
      keyPrefix: 'service',
    })
    const undone: string[] = []
    while (!undone.includes('20261124T230000_import_file_parts')) {
      const [name] = await migrateDown(database)
      expect(name).toBeDefined()
      undone.push(name as string)
    }
    // A job and its file as the previous release stored them: one row, the whole file.
    const file = Buffer.concat([Buffer.from('email\nparts@example.com\n'), Buffer.from([0, 0xff])])
    await sql`insert into contact_imports (account_id, id, state, file_name, rows_validated, rows_written,
        created, updated, unchanged, error_count, created_at, updated_at)
      values (${account.id}, 'imp_01M00000000000000000000001', 'queued', 'a.csv', 0, 0, 0, 0, 0, 0,
        '2026-11-24T20:00:00.000Z', '2026-11-24T20:00:00.000Z')`.execute(database.db)
    await sql`insert into contact_import_files (account_id, import_id, data)
      values (${account.id}, 'imp_01M00000000000000000000001', ${file})`.execute(database.db)

    expect(await migrateToLatest(database)).toEqual(undone.reverse())
    const parts = await database.db
      .selectFrom('contact_import_file_parts')
      .select(['import_id', 'part', 'created_at', 'data'])
      .where('account_id', '=', account.id)
      .execute()
    expect(parts.map((p) => [p.import_id, p.part, p.created_at])).toEqual([
      ['imp_01M00000000000000000000001', 0, '2026-11-24T20:00:00.000Z'],
    ])
    expect(Buffer.compare(Buffer.from(parts[0]?.data ?? []), file)).toBe(0)

    const downAgain: string[] = []
    while (!downAgain.includes('20261124T230000_import_file_parts')) {
      downAgain.push(...(await migrateDown(database)))
    }
    const back = await sql<{
      data: Uint8Array
    }>`select data from contact_import_files where account_id = ${account.id}`.execute(database.db)
    expect(Buffer.compare(Buffer.from(back.rows[0]?.data ?? []), file)).toBe(0)
    expect(await migrateToLatest(database)).toEqual(downAgain.reverse())
  })

  it("the key creator migration learns each key's creator from the audit log, a rolled key's from its roll", async () => {
    const { account, apiKey } = await createAccountWithKey(database.db, {
      name: 'Creators',
      now: new Date(),
      keyPrefix: 'service',
    })
    const undone: string[] = []
    while (!undone.includes('20261128T120000_api_key_creator')) {
      const [name] = await migrateDown(database)
      expect(name).toBeDefined()
      undone.push(name as string)
    }
    // As the previous release stored them: keys without a creator, the audit log naming who acted.
    const key = (id: string) => sql`insert into api_keys (account_id, id, name, key_hash, last4, scopes, created_at)
      values (${account.id}, ${id}, 'k', ${`hash-${id}`}, 'abcd', '["read"]', '2026-11-27T10:00:00.000Z')`
    const entry = (id: string, actor: string | null, action: string, target: string, detail: string) =>
      sql`insert into audit_log (account_id, id, at, actor_user_id, action, target_id, detail)
        values (${account.id}, ${id}, '2026-11-27T10:00:00.000Z', ${actor}, ${action}, ${target}, ${detail})`
    await key('key_web').execute(database.db)
    await key('key_rolled').execute(database.db)
    await entry('aud_1', 'usr_ada', 'api_key.created', 'key_web', '{"name":"k"}').execute(database.db)
    await entry('aud_2', 'usr_bob', 'api_key.rolled', 'key_web', '{"name":"k","new_key_id":"key_rolled"}').execute(
      database.db,
    )

    expect(await migrateToLatest(database)).toEqual(undone.reverse())
    const creators = await database.db
      .selectFrom('api_keys')
      .select(['id', 'created_by_user_id'])
      .where('account_id', '=', account.id)
      .orderBy('id')
      .execute()
    // The account's first key was made on the command line (no actor): no creator.
    expect(creators).toEqual(
      [
        { id: apiKey.id, created_by_user_id: null },
        { id: 'key_rolled', created_by_user_id: 'usr_bob' },
        { id: 'key_web', created_by_user_id: 'usr_ada' },
      ].sort((a, b) => (a.id < b.id ? -1 : 1)),
    )
  })

  it('every tenant table leads its primary key, foreign keys and unique indexes with account_id', async () => {
    const shape = await describeSchema(database)
    expect(shape.primaryKeys.accounts).toEqual(['id'])
    for (const table of TENANT_TABLES) {
      expect(shape.primaryKeys[table]?.[0], `${table} primary key`).toBe('account_id')
      const fks = shape.foreignKeys[table] ?? []
      expect(fks.length, `${table} foreign keys`).toBeGreaterThan(0)
      for (const fk of fks) {
        expect(fk[0], `${table} foreign key (${fk.join(', ')})`).toBe('account_id')
      }
    }
    for (const [name, index] of Object.entries(shape.uniqueIndexes)) {
      if (TENANT_TABLES.includes(index.table) && !UNIQUE_WITHOUT_TENANT.has(name)) {
        expect(index.columns[0], `unique index ${name}`).toBe('account_id')
      }
    }
  })
})

describe('schema parity between SQLite and PostgreSQL', () => {
  const opened: Array<{ dispose(): Promise<void> }> = []
  const shapes = new Map<TestDialect, SchemaShape>()
  const postgresDialects = testDialects().filter((d) => d !== 'sqlite')
  const dialects: TestDialect[] = ['sqlite', ...(postgresDialects.length > 0 ? postgresDialects : ['pglite' as const])]

  beforeAll(async () => {
    for (const dialect of dialects) {
      const fresh = await openFresh(dialect)
      opened.push(fresh)
      await migrateToLatest(fresh.database)
      shapes.set(dialect, await describeSchema(fresh.database))
    }
  })
  afterAll(async () => {
    for (const fresh of opened) {
      await fresh.dispose()
    }
  })

  it('SQLite has the expected tables and columns', () => {
    const sqlite = shapes.get('sqlite')
    expect(sqlite?.columns).toContain('accounts.id')
    expect(sqlite?.columns).toContain('api_keys.key_hash')
    expect(new Set(sqlite?.columns.map((c) => c.split('.')[0]))).toEqual(new Set(TABLES))
    expect(sqlite?.primaryKeys).toEqual({
      accounts: ['id'],
      sign_in_failures: ['id'],
      api_key_usage: ['account_id', 'key_id', 'day'],
      idempotency_keys: ['account_id', 'key'],
      memberships: ['account_id', 'user_id'],
      sessions: ['token_hash'],
      invitations: ['account_id', 'id'],
      users: ['id'],
      api_keys: ['account_id', 'id'],
      audit_log: ['account_id', 'id'],
      contacts: ['account_id', 'id'],
      contact_tags: ['account_id', 'tag', 'contact_id'],
      contact_terms: ['account_id', 'term', 'contact_id'],
      contact_counts: ['account_id', 'shard'],
      contact_imports: ['account_id', 'id'],
      contact_import_file_parts: ['account_id', 'import_id', 'part'],
      events: ['account_id', 'id'],
      event_sequence: ['name'],
      webhook_endpoints: ['account_id', 'id'],
      webhook_deliveries: ['account_id', 'id'],
      webhook_attempts: ['account_id', 'delivery_id', 'attempt'],
      webhook_dispatch: ['name'],
      request_log_chunks: ['account_id', 'last_id'],
      request_log_days: ['account_id', 'day'],
    })
    expect(sqlite?.foreignKeys).toEqual({
      accounts: [],
      api_key_usage: [['account_id', 'key_id']],
      idempotency_keys: [['account_id']],
      memberships: [['account_id'], ['user_id']],
      sessions: [['user_id']],
      invitations: [['account_id']],
      sign_in_failures: [],
      users: [],
      api_keys: [['account_id']],
      audit_log: [['account_id']],
      contacts: [['account_id']],
      contact_tags: [['account_id', 'contact_id']],
      contact_terms: [['account_id', 'contact_id']],
      contact_counts: [['account_id']],
      contact_imports: [['account_id']],
      contact_import_file_parts: [['account_id']],
      events: [['account_id']],
      event_sequence: [],
      webhook_endpoints: [['account_id']],
      webhook_deliveries: [['account_id', 'endpoint_id']],
      webhook_attempts: [['account_id', 'delivery_id']],
      webhook_dispatch: [],
      request_log_chunks: [['account_id']],
      request_log_days: [['account_id']],
    })
    expect(sqlite?.uniqueIndexes).toEqual({
      api_keys_key_hash_key: { table: 'api_keys', columns: ['key_hash'] },
      contacts_account_email_key: { table: 'contacts', columns: ['account_id', 'email_lower'] },
      invitations_token_hash_key: { table: 'invitations', columns: ['token_hash'] },
      contact_imports_one_unfinished_key: { table: 'contact_imports', columns: ['account_id'] },
      users_email_key: { table: 'users', columns: ['email_lower'] },
    })
  })

  it.each(dialects.filter((d) => d !== 'sqlite'))('%s has the same columns, keys and unique indexes', (dialect) => {
    const sqlite = shapes.get('sqlite')
    const other = shapes.get(dialect)
    expect(sqlite).toBeDefined()
    expect(other?.columns).toEqual(sqlite?.columns)
    expect(other?.primaryKeys).toEqual(sqlite?.primaryKeys)
    expect(other?.foreignKeys).toEqual(sqlite?.foreignKeys)
    expect(other?.uniqueIndexes).toEqual(sqlite?.uniqueIndexes)
  })
})

describe.runIf(testDialects().includes('postgres'))('migrations beside other schemas on the PostgreSQL server', () => {
  it('releases the migration lock with its transaction, even through a transaction pooler', async () => {
    const { database, dispose } = await openFresh('postgres')
    const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL })
    await admin.connect()
    try {
      // Other statements on the same pool at the same time: behind a pooler (TEST_POOLER_URL) a
      // session lock and its unlock then land on different server connections, and the lock stays
      // held by an idle one (Kysely's own migrator did that) until that connection closes.
      const alongside = async <T>(work: Promise<T>): Promise<T> => {
        let done = false
        const busy = Array.from({ length: 8 }, async () => {
          while (!done) {
            await sql`select pg_sleep(0.002)`.execute(database.db)
          }
        })
        try {
          return await work
        } finally {
          done = true
          await Promise.all(busy)
        }
      }
      for (let round = 0; round < 3; round++) {
        await alongside(migrateToLatest(database))
        await alongside(migrateDown(database))
      }
      await alongside(migrateToLatest(database))
      // A session that is idle (in no transaction) holds no transaction lock: whatever it holds is a
      // session lock left behind. Kysely's lock id, 3853314791062309107, as pg_locks shows it.
      const { rows } = await admin.query<{ pid: number }>(`
        select l.pid from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and a.state = 'idle'
          and l.classid::bigint = 3853314791062309107 >> 32
          and l.objid::bigint = 3853314791062309107 & 4294967295`)
      expect(rows).toEqual([])
      expect(await isMigrated(database)).toBe(true)
    } finally {
      await admin.end()
      await dispose()
    }
  })

  it('run while another schema of the database is being dropped (Kysely introspected every schema)', async () => {
    const { database, dispose } = await openFresh('postgres')
    const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL })
    await admin.connect()
    try {
      // Other schemas, each with tables, dropped one after another while this one checks its migrations.
      const others = Array.from({ length: 30 }, (_, i) => `other_${process.pid}_${Date.now()}_${i}`)
      for (const name of others) {
        await admin.query(`create schema ${name}; create table ${name}.t (a int, b text, c int)`)
      }
      const dropping = (async () => {
        for (const name of others) {
          await admin.query(`drop schema ${name} cascade`)
        }
      })()
      const checks: Promise<unknown>[] = []
      for (let i = 0; i < 30; i++) {
        checks.push(migrationStatus(database))
      }
      const outcomes = await Promise.allSettled([...checks, dropping])
      expect(
        outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason)),
      ).toEqual([])
      expect(await migrateToLatest(database)).toEqual(MIGRATIONS)
    } finally {
      await admin.end()
      await dispose()
    }
  })
})
