// Runs once before the suites: the PostgreSQL server leg runs when TEST_DATABASE_URL is set,
// must run in CI, and is skipped locally with a one-line hint.
import pg from 'pg'

export default async function setup(): Promise<void> {
  const url = process.env.TEST_DATABASE_URL
  if (!url) {
    if (process.env.CI === 'true') {
      throw new Error('CI=true but TEST_DATABASE_URL is not set: the PostgreSQL server leg is required in CI.')
    }
    console.log(
      'PostgreSQL server leg skipped (SQLite and PGlite run). Enable it: TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm test',
    )
    return
  }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  try {
    await client.connect()
    await client.query('select 1')
  } catch (error) {
    throw new Error(`TEST_DATABASE_URL is set but PostgreSQL is unreachable: ${(error as Error).message}`)
  } finally {
    await client.end().catch(() => {})
  }
}
