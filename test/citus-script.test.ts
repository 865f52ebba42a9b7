// The distribution script in docs/scale-out.md against the plan (test/citus-plan.ts) and the
// migrated schema's catalog: its schema changes run for real, its Citus calls are checked in order
// as Citus would check them, and the doc's table of placements and list of unique indexes that do
// not lead with account_id must say what the plan and the catalog say. Citus cannot run here.
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { migrateToLatest } from '../src/db/migrate.js'
import {
  type Catalog,
  CITUS_MIGRATION_TABLES,
  NON_TENANT_TABLES,
  placementOf,
  readCatalog,
  TENANT_COLUMN,
  UNIQUE_WITHOUT_TENANT,
} from './citus-plan.js'
import {
  between,
  describePlacement,
  documentedPlacements,
  documentedUniqueWithoutTenant,
  parseScript,
  readScaleOutDoc,
  type ScriptCall,
  scriptViolations,
} from './citus-script.js'
import { testDialects } from './dialects.js'
import { openTestDatabase } from './harness.js'
import { TABLES } from './schema-expectations.js'

const postgresDialects = testDialects().filter((dialect) => dialect !== 'sqlite')
const doc = readScaleOutDoc()
const script = parseScript(between(doc, 'citus-script'))

describe('the Citus section of docs/scale-out.md, read alone', () => {
  it('holds a script the checks understand, naming every table of the schema or the move', () => {
    expect(script.unknown).toEqual([])
    const named = script.calls.map((call) => call.table).sort()
    const expected = [...TABLES, ...Object.keys(CITUS_MIGRATION_TABLES)]
      .filter((table) => NON_TENANT_TABLES[table]?.placement.kind !== 'local')
      .sort()
    expect(named).toEqual(expected)
  })

  it('lists the same unique indexes without account_id as the plan', () => {
    expect(documentedUniqueWithoutTenant(between(doc, 'citus-unique')).sort()).toEqual(
      Object.keys(UNIQUE_WITHOUT_TENANT).sort(),
    )
  })

  it('places each table in its table as the plan does, once', () => {
    const rows = documentedPlacements(between(doc, 'citus-placements'))
    const expected = [...TABLES, ...Object.keys(CITUS_MIGRATION_TABLES)].map((table) => ({
      table,
      placement: describePlacement(
        placementOf({ name: table, hasAccountId: !Object.hasOwn(NON_TENANT_TABLES, table) }),
      ),
    }))
    const byName = (a: { table: string }, b: { table: string }) => a.table.localeCompare(b.table)
    expect(rows.sort(byName)).toEqual(expected.sort(byName))
  })
})

describe('the script checks, on hand-made scripts', () => {
  const catalog: Catalog = {
    tables: [
      { name: 'accounts', hasAccountId: false },
      { name: 'users', hasAccountId: false },
      { name: 'webhook_dispatch', hasAccountId: false },
      { name: 'api_keys', hasAccountId: true },
      { name: 'notes', hasAccountId: true },
    ],
    keys: [
      { name: 'api_keys_pkey', kind: 'primary key', table: 'api_keys', columns: ['account_id', 'id'] },
      { name: 'api_keys_key_hash_key', kind: 'unique index', table: 'api_keys', columns: ['key_hash'] },
      {
        name: 'notes_key_fk',
        kind: 'foreign key',
        table: 'notes',
        columns: ['account_id', 'key_id'],
        references: { table: 'api_keys', columns: ['account_id', 'id'] },
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
  const good: ScriptCall[] = [
    { fn: 'create_reference_table', table: 'users' },
    { fn: 'create_distributed_table', table: 'accounts', column: 'id' },
    { fn: 'create_distributed_table', table: 'api_keys', column: 'account_id', colocateWith: 'accounts' },
    { fn: 'create_distributed_table', table: 'notes', column: 'account_id', colocateWith: 'accounts' },
  ]
  const withoutDigestIndex = { ...catalog, keys: catalog.keys.filter((key) => key.name !== 'api_keys_key_hash_key') }

  it('accepts a complete script in an order Citus takes', () => {
    expect(scriptViolations(withoutDigestIndex, good)).toEqual([])
  })

  it('refuses a unique index that the script did not drop', () => {
    expect(scriptViolations(catalog, good)).toEqual([
      "create_distributed_table('api_keys'): api_keys_key_hash_key (unique index on key_hash) does not lead with account_id",
    ])
  })

  it('refuses missing, repeated, misplaced, uncolocated and out-of-order calls', () => {
    const problems = scriptViolations(withoutDigestIndex, [
      { fn: 'create_distributed_table', table: 'notes', column: 'account_id', colocateWith: 'accounts' },
      { fn: 'create_distributed_table', table: 'accounts', column: 'id' },
      { fn: 'create_distributed_table', table: 'accounts', column: 'id' },
      { fn: 'create_distributed_table', table: 'users', column: 'id', colocateWith: 'accounts' },
      { fn: 'create_reference_table', table: 'webhook_dispatch' },
      { fn: 'create_reference_table', table: 'ghosts' },
    ])
    expect(problems).toEqual([
      "create_distributed_table('notes'): colocated with accounts before accounts is distributed",
      "create_distributed_table('notes'): notes_key_fk references api_keys, which is not yet distributed or a reference table",
      "create_distributed_table('notes'): notes_user_fk references users, which is not yet distributed or a reference table",
      "create_distributed_table('accounts'): named a second time",
      "create_distributed_table('users'): the plan says reference, the script makes it distributed by id",
      "create_reference_table('webhook_dispatch'): the plan says local, the script makes it reference",
      "create_reference_table('ghosts'): no such table",
      'webhook_dispatch: coordinator-only by the plan, but the script places it',
      'api_keys: distributed by account_id by the plan, but the script never names it',
    ])
  })

  it('reads the doc forms of the calls, and refuses what it cannot read', () => {
    const parsed = parseScript(`\`\`\`sql
      create extension if not exists citus;
      -- a comment; with a semicolon
      drop index api_keys_key_hash_key;
      select create_reference_table('users');
      select create_distributed_table('accounts', 'id');
      select create_distributed_table('notes', 'account_id',
        colocate_with => 'accounts');
      select create_distributed_table('notes', 'account_id', shard_count => 8);
      \`\`\``)
    expect(parsed).toEqual({
      ddl: ['drop index api_keys_key_hash_key'],
      calls: [
        { fn: 'create_reference_table', table: 'users' },
        { fn: 'create_distributed_table', table: 'accounts', column: 'id' },
        { fn: 'create_distributed_table', table: 'notes', column: 'account_id', colocateWith: 'accounts' },
      ],
      unknown: ["select create_distributed_table('notes', 'account_id', shard_count => 8)"],
    })
  })
})

describe.each(postgresDialects)('the distribution script on the migrated schema on %s', (dialect) => {
  it('runs its schema changes and then places every table as Citus would take it', async () => {
    const { database, dispose } = await openTestDatabase(dialect, { migrated: true })
    try {
      await migrateToLatest(database)
      const before = await readCatalog(database)
      // The doc's claim about the unique indexes is the catalog's: exactly these do not lead with
      // account_id on a table that has it.
      const tenantTables = new Set(before.tables.filter((table) => table.hasAccountId).map((table) => table.name))
      const notLeading = before.keys
        .filter((key) => tenantTables.has(key.table) && key.kind !== 'foreign key' && key.columns[0] !== TENANT_COLUMN)
        .map((key) => key.name)
        .sort()
      expect(notLeading).toEqual(documentedUniqueWithoutTenant(between(doc, 'citus-unique')).sort())

      // Before the schema changes the script cannot pass: the two unique indexes are in the way.
      expect(scriptViolations(before, script.calls)).toEqual(
        expect.arrayContaining([expect.stringMatching(/api_keys_key_hash_key .* does not lead with account_id/)]),
      )
      for (const statement of script.ddl) {
        await sql.raw(statement).execute(database.db)
      }
      const after = await readCatalog(database)
      expect(after.tables.map((table) => table.name).sort()).toEqual(
        [...TABLES, ...Object.keys(CITUS_MIGRATION_TABLES)].sort(),
      )
      expect(scriptViolations(after, script.calls)).toEqual([])
    } finally {
      // A changed schema is not handed on (test/harness.ts compares it when given back).
      await database.close()
      await dispose()
    }
  })
})
