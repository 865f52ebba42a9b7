// Reading one stored API representation: the tables that keep each row's response serialized in
// `body` (written once, sent as is) are read the same way, by tenant and id.
import type { Db } from './transaction.js'

/** Tables whose rows keep their API representation in `body`. */
export type BodyTable = 'contacts' | 'events'

/** The row's body, or undefined when the account has no such row (any other id, well-formed or not). */
export async function findStoredBody(
  db: Db,
  table: BodyTable,
  accountId: string,
  id: string,
): Promise<string | undefined> {
  const row = await db
    .selectFrom(table)
    .select('body')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return row?.body
}
