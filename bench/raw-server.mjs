// The baseline: raw node:http answering every request with the same bytes (a real list page, read
// from the file in argv[2]). Plain JavaScript, no loader: the cost of HTTP and nothing else.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

const body = readFileSync(process.argv[2] ?? '')
const port = Number(process.argv[3])

createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length })
  response.end(body)
}).listen(port, '127.0.0.1')
