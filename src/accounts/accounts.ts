// Creating an account with its first API key, in one transaction (the CLI's accounts create, tests).
import type { Kysely } from 'kysely'
import { FULL_SCOPES } from '../api-keys/api-key.js'
import { type ApiKey, issueApiKey } from '../api-keys/api-keys.store.js'
import type { Database } from '../db/schema.js'
import { type Account, insertAccount } from './accounts.store.js'

export async function createAccountWithKey(
  db: Kysely<Database>,
  input: { name: string; keyName?: string; now: Date; keyPrefix: string },
): Promise<{ account: Account; apiKey: ApiKey; secret: string }> {
  return db.transaction().execute(async (trx) => {
    const account = await insertAccount(trx, input.name, input.now)
    const { apiKey, secret } = await issueApiKey(trx, account.id, {
      name: input.keyName ?? 'Default',
      scopes: FULL_SCOPES,
      expiresAt: null,
      now: input.now,
      prefix: input.keyPrefix,
    })
    return { account, apiKey, secret }
  })
}
