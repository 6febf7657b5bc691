/**
 * The management API's errors: `ApiError` with a code of the one catalogue (src/console/errors.ts:
 * `API_ERRORS`, code → HTTP status) and the mapping of a console error to its answer, read from that
 * catalogue. Messages name the field at fault and never echo a key or token.
 */
import { API_ERRORS, CodedError, CONSOLE_ERRORS, type ApiErrorCode, type ConsoleError } from '../console/errors.ts';

export { API_ERRORS, type ApiErrorCode } from '../console/errors.ts';

export class ApiError extends CodedError<ApiErrorCode> {
  override name = 'ApiError';
  get status(): number {
    return API_ERRORS[this.code];
  }
  body(): { error: { code: string; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}

export function fromConsoleError(err: ConsoleError): ApiError {
  const e = CONSOLE_ERRORS[err.code];
  return new ApiError(e.api, e.apiMessage ?? err.message);
}
