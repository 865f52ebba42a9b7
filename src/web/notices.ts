// The one-line notices a redirect asks a page to show (`?notice=revoked`).
import { Type } from '@sinclair/typebox'

/** A page's notices by name: a Map, so a prototype name (`?notice=constructor`) is no notice. */
export type Notices = ReadonlyMap<string, string>

export const NoticeQuery = Type.Object({ notice: Type.Optional(Type.String()) })

export const noticeOf = (notices: Notices, name: unknown): string | undefined =>
  typeof name === 'string' ? notices.get(name) : undefined
