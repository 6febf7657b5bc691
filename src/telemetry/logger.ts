/**
 * Structured JSON logs (pino). Keys never reach a log line: every place that could carry one is
 * redacted by path, and code logs only key ids or `maskKey` output.
 */
import { pino, type Logger, type LoggerOptions } from 'pino';

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

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const opts: LoggerOptions = {
    level,
    base: { service: 'keygate' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(opts, destination) : pino(opts);
}
