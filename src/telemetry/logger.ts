/**
 * Structured JSON logs (pino). Keys never reach a log line: every place that could carry one is
 * redacted by path, and code logs only key ids or `maskKey` output.
 */
import { pino, type Logger, type LoggerOptions } from 'pino';
import { DEFAULT_KEY_PREFIX, maskKey } from '../core/key-format.ts';

export type { Logger };

export const REDACT_PATHS = [
  'key',
  'apiKey',
  'plaintext',
  'secret',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["x-goog-api-key"]',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-goog-api-key"]',
  '*.key',
  '*.plaintext',
  '*.secret',
];

/**
 * The last line of defence for paths no redact rule names (an error message that quotes its input,
 * a stack): every finished line is scanned for key-shaped tokens (`<prefix>` + 16 or more base62)
 * and `Bearer <token>`, which are masked. Lines without either pattern pass untouched.
 */
export function keyScrubber(keyPrefix: string = DEFAULT_KEY_PREFIX): (line: string) => string {
  const escaped = keyPrefix.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
  const keyLike = new RegExp(`${escaped}[A-Za-z0-9]{16,}`, 'g');
  const bearer = /(bearer\s+)[A-Za-z0-9._~+/=-]{16,}/gi;
  const mentionsBearer = /bearer/i;
  return (line) => {
    let out = line;
    if (out.includes(keyPrefix)) out = out.replace(keyLike, (k) => maskKey(k, keyPrefix));
    if (mentionsBearer.test(out)) out = out.replace(bearer, '$1[redacted]');
    return out;
  };
}

export function createLogger(level: string, destination?: pino.DestinationStream, opts: { keyPrefix?: string } = {}): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: 'keygate' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  const dest: pino.DestinationStream & { flush?: (cb?: (err?: Error) => void) => void; flushSync?: () => void } =
    destination ?? pino.destination({ dest: 1, sync: false });
  const scrub = keyScrubber(opts.keyPrefix);
  return pino(options, {
    write: (line: string) => dest.write(scrub(line)),
    flush: (cb?: (err?: Error) => void) => (dest.flush ? dest.flush(cb) : cb?.()),
    flushSync: () => dest.flushSync?.(),
  } as pino.DestinationStream);
}
