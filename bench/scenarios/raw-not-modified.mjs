// The list-304 scenario's baseline (conditional.ts): raw node:http answering every request with the
// same 304 head our server sent (argv[2]: a JSON file {status, headers}; argv[3]: the port).
// Plain JavaScript, no loader: the cost of HTTP and nothing else.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

const head = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8'))
const port = Number(process.argv[3])

createServer((_request, response) => {
  response.writeHead(head.status, head.headers)
  response.end()
}).listen(port, '127.0.0.1')
