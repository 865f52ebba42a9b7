// Telling every instance that a key was revoked or rolled out (docs/design.md#authentication), on
// the broadcast of src/lib/broadcast.ts; a missed message is bounded by the verification cache's TTL.
import type { Broadcast } from '../lib/broadcast.js'

export const KEY_REVOCATIONS_CHANNEL = 'contacts_api_key_revoked'

/** publish(keyHash) drops the key from every instance's cache; `shared` tells whether others hear it. */
export type KeyRevocations = Broadcast
