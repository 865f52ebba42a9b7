// What migrations share: the type they run against and the tenant foreign key they repeat.
// Frozen like the migrations: a change here changes what shipped migrations create, so add a new
// helper instead of editing one.
import type { CreateTableBuilder, Kysely } from 'kysely'

/** A migration's database: untyped, since a migration is frozen in time and must not depend on today's schema types. */
// biome-ignore lint/suspicious/noExplicitAny: the one place migrations opt out of the schema types
export type MigrationDb = Kysely<any>

/**
 * The tenant's foreign key, `<table>_account_fk`: account_id → accounts(id), deleted with the
 * account. Use it with `$call` where the constraint goes: `.$call(accountForeignKey('events'))`.
 */
export function accountForeignKey(table: string) {
  return <TB extends string, C extends string>(builder: CreateTableBuilder<TB, C | 'account_id'>) =>
    builder.addForeignKeyConstraint(`${table}_account_fk`, ['account_id'], 'accounts', ['id'], (fk) =>
      fk.onDelete('cascade'),
    )
}
