// A background task run when woken, one run at a time: wakes that come during a run ask for one
// more run after it, however many they were. Woken by the writes that give it work and by a poll.

export interface CoalescedRun {
  /** Runs the task now, or once more after the run in progress. Does nothing once stopped. */
  wake(): void
  /** Wakes now and then every `ms` (unref'd: the poll alone keeps no process alive). */
  poll(ms: number): void
  /** The run in progress, if any. */
  readonly current: Promise<void> | undefined
  readonly stopped: boolean
  /** No more runs; resolves once the run in progress has ended. */
  stop(): Promise<void>
}

/** `task`'s failures go to `onError`: a run that failed is run again at the next wake. */
export function coalescedRun(task: () => Promise<void>, onError: (error: unknown) => void): CoalescedRun {
  let current: Promise<void> | undefined
  let again = false
  let stopped = false
  let timer: NodeJS.Timeout | undefined

  function wake(): void {
    if (stopped) {
      return
    }
    if (current) {
      again = true
      return
    }
    current = task()
      .catch(onError)
      .finally(() => {
        current = undefined
        if (again) {
          again = false
          wake()
        }
      })
  }

  return {
    wake,
    poll(ms) {
      if (stopped) {
        return
      }
      wake()
      clearInterval(timer)
      timer = setInterval(wake, ms)
      timer.unref()
    },
    get current() {
      return current
    },
    get stopped() {
      return stopped
    },
    async stop() {
      stopped = true
      clearInterval(timer)
      await current
    },
  }
}
