// The tenant a request acts for: an account in one of its two modes. A test environment is a
// tenant of its own, tied to its account, so every rule that keeps tenants apart (the account_id
// that leads every key, quotas, rate limits, the Citus distribution) keeps the modes apart too:
// docs/design.md#test-mode. Its id is the account's with TEST_SUFFIX, so the tenant of either mode
// is known from the account id without a lookup, and the mode from the tenant id.

export interface Tenant {
  /** What the tenant's rows carry in `account_id`. */
  readonly id: string
  /** The account, as the API and the web app name it in either mode. */
  readonly accountId: string
  readonly livemode: boolean
}

const TEST_SUFFIX = '_test'

export const liveTenant = (accountId: string): Tenant => ({ id: accountId, accountId, livemode: true })

export const testTenant = (accountId: string): Tenant => ({
  id: `${accountId}${TEST_SUFFIX}`,
  accountId,
  livemode: false,
})

export const tenantOf = (accountId: string, livemode: boolean): Tenant =>
  livemode ? liveTenant(accountId) : testTenant(accountId)

/** The tenant whose rows carry this id. */
export const tenantById = (id: string): Tenant =>
  id.endsWith(TEST_SUFFIX) ? testTenant(id.slice(0, -TEST_SUFFIX.length)) : liveTenant(id)
