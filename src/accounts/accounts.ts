// Creating an account with its first API key, in one transaction (the CLI and tests; sign-up
// creates a person with an account and no key: users/users.store.ts).
import type { Kysely } from 'kysely'
import { FULL_SCOPES } from '../api-keys/api-key.js'
import type { ApiKey } from '../api-keys/api-keys.store.js'
import { issueKeyIn } from '../api-keys/key-lifecycle.js'
import type { Database } from '../db/schema.js'
import { inTransaction } from '../db/transaction.js'
import { type Account, insertAccount } from './accounts.store.js'

/** The account and its first key, issued through the key lifecycle (audited, as the command line). */
export async function createAccountWithKey(
  db: Kysely<Database>,
  input: { name: string; keyName?: string; now: Date; keyPrefix: string },
): Promise<{ account: Account; apiKey: ApiKey; secret: string }> {
  return inTransaction(db, async (trx) => {
    const account = await insertAccount(trx, input.name, input.now)
    const firstKey = { name: input.keyName ?? 'Default', scopes: FULL_SCOPES, expiresAt: null }
    const { apiKey, secret } = await issueKeyIn(trx, account.id, firstKey, null, input.now, input.keyPrefix)
    return { account, apiKey, secret }
  })
}
