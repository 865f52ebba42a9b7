// The baseline: raw node:http answering every request with one captured answer of the server
// under test (bench/run.ts writes it to the JSON file in argv[2]: status, headers, body in base64,
// and whether requests carry a body to read first). Plain JavaScript, no loader: the cost of HTTP
// with the same bytes on the wire, and nothing else.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

const answer = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8'))
const port = Number(process.argv[3])
const body = Buffer.from(answer.body, 'base64')
const headers = Object.fromEntries(answer.headers)
if (answer.status !== 204 && answer.status !== 304) {
  headers['content-length'] = body.length
}

const reply = (response) => {
  response.writeHead(answer.status, headers)
  response.end(body)
}

createServer(
  answer.readBody
    ? // A write's body is read to its end before answering, as any server must.
      (request, response) => {
        request.on('data', () => {})
        request.on('end', () => reply(response))
      }
    : (_request, response) => reply(response),
).listen(port, '127.0.0.1')
