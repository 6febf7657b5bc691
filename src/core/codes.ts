/** The deny codes (README "What it does") and the HTTP status each one carries. */
export const DENY_STATUS = {
  API_KEY_REQUIRED: 401,
  AMBIGUOUS_API_KEY: 400,
  INVALID_API_KEY: 401,
  API_KEY_EXPIRED: 401,
  USER_BLOCKED: 403,
  INSUFFICIENT_BALANCE: 402,
  KEY_LIMIT_EXCEEDED: 402,
  ENDPOINT_NOT_ALLOWED: 403,
  USAGE_NOT_GUARANTEED: 400,
  MODEL_NOT_ALLOWED: 403,
  RATE_LIMITED: 429,
  AUTH_UNAVAILABLE: 503,
} as const;

export type DenyCode = keyof typeof DENY_STATUS;
export const DENY_CODES = Object.keys(DENY_STATUS) as DenyCode[];

/** What happened and what to do, per code. `detail` (already safe text) is appended where given. */
export const DENY_MESSAGE: Record<DenyCode, string> = {
  API_KEY_REQUIRED:
    'No API key was sent. Send your key in the Authorization header as "Bearer <key>" (or in x-api-key / x-goog-api-key).',
  AMBIGUOUS_API_KEY:
    'More than one API key was sent. Send exactly one key, in exactly one of Authorization, x-api-key or x-goog-api-key.',
  INVALID_API_KEY:
    'The API key is invalid or has been revoked. Check the key you sent, or create a new key in the console.',
  API_KEY_EXPIRED: 'The API key has expired. Create a new key in the console, or extend this key\'s expiry.',
  USER_BLOCKED: 'The account that owns this API key is disabled. Contact the account owner or support.',
  INSUFFICIENT_BALANCE:
    'The prepaid balance of the account that owns this API key is used up. Add credits to the account\'s wallet in the console, then retry.',
  KEY_LIMIT_EXCEEDED:
    'This API key has reached its spend limit for the current period. Wait for the period to reset, or raise the key\'s limit in the console.',
  ENDPOINT_NOT_ALLOWED: 'This API key may not call this endpoint.',
  USAGE_NOT_GUARANTEED:
    'The gateway could not read or rewrite the whole request body, so it cannot check what the request names or guarantee that its usage is booked. Send one complete JSON object without repeated keys, within the gateway\'s body size limit, in one piece.',
  MODEL_NOT_ALLOWED:
    'This API key is not allowed to use the requested model. Use a model the key allows, or change the key\'s allowed models in the console.',
  RATE_LIMITED:
    'A rate of this API key or of its account is used up for the current window. Retry after the time in the retry-after header, or ask for a higher rate in the console.',
  AUTH_UNAVAILABLE:
    'The gateway could not verify the API key because its key store is unavailable. Retry the request shortly.',
};
