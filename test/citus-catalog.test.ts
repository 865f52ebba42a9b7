// The schema shards by account_id on Citus (docs/design.md#identifiers-and-storage, docs/design.md#scale; docs/scale-out.md): after every
// migration, each tenant table's primary key, unique rules and foreign keys lead with account_id,
// foreign keys between distributed tables pair their distribution columns, and every table
// without account_id has a stated placement. Read from PostgreSQL's own catalog.
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { migrateToLatest } from '../src/db/migrate.js'
import { type Catalog, readCatalog, shardingViolations } from './citus-plan.js'
import { testDialects } from './dialects.js'
import { openTestDatabase } from './harness.js'
import { TABLES } from './schema-expectations.js'

const postgresDialects = testDialects().filter((dialect) => dialect !== 'sqlite')

describe.each(postgresDialects)('Citus sharding of the schema on %s', (dialect) => {
  const withMigrated = async (
    run: (catalog: () => Promise<Catalog>, exec: (q: string) => Promise<void>) => Promise<void>,
  ) => {
    const { database, dispose } = await openTestDatabase(dialect, { migrated: true })
    try {
      await migrateToLatest(database)
      await run(
        () => readCatalog(database),
        async (query) => {
          // One statement at a time: PGlite's extended protocol takes no more.
          for (const statement of query.split(';')) {
            await sql.raw(statement).execute(database.db)
          }
        },
      )
    } finally {
      // A changed schema is not handed on (test/harness.ts compares it when given back).
      await database.close()
      await dispose()
    }
  }

  it('every tenant key leads with account_id and every table has a placement', async () => {
    await withMigrated(async (catalog) => {
      const read = await catalog()
      expect(read.tables.map((table) => table.name).sort()).toEqual([...TABLES].sort())
      // The catalog was really read: the rules below have something to judge.
      expect(read.keys.filter((key) => key.kind === 'foreign key').length).toBeGreaterThan(10)
      expect(shardingViolations(read)).toEqual([])
    })
  })

  it('catches a table that would not shard', async () => {
    await withMigrated(async (catalog, exec) => {
      await exec(`
        create table bad_notes (
          account_id text not null, id text not null, email text, key_hash text references api_keys (key_hash),
          contact_id text, primary key (id));
        create unique index bad_notes_email_key on bad_notes (email);
        create table bad_tags (account_id text not null, tag text not null, contact_id text not null,
          unique (tag, account_id),
          foreign key (contact_id, account_id) references contacts (account_id, id));
        create table bad_globals (id text primary key, account_id_hint text)`)
      const problems = shardingViolations(await catalog())
      expect(problems).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^bad_notes\.bad_notes_pkey \(primary key on id\): does not lead with account_id/),
          expect.stringMatching(/^bad_notes\.bad_notes_email_key \(unique index on email\): does not lead/),
          expect.stringMatching(
            /^bad_notes\.bad_notes_key_hash_fkey \(foreign key on key_hash\): must pair account_id/,
          ),
          expect.stringMatching(/^bad_tags\.bad_tags_tag_account_id_key \(unique on tag, account_id\): does not lead/),
          expect.stringMatching(/^bad_tags\.bad_tags_contact_id_account_id_fkey .*: must pair account_id/),
          expect.stringMatching(/^bad_globals: no account_id and no placement/),
        ]),
      )
      expect(problems).toHaveLength(6)
    })
  })
})

describe('the sharding rules on a hand-made catalog', () => {
  const tenant = (name: string) => ({ name, hasAccountId: true })
  const base: Catalog = {
    tables: [
      { name: 'accounts', hasAccountId: false },
      { name: 'users', hasAccountId: false },
      { name: 'sessions', hasAccountId: false },
      { name: 'sign_in_failures', hasAccountId: false },
      { name: 'event_sequence', hasAccountId: false },
      { name: 'webhook_dispatch', hasAccountId: false },
      tenant('api_keys'),
      tenant('invitations'),
      tenant('notes'),
    ],
    keys: [
      { name: 'api_keys_key_hash_key', kind: 'unique index', table: 'api_keys', columns: ['key_hash'] },
      { name: 'invitations_token_hash_key', kind: 'unique index', table: 'invitations', columns: ['token_hash'] },
      {
        name: 'notes_account_fk',
        kind: 'foreign key',
        table: 'notes',
        columns: ['account_id'],
        references: { table: 'accounts', columns: ['id'] },
      },
      {
        name: 'notes_user_fk',
        kind: 'foreign key',
        table: 'notes',
        columns: ['user_id'],
        references: { table: 'users', columns: ['id'] },
      },
    ],
  }

  it('accepts colocated and reference foreign keys and the listed digest index', () => {
    expect(shardingViolations(base)).toEqual([])
  })

  it('refuses keys that cross shards or point at coordinator-only tables', () => {
    const problems = shardingViolations({
      tables: [...base.tables, { name: 'jobs', hasAccountId: false }],
      keys: [
        ...base.keys,
        {
          name: 'notes_dispatch_fk',
          kind: 'foreign key',
          table: 'notes',
          columns: ['account_id', 'name'],
          references: { table: 'webhook_dispatch', columns: ['account_id', 'name'] },
        },
        {
          name: 'sessions_account_fk',
          kind: 'foreign key',
          table: 'sessions',
          columns: ['account_id'],
          references: { table: 'accounts', columns: ['id'] },
        },
        {
          name: 'notes_key_fk',
          kind: 'foreign key',
          table: 'notes',
          columns: ['key_id', 'account_id'],
          references: { table: 'api_keys', columns: ['id', 'account_id'] },
        },
      ],
    })
    expect(problems).toEqual([
      'jobs: no account_id and no placement on Citus (add it to NON_TENANT_TABLES)',
      'notes.notes_dispatch_fk (foreign key on account_id, name): a distributed table cannot reference the coordinator-only webhook_dispatch',
      'sessions.sessions_account_fk (foreign key on account_id): a reference table cannot reference the distributed accounts',
      'notes.notes_key_fk (foreign key on key_id, account_id): must pair account_id with api_keys.account_id first (references id, account_id)',
    ])
  })

  it('keeps its lists honest: a listed table or index that is gone is reported', () => {
    const problems = shardingViolations({
      tables: base.tables.filter((table) => table.name !== 'event_sequence'),
      keys: base.keys.filter((key) => key.name !== 'api_keys_key_hash_key'),
    })
    expect(problems).toEqual([
      'event_sequence: listed in NON_TENANT_TABLES but not in the schema',
      'api_keys_key_hash_key: listed in UNIQUE_WITHOUT_TENANT but not in the schema',
    ])
  })
})
