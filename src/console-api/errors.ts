/**
 * The management API's error catalogue: every error answer is `{"error": {"code", "message"}}`
 * with one of these codes and its HTTP status. Messages name the field at fault and never echo a
 * key or token.
 */
import { CodedError, ConsoleError, type ConsoleErrorCode } from '../console/errors.ts';

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

export class ApiError extends CodedError<ApiErrorCode> {
  override name = 'ApiError';
  get status(): number {
    return API_ERRORS[this.code];
  }
  body(): { error: { code: string; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}

const FROM_CONSOLE: Record<ConsoleErrorCode, ApiErrorCode> = {
  INVALID_INPUT: 'INVALID_INPUT',
  NOT_FOUND: 'NOT_FOUND',
  REVOKED: 'REVOKED',
  LIMIT: 'LIMIT_REACHED',
  REVEAL_KEY: 'STORE_UNAVAILABLE',
  CORRUPT: 'INTERNAL',
  CONFLICT: 'CONFLICT',
  RANGE: 'OUT_OF_RANGE',
};

export function fromConsoleError(err: ConsoleError): ApiError {
  // A missing or wrong reveal key is the server's configuration, not the caller's: say so without detail.
  if (err.code === 'REVEAL_KEY') return new ApiError('STORE_UNAVAILABLE', 'the server cannot encrypt or reveal keys (KEYGATE_REVEAL_KEY)');
  if (err.code === 'CORRUPT') return new ApiError('INTERNAL', 'a stored record does not follow the schema');
  return new ApiError(FROM_CONSOLE[err.code], err.message);
}
