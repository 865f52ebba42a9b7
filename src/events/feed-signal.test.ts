// The long polls' wake-up: a tenant's notify wakes its waiters only, a timeout or an abort ends a
// wait, and nothing is left registered after any of them.
import { describe, expect, it } from 'vitest'
import { createFeedSignal, LONG_POLLS_PER_TENANT } from './feed-signal.js'

describe('feed signal', () => {
  it("wakes the tenant's waiters, not another's, and forgets them", async () => {
    const signal = createFeedSignal()
    const never = new AbortController().signal
    const mine = signal.next('acct_a', 5000, never)
    const theirs = signal.next('acct_b', 50, never)
    signal.notify('acct_a')
    expect(await mine).toBe(true)
    expect(await theirs).toBe(false)
    // Nothing registered is left: a notify with no waiter is a no-op, a new wait times out.
    signal.notify('acct_a')
    expect(await signal.next('acct_a', 10, never)).toBe(false)
  })

  it("answers at once for the tenant's notification since a mark (it came while the feed was read)", async () => {
    const signal = createFeedSignal()
    const never = new AbortController().signal
    signal.notify('acct_a')
    const seen = signal.mark()
    // Before the mark: the read saw it, the wait goes on.
    expect(await signal.next('acct_a', 10, never, seen)).toBe(false)
    signal.notify('acct_b')
    expect(await signal.next('acct_a', 10, never, seen)).toBe(false)
    signal.notify('acct_a')
    const started = performance.now()
    expect(await signal.next('acct_a', 5000, never, seen)).toBe(true)
    expect(performance.now() - started).toBeLessThan(1000)
    // A new mark after that notification waits again.
    expect(await signal.next('acct_a', 10, never, signal.mark())).toBe(false)
  })

  it('ends a wait when its request goes away, at once', async () => {
    const signal = createFeedSignal()
    const gone = new AbortController()
    const waiting = signal.next('acct_a', 60_000, gone.signal)
    gone.abort()
    expect(await waiting).toBe(false)
    const aborted = new AbortController()
    aborted.abort()
    expect(await signal.next('acct_a', 60_000, aborted.signal)).toBe(false)
  })

  it('counts waiting polls per tenant up to LONG_POLLS_PER_TENANT; leaving frees a place, once', () => {
    const signal = createFeedSignal()
    const leaves = Array.from({ length: LONG_POLLS_PER_TENANT }, () => signal.enterWait('acct_a'))
    expect(leaves.every((leave) => leave !== undefined)).toBe(true)
    expect(signal.enterWait('acct_a')).toBeUndefined()
    // Another tenant has its own count.
    expect(signal.enterWait('acct_b')).toBeDefined()
    leaves[0]?.()
    leaves[0]?.()
    expect(signal.enterWait('acct_a')).toBeDefined()
    expect(signal.enterWait('acct_a')).toBeUndefined()
  })
})
