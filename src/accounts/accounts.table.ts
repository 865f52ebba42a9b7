export interface AccountsTable {
  id: string
  name: string
  created_at: string
  updated_at: string
  /** A test environment whose data is being deleted: since when (src/accounts/test-data.ts). */
  purge_requested_at: string | null
}
