export interface AccountsTable {
  id: string
  name: string
  created_at: string
  updated_at: string
}
