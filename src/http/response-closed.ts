// A response's 'close' is emitted once. A hook or handler that awaited while its client left adds its
// listener after that, and the listener never runs: what it was to give back stays taken.
import type { ServerResponse } from 'node:http'

/** Runs `run` once the response is written out or its connection is gone, at once if it already is. */
export function onResponseClosed(response: ServerResponse, run: () => void): void {
  if (response.closed) {
    run()
  } else {
    response.once('close', run)
  }
}
