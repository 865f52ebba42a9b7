// Tenant-scoped event reads.
import type { Kysely } from 'kysely'
import type { Database } from '../db/schema.js'
import type { PageRow } from '../http/pagination.js'
import type { ListEventsFilters } from './events.js'

export async function listEventRows(
  db: Kysely<Database>,
  accountId: string,
  options: ListEventsFilters & { afterId: string | undefined; fetch: number },
): Promise<PageRow[]> {
  let query = db.selectFrom('events').select(['id', 'body']).where('account_id', '=', accountId)
  if (options.type !== undefined) {
    query = query.where('type', '=', options.type)
  }
  if (options.afterId !== undefined) {
    query = query.where('id', '>', options.afterId)
  }
  return query.orderBy('id').limit(options.fetch).execute()
}
