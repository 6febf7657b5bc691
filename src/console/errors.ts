/** Errors of console operations. `code` is stable for callers; `message` is one line, safe to show. */
export type ConsoleErrorCode =
  | 'INVALID_INPUT' // bad argument; nothing was written
  | 'NOT_FOUND' // no such key id
  | 'REVOKED' // the key is revoked (terminal): cannot be updated or revealed
  | 'LIMIT' // the account already has the maximum number of active keys
  | 'REVEAL_KEY' // KEYGATE_REVEAL_KEY missing or malformed, or the envelope does not open under it
  | 'CORRUPT' // a record in Redis does not follow the schema
  | 'CONFLICT' // an id or digest collision that survived retries, a repeated id with another body
  | 'RANGE'; // an amount that would take a balance or a total out of the exact integer range

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
    return this.code !== 'CORRUPT' && this.code !== 'CONFLICT';
  }
}
