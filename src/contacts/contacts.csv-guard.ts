// Formula injection in CSV files: a spreadsheet runs a cell that starts with = + - @ (or tab / CR).
// Such a cell is written with a leading single quote. A cell that already starts with quotes
// followed by one of those characters gets one more quote, so the import can always remove exactly one.

const FORMULA_START = /^'*[=+\-@\t\r]/

/** A cell as written to a file: never read as a formula. */
export const guardCell = (value: string): string => (FORMULA_START.test(value) ? `'${value}` : value)

/** A cell as read from a file: the one quote guardCell added, removed. */
export const unguardCell = (value: string): string => (/^'+[=+\-@\t\r]/.test(value) ? value.slice(1) : value)
