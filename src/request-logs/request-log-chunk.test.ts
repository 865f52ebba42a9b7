import { describe, expect, it } from 'vitest'
import { newId } from '../lib/ids.js'
import type { StoredEntry } from './request-log.js'
import { CHUNK_ENTRIES_MAX, chunksOf, decodeChunk } from './request-log-chunk.js'

describe('chunks', () => {
  it('store what was recorded, across chunks, with repeated and changing strings', () => {
    const start = Date.now() - 10_000
    const entries = Array.from({ length: 2 * CHUNK_ENTRIES_MAX + 37 }, (_, i): StoredEntry => {
      const path = i % 3 === 0 ? '/api/v1/me' : `/api/v1/contacts/con_${i % 7}`
      return [
        newId('request', start + Math.floor(i / 10)),
        i % 5 === 0 ? 'key_01JD3Z8Q4R5S6T7V8W9X0Y1Z2K' : 'key_01JD3Z8Q4R5S6T7V8W9X0Y1Z2M',
        i % 4 === 0 ? 'POST' : 'GET',
        // Equal strings that are not the same object, as each request's path is.
        [...path].join(''),
        path.startsWith('/api/v1/me') ? '/api/v1/me' : '/api/v1/contacts/{id}',
        i % 11 === 0 ? 404 : 200,
        (i % 13) / 10,
        i % 11 === 0 ? 'not_found' : null,
        i % 2 === 0 ? '127.0.0.1' : '203.0.113.7',
        i % 6 === 0 ? null : `agent/${i % 4}`,
        i % 9 === 0 ? `idem-${i}` : null,
        i % 9 === 0 && i % 2 === 0 ? 1 : 0,
      ]
    })
    const chunks = chunksOf(entries)
    expect(chunks.map((chunk) => chunk.size)).toEqual([CHUNK_ENTRIES_MAX, CHUNK_ENTRIES_MAX, 37])
    expect(chunks.flatMap((chunk) => decodeChunk(chunk.text))).toEqual(entries)
    expect(chunks.map((chunk) => [chunk.firstId, chunk.lastId])).toEqual([
      [entries[0]?.[0], entries[CHUNK_ENTRIES_MAX - 1]?.[0]],
      [entries[CHUNK_ENTRIES_MAX]?.[0], entries[2 * CHUNK_ENTRIES_MAX - 1]?.[0]],
      [entries[2 * CHUNK_ENTRIES_MAX]?.[0], entries.at(-1)?.[0]],
    ])
  })
})
