// Which databases the suites run on: TEST_DIALECTS (default sqlite,pglite), plus postgres when
// TEST_DATABASE_URL is set.
export type TestDialect = 'sqlite' | 'pglite' | 'postgres'

export function testDialects(): TestDialect[] {
  const requested = process.env.TEST_DIALECTS?.split(',').map((d) => d.trim()) ?? ['sqlite', 'pglite', 'postgres']
  return (['sqlite', 'pglite', 'postgres'] as const).filter(
    (dialect) => requested.includes(dialect) && (dialect !== 'postgres' || Boolean(process.env.TEST_DATABASE_URL)),
  )
}
