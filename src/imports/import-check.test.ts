// The import's check runs on a worker thread (import-check.ts), so a large file does not hold up
// the requests the main thread serves. What that buys, the latency of another account's requests
// during imports, is measured by bench/import-neighbour.ts, not here: CPU time is noise in a suite.
import { threadId } from 'node:worker_threads'
import { afterAll, describe, expect, it } from 'vitest'
import { createImportChecker } from './import-check.js'

const ROWS = 10_000
const file = new TextEncoder().encode(
  [
    'email,first_name,last_name,company,tags,custom_fields',
    ...Array.from(
      { length: ROWS },
      (_, i) => `p${i}@example.com,First ${i},Last ${i},Company ${i % 97},t${i % 7};bulk,"{""n"":${i}}"`,
    ),
  ].join('\n'),
)

describe('the CSV import check', () => {
  const checker = createImportChecker()
  afterAll(() => checker.close())

  it('checks a 10,000-row file on another thread and hands every row back', async () => {
    const signal = new AbortController().signal
    const progress: number[] = []
    const result = await checker.check(file, async (checked) => void progress.push(checked), signal)
    if (!result.ok) {
      throw new Error(JSON.stringify(result.errors.slice(0, 3)))
    }
    const rows = await result.file.rows(ROWS - 2, ROWS + 5)
    result.file.close()

    expect(checker.threadId).toBeDefined()
    expect(checker.threadId).not.toBe(threadId)
    expect(rows).toEqual([
      expect.objectContaining({ email: `p${ROWS - 2}@example.com` }),
      expect.objectContaining({ email: `p${ROWS - 1}@example.com`, custom_fields: { n: ROWS - 1 } }),
    ])
    expect(progress.at(-1)).toBe(ROWS)
  })

  it('lists every problem of a bad file by row, column and value', async () => {
    const bad = new TextEncoder().encode('email,first_name\nnot-an-email,A\nok@example.com,B\n')
    const result = await checker.check(bad, async () => {}, new AbortController().signal)
    expect(result).toEqual({
      ok: false,
      errors: [expect.objectContaining({ row: 2, field: 'email', value: 'not-an-email' })],
      count: 1,
    })
  })

  it('stops waiting when the job is stopped, and checks the next file', async () => {
    const stop = new AbortController()
    const checking = checker.check(file, async () => {}, stop.signal)
    stop.abort(new Error('stopped'))
    await expect(checking).rejects.toThrow('stopped')
    const next = await checker.check(
      new TextEncoder().encode('email\nn@example.com\n'),
      async () => {},
      new AbortController().signal,
    )
    expect(next.ok).toBe(true)
  })
})
