// Sending JSON that is already serialized (stored bodies, spliced pages) without a second pass.
import type { FastifyReply } from 'fastify'

export function sendRawJson(reply: FastifyReply, status: number, json: string): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(json)
}
