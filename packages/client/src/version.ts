/** This package's version (package.json's, which a test holds it to): sent in every User-Agent. */
export const VERSION = '0.1.0'

/** What the API's request log shows as the client, unless `headers` names another. */
export const USER_AGENT = `contacts-api-client/${VERSION}`
