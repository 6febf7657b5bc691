/**
 * The console's one error catalogue (src/console/errors.ts): every console code has one API answer
 * (a code with an HTTP status) and one CLI exit status, and the API maps a console error from it;
 * a store outage is told by the error's type, never by its message.
 */
import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { API_ERRORS, CONSOLE_ERRORS, ConsoleError, isStoreOutage, STORE_OUTAGE, type ConsoleErrorCode } from '../../src/console/errors.ts';
import { ApiError, fromConsoleError } from '../../src/console-api/errors.ts';

const CODES = Object.keys(CONSOLE_ERRORS) as ConsoleErrorCode[];

describe('the console error catalogue', () => {
  it('maps every console code once: an API code with its HTTP status, and a CLI exit status', () => {
    expect(CODES.sort()).toEqual(['CONFLICT', 'CORRUPT', 'CREDENTIAL_KEY', 'INVALID_INPUT', 'LIMIT', 'NOT_FOUND', 'RANGE', 'REVEAL_KEY', 'REVOKED']);
    for (const code of CODES) {
      const e = fromConsoleError(new ConsoleError(code, `detail of ${code}`));
      expect(e).toBeInstanceOf(ApiError);
      expect(e.code).toBe(CONSOLE_ERRORS[code].api);
      expect(e.status).toBe(API_ERRORS[CONSOLE_ERRORS[code].api]);
      expect(new ConsoleError(code, 'x').isUsage).toBe(CONSOLE_ERRORS[code].exit === 2);
    }
    // The statuses the API has always answered for them.
    expect(Object.fromEntries(CODES.map((c) => [c, fromConsoleError(new ConsoleError(c, 'x')).status]))).toEqual({
      CONFLICT: 409,
      CORRUPT: 500,
      CREDENTIAL_KEY: 503,
      INVALID_INPUT: 400,
      LIMIT: 422,
      NOT_FOUND: 404,
      RANGE: 422,
      REVEAL_KEY: 503,
      REVOKED: 409,
    });
    expect(API_ERRORS[STORE_OUTAGE.api]).toBe(503);
  });

  it("shows the caller's message, but not the server's configuration or a corrupt record's detail", () => {
    expect(fromConsoleError(new ConsoleError('NOT_FOUND', 'no key with id key_x')).message).toBe('no key with id key_x');
    expect(fromConsoleError(new ConsoleError('REVEAL_KEY', 'KEYGATE_REVEAL_KEY: kid k1 is 31 bytes')).message).not.toMatch(/kid|bytes/);
    expect(fromConsoleError(new ConsoleError('CORRUPT', 'key key_x: record has v=9')).message).not.toMatch(/key_x|v=9/);
  });

  it('tells a store outage by type: connection errors are, replies, coded errors and bugs are not', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(isStoreOutage(refused)).toBe(true);
    expect(isStoreOutage(new Error('Connection is closed.'))).toBe(true);
    expect(isStoreOutage(new ReplyError('ERR Error running script'))).toBe(false);
    expect(isStoreOutage(new ConsoleError('INVALID_INPUT', 'connection refused'))).toBe(false);
    expect(isStoreOutage(new ApiError('INTERNAL', 'Connection is closed.'))).toBe(false);
    expect(isStoreOutage(new TypeError('x is not a function'))).toBe(false);
    expect(isStoreOutage('Connection is closed.')).toBe(false);
  });
});
