/**
 * The console's error catalogue, written once: the codes of console operations (`ConsoleError`), the
 * management API's codes with their HTTP status (`API_ERRORS`), each console code's API answer and
 * CLI exit status (`CONSOLE_ERRORS`), and what a store outage is (`isStoreOutage`, by type). The API
 * (src/console-api/errors.ts, its error handler) and the CLI (src/cli/main.ts) both read this table.
 */
import { ReplyError } from 'ioredis';

/** Errors of console operations. `code` is stable for callers; `message` is one line, safe to show. */
export type ConsoleErrorCode =
  | 'INVALID_INPUT' // bad argument; nothing was written
  | 'NOT_FOUND' // no such key id
  | 'REVOKED' // the key is revoked (terminal): cannot be updated or revealed
  | 'LIMIT' // the account already has the maximum number of active keys
  | 'REVEAL_KEY' // KEYGATE_REVEAL_KEY missing or malformed, or the envelope does not open under it
  | 'CREDENTIAL_KEY' // KEYGATE_CREDENTIAL_KEY missing or malformed: accounts' own credentials cannot be set
  | 'CORRUPT' // a record in Redis does not follow the schema
  | 'CONFLICT' // an id or digest collision that survived retries, a repeated id with another body
  | 'RANGE'; // an amount that would take a balance or a total out of the exact integer range

/** The management API's error codes and their HTTP status: every error answer is `{"error": {"code", "message"}}`. */
export const API_ERRORS = {
  INVALID_INPUT: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  REVOKED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  LIMIT_REACHED: 422,
  OUT_OF_RANGE: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  STORE_UNAVAILABLE: 503,
} as const;
export type ApiErrorCode = keyof typeof API_ERRORS;

/** CLI exit status: 2 a request that cannot succeed as given (the caller fixes it), 1 a store or server fault. */
export type ExitStatus = 1 | 2;

/**
 * Each console code: its API code (so its HTTP status), the API's message when the console's own
 * must not be shown (the server's configuration or its store, not the caller's request), and the
 * CLI's exit status.
 */
export const CONSOLE_ERRORS: { readonly [C in ConsoleErrorCode]: { readonly api: ApiErrorCode; readonly apiMessage?: string; readonly exit: ExitStatus } } = {
  INVALID_INPUT: { api: 'INVALID_INPUT', exit: 2 },
  NOT_FOUND: { api: 'NOT_FOUND', exit: 2 },
  REVOKED: { api: 'REVOKED', exit: 2 },
  LIMIT: { api: 'LIMIT_REACHED', exit: 2 },
  // A missing or wrong reveal key is the server's configuration, not the caller's: said without detail.
  REVEAL_KEY: { api: 'STORE_UNAVAILABLE', apiMessage: 'the server cannot encrypt or reveal keys (KEYGATE_REVEAL_KEY)', exit: 2 },
  CREDENTIAL_KEY: { api: 'STORE_UNAVAILABLE', apiMessage: "the server cannot encrypt accounts' own credentials (KEYGATE_CREDENTIAL_KEY is not set or not usable)", exit: 2 },
  CORRUPT: { api: 'INTERNAL', apiMessage: 'a stored record does not follow the schema', exit: 1 },
  CONFLICT: { api: 'CONFLICT', exit: 1 },
  RANGE: { api: 'OUT_OF_RANGE', exit: 2 },
};

/** The API's answer to a store outage, and the CLI's exit status for it. */
export const STORE_OUTAGE = { api: 'STORE_UNAVAILABLE', apiMessage: 'the store is unavailable; nothing was changed', exit: 1 } as const;

/** An error with a stable code for callers and a one-line message safe to show (the console's and the API's). */
export class CodedError<C extends string> extends Error {
  readonly code: C;
  constructor(code: C, message: string) {
    super(message);
    this.code = code;
  }
}

export class ConsoleError extends CodedError<ConsoleErrorCode> {
  override name = 'ConsoleError';

  /** A request that cannot succeed as given (CLI exit status 2), as opposed to a store fault (1). */
  get isUsage(): boolean {
    return CONSOLE_ERRORS[this.code].exit === 2;
  }
}

/**
 * Whether an error that is none of the console's or the API's own (coded, validation, Fastify) is
 * the store's outage, by its type: the only other I/O of a console operation is the store client,
 * whose failures to reach Redis (refused or closed connections, command timeouts, retries exhausted,
 * a Cluster without a node) are plain errors or ioredis' abort errors. A reply error (Redis
 * answered: a script or a type fault), a coded error and the language's own errors (a bug) are not.
 */
export function isStoreOutage(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof CodedError || err instanceof ReplyError) return false;
  if (err instanceof TypeError || err instanceof RangeError || err instanceof ReferenceError || err instanceof SyntaxError) return false;
  return true;
}
