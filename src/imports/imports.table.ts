/**
 * A CSV import job (src/imports/): queued → validating → writing → done, or failed from
 * validating (bad rows, over the quota) with its problems in `errors`.
 */
export interface ContactImportsTable {
  account_id: string
  id: string
  state: ImportState
  file_name: string
  /** Known once the file is parsed. */
  rows_total: number | null
  rows_validated: number
  /** Rows written so far: the next chunk starts here, also after a restart. */
  rows_written: number
  created: number
  updated: number
  unchanged: number
  error_count: number
  /** JSON: the first problems found (ImportError[]), when failed. */
  errors: string | null
  /** The runner that claimed the job holds it until then; past it, another runner may resume it. */
  lease_expires_at: string | null
  created_at: string
  updated_at: string
  finished_at: string | null
}

export const IMPORT_STATES = ['queued', 'validating', 'writing', 'done', 'failed'] as const
export type ImportState = (typeof IMPORT_STATES)[number]

/**
 * A part of the uploaded file of an unfinished job (deleted when it ends), written before the
 * job's row: parts 0, 1, … in file order, each at most IMPORT_PART_BYTES (imports.store.ts).
 */
export interface ContactImportFilePartsTable {
  account_id: string
  import_id: string
  part: number
  created_at: string
  data: Uint8Array
}
