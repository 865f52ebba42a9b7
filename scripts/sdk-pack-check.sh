#!/usr/bin/env bash
# The SDK as a user gets it: `npm pack` of packages/client, installed into an empty project outside
# the repository, type-checked and run there against a real server (SQLite, a free port).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "-- build the server and pack the SDK"
npm run build --silent
tarball="$(npm pack --silent -w @contacts-api/client --pack-destination "$work" | tail -n 1)"
echo "packed $tarball"

echo "-- install it into an empty project"
mkdir "$work/project"
cd "$work/project"
npm init -y >/dev/null
npm pkg set type=module
npm install --no-audit --no-fund --silent "$work/$tarball"
test ! -e node_modules/@contacts-api/client/src || { echo "the tarball ships src/" >&2; exit 1; }

cat > check.ts <<'TS'
import { ApiError, type Contact, createClient } from '@contacts-api/client'

const [baseUrl, apiKey] = process.argv.slice(2) as [string, string]
const client = createClient({ baseUrl, apiKey })
const account = await client.me()
for (let i = 0; i < 5; i++) {
  await client.contacts.create({ email: `pack${i}@example.com`, tags: ['pack'] })
}
const seen: Contact[] = []
for await (const contact of client.contacts.all({ tag: 'pack', limit: 2 })) {
  seen.push(contact)
}
if (seen.length !== 5) {
  throw new Error(`walked ${seen.length} contacts, expected 5`)
}
try {
  await client.contacts.create({ email: 'pack0@example.com' })
  throw new Error('a duplicate email was accepted')
} catch (error) {
  if (!(error instanceof ApiError) || error.code !== 'contact_exists' || !error.requestId) {
    throw error
  }
}
console.log(`ok: ${account.name}, walked ${seen.length} contacts in pages of 2, duplicate refused as contact_exists`)
TS
cat > tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022", "DOM"],
    "types": [],
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "strict": true,
    "verbatimModuleSyntax": true
  },
  "files": ["check.ts", "globals.d.ts"]
}
JSON
echo "-- type-check and compile the script against the installed package"
# process.argv without @types/node: declare the one global the script uses.
printf 'declare const process: { argv: string[] }\n' > globals.d.ts
node "$repo/node_modules/typescript/bin/tsc" -p tsconfig.json
cd "$repo"

echo "-- start a server on SQLite"
port="$(node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
export DATABASE_URL="sqlite:$work/contacts.sqlite" PORT="$port" LOG_LEVEL=warn
export SECRET="sdk-pack-check-secret-0123456789abcdef0123"
node dist/main.js migrate >/dev/null
created="$(node dist/main.js accounts create --name Packed --json)"
json() { node -e "let s='';process.stdin.on('data',(c)=>s+=c).on('end',()=>console.log(JSON.parse(s).$1))"; }
key="$(printf '%s' "$created" | json api_key.secret)"
test_key="$(node dist/main.js keys create --account "$(printf '%s' "$created" | json account.id)" --test --json | json api_key.secret)"
node dist/main.js serve >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  if node -e "fetch('http://127.0.0.1:$port/healthz').then((r)=>process.exit(r.ok?0:1),()=>process.exit(1))"; then break; fi
  sleep 0.1
done

echo "-- run the script in the outside project"
cd "$work/project"
node check.js "http://127.0.0.1:$port" "$key"

echo "-- npx @contacts-api/client listen forwards a triggered event, signed with the secret it printed"
cat > receiver.mjs <<'JS'
// Answers 204 to one delivery verified with the secret listen printed (argv), then exits 0.
import http from 'node:http'
import { verifyWebhook } from '@contacts-api/client'
const [port, secretFile] = process.argv.slice(2)
const { readFileSync } = await import('node:fs')
const server = http.createServer((request, response) => {
  let body = ''
  request.on('data', (chunk) => (body += chunk)).on('end', () => {
    const secret = /whsec_[A-Za-z0-9+/=]+/.exec(readFileSync(secretFile, 'utf8'))?.[0] ?? ''
    const event = verifyWebhook(secret, body, request.headers)
    console.log(`verified ${event.type}`)
    response.writeHead(204).end(() => server.close())
  })
}).listen(Number(port), '127.0.0.1')
JS
receiver_port="$(node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
export CONTACTS_API_KEY="$test_key" API_URL="http://127.0.0.1:$port"
# The bin npx runs, started directly: npm exits 143 when signalled, whatever its child says.
./node_modules/.bin/contacts-api-client listen --forward-to "http://127.0.0.1:$receiver_port/hooks" >"$work/listen.log" 2>&1 &
listen_pid=$!
for _ in $(seq 1 100); do grep -q 'Ctrl-C' "$work/listen.log" && break; sleep 0.1; done
node receiver.mjs "$receiver_port" "$work/listen.log" >"$work/receiver.log" 2>&1 &
receiver_pid=$!
sleep 0.3
npx @contacts-api/client trigger contact.created
wait "$receiver_pid" || { cat "$work/listen.log" "$work/receiver.log" >&2; exit 1; }
cat "$work/receiver.log"
kill -TERM "$listen_pid"
wait "$listen_pid" || { echo "listen ended with $? on SIGTERM" >&2; cat "$work/listen.log" >&2; exit 1; }
grep -q '  contact.created  evt_' "$work/listen.log" || { cat "$work/listen.log" >&2; exit 1; }
echo "ok: listen forwarded contact.created and ended with 0 on SIGTERM (Ctrl-C: test/cli-listen.test.ts)"
