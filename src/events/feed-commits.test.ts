// Commits told to this process's long polls at once, and in batches to the others and the worker.
import { describe, expect, it } from 'vitest'
import { localBroadcast } from '../lib/broadcast.js'
import { createFeedCommits, FEED_BATCH_MS } from './feed-commits.js'
import { createFeedSignal } from './feed-signal.js'

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('feed commits', () => {
  it("wakes the tenant's long polls at once, and then publishes the batch's tenants once", async () => {
    const signal = createFeedSignal()
    const commits = createFeedCommits(signal)
    const published: string[] = []
    commits.connect({ ...localBroadcast(() => {}), shared: true, publish: async (m) => published.push(m) > 0 })
    let batches = 0
    commits.onBatch(() => batches++)
    const woken = signal.next('acct_a', 10_000, new AbortController().signal)
    commits.committed('acct_a')
    commits.committed('acct_b')
    commits.committed('acct_a')
    expect(await woken).toBe(true)
    expect(published).toEqual([])
    await pause(FEED_BATCH_MS + 20)
    expect(published).toHaveLength(1)
    expect(published[0]).toMatch(/^[0-9a-f]{12} acct_a,acct_b$/)
    expect(batches).toBe(1)
    // Its own message, echoed back by the broadcast, was handled at commit: nothing again.
    const again = signal.next('acct_a', 50, new AbortController().signal)
    commits.received(published[0] as string)
    expect(await again).toBe(false)
    expect(batches).toBe(1)
  })

  it('publishes nothing when no other instance can hear it, and still wakes the worker', async () => {
    const commits = createFeedCommits(createFeedSignal())
    const published: string[] = []
    commits.connect({ ...localBroadcast(() => {}), publish: async (m) => published.push(m) > 0 })
    let batches = 0
    commits.onBatch(() => batches++)
    commits.committed('acct_a')
    await pause(FEED_BATCH_MS + 20)
    expect(published).toEqual([])
    expect(batches).toBe(1)
  })

  it("another instance's message wakes each tenant's polls and the worker", async () => {
    const signal = createFeedSignal()
    const commits = createFeedCommits(signal)
    let batches = 0
    commits.onBatch(() => batches++)
    const a = signal.next('acct_a', 10_000, new AbortController().signal)
    const b = signal.next('acct_b', 10_000, new AbortController().signal)
    const c = signal.next('acct_c', 50, new AbortController().signal)
    commits.received('0123456789ab acct_a,acct_b')
    expect([await a, await b, await c]).toEqual([true, true, false])
    expect(batches).toBe(1)
  })
})
