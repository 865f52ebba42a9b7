// The sliding window: the wait computed from the newest timestamps, and the query on every dialect.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../../test/dialects.js'
import { createTestHarness, type TestHarness } from '../../test/harness.js'
import { retryAfter, secondsUntilOneLeaves, windowStart } from './sliding-window.js'

const now = new Date('2026-11-24T12:00:00.000Z')
const window = { max: 3, windowMs: 60_000 }
const ago = (ms: number) => new Date(now.getTime() - ms).toISOString()

describe('secondsUntilOneLeaves', () => {
  it('is 0 while fewer than max events are in the window', () => {
    expect(secondsUntilOneLeaves([], window, now)).toBe(0)
    expect(secondsUntilOneLeaves([ago(1000), ago(2000)], window, now)).toBe(0)
  })

  it('with max events, is the time until the oldest of them leaves, rounded up', () => {
    expect(secondsUntilOneLeaves([ago(1000), ago(2000), ago(50_000)], window, now)).toBe(10)
    expect(secondsUntilOneLeaves([ago(1000), ago(2000), ago(50_001)], window, now)).toBe(10)
    expect(secondsUntilOneLeaves([ago(1000), ago(2000), ago(49_999)], window, now)).toBe(11)
  })

  it('looks at the max-th newest only (older ones leave first anyway), and never says less than 1 s', () => {
    expect(secondsUntilOneLeaves([ago(0), ago(1), ago(30_000), ago(59_000)], window, now)).toBe(30)
    expect(secondsUntilOneLeaves([ago(0), ago(1), ago(59_999)], window, now)).toBe(1)
  })

  it('the window starts windowMs before now', () => {
    expect(windowStart(now, 60_000)).toBe('2026-11-24T11:59:00.000Z')
  })
})

describe.each(testDialects())('retryAfter on %s', (dialect) => {
  let t: TestHarness
  beforeAll(async () => {
    t = await createTestHarness({ dialect })
  })
  afterAll(() => t.close())

  const fail = (key: string, at: string) =>
    t.db
      .insertInto('sign_in_failures')
      .values({ id: `${key}-${at}`, key, at })
      .execute()
  const failures = (key: string) => t.db.selectFrom('sign_in_failures').where('key', '=', key)

  it('counts only the filtered rows inside the window', async () => {
    await fail('a', ago(70_000)) // before the window
    await fail('a', ago(60_000)) // on its start: no longer counts
    await fail('a', ago(40_000))
    await fail('a', ago(20_000))
    await fail('b', ago(10_000)) // another key
    expect(await retryAfter(failures('a'), window, now)).toBe(0)
    await fail('a', ago(5000))
    expect(await retryAfter(failures('a'), window, now)).toBe(20)
    expect(await retryAfter(failures('b'), window, now)).toBe(0)
  })

  it('reads the newest max rows, so the wait is until the max-th newest leaves', async () => {
    for (const ms of [50_000, 30_000, 3000, 2000]) {
      await fail('c', ago(ms))
    }
    expect(await retryAfter(failures('c'), window, now)).toBe(30)
  })
})
