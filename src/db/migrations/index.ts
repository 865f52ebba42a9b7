// Every migration, in order. Append new ones at the end; never reorder or edit shipped ones.
export * as m20261122T000000_init from './20261122T000000-init.js'
export * as m20261122T050000_web from './20261122T050000-web.js'
export * as m20261122T051500_idempotency from './20261122T051500-idempotency.js'
export * as m20261122T060000_contacts_updated_index from './20261122T060000-contacts-updated-index.js'
export * as m20261123T120000_contact_terms from './20261123T120000-contact-terms.js'
export * as m20261123T130000_audit_log from './20261123T130000-audit-log.js'
export * as m20261123T140000_sign_in_failures from './20261123T140000-sign-in-failures.js'
export * as m20261124T094444_event_feed_position from './20261124T094444-event-feed-position.js'
