import http from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { onResponseClosed } from './response-closed.js'

describe('onResponseClosed', () => {
  /** A server whose one request waits until its client has left, then asks to be told of the close. */
  const closedAfterClientLeft = (listenAfterwards: (response: http.ServerResponse) => Promise<boolean>) =>
    new Promise<boolean>((resolve) => {
      const server = http.createServer((request, response) => {
        request.socket.once('close', () => {
          void listenAfterwards(response).then((ran) => server.close(() => resolve(ran)))
        })
      })
      server.listen(0, '127.0.0.1', () => {
        const socket = connect((server.address() as AddressInfo).port, '127.0.0.1', () =>
          socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
        )
        setTimeout(() => socket.destroy(), 50)
      })
    })
  const within100ms = (listen: (response: http.ServerResponse, run: () => void) => void) =>
    closedAfterClientLeft(
      (response) =>
        new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), 100)
          listen(response, () => {
            clearTimeout(timer)
            resolve(true)
          })
        }),
    )

  it('runs at once for a response that closed before it was called', async () => {
    expect(await within100ms(onResponseClosed)).toBe(true)
  })

  it("is needed: a 'close' listener added after the close never runs", async () => {
    expect(await within100ms((response, run) => response.once('close', run))).toBe(false)
  })

  it('runs once the response is written out', async () => {
    const server = http.createServer((_request, response) => {
      onResponseClosed(response, () => server.close())
      response.end('ok')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const closed = new Promise((resolve) => server.once('close', resolve))
    const answer = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
      headers: { connection: 'close' },
    })
    expect(await answer.text()).toBe('ok')
    await closed
  })
})
