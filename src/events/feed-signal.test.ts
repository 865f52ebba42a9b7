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

  it('keeps a signal that came while the feed was read for the next wait of that watch', async () => {
    const signal = createFeedSignal()
    const never = new AbortController().signal
    const watch = signal.watch('acct_a')
    signal.notify('acct_a')
    watch.reading()
    // Before the read began: the read saw it, the wait goes on.
    expect(await watch.next(10, never)).toBe(false)
    signal.notify('acct_b')
    expect(await watch.next(10, never)).toBe(false)
    signal.notify('acct_a')
    const started = performance.now()
    expect(await watch.next(5000, never)).toBe(true)
    expect(performance.now() - started).toBeLessThan(1000)
    // A new read takes it in: the next wait waits again.
    watch.reading()
    expect(await watch.next(10, never)).toBe(false)
    // Closed: its wait ends, and a signal finds no one.
    const closing = watch.next(60_000, never)
    watch.close()
    expect(await closing).toBe(false)
    signal.notify('acct_a')
    expect(await watch.next(10, never)).toBe(false)
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
