/**
 * Says clearly when the sidecar cannot reach Redis: the first connection error is one line naming
 * the Redis it tries and what to do; while the outage lasts, a short reminder at most every
 * `reminderMs`; when Redis answers again, one line. `reason()` is what `/readyz` reports.
 * Never logs the URL's password (only scheme, hosts and master name).
 */
import type { Logger } from 'pino';
import { parseRedisUrl } from '../redis-url.ts';
import { systemClock, type Clock } from '../core/clock.ts';

export const REMINDER_MS = 60_000;

/** The Redis a URL points at, without credentials: `redis://127.0.0.1:6379`. */
export function redisTarget(url: string): string {
  try {
    const p = parseRedisUrl(url);
    const hosts = p.hosts.map((h) => (h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`)).join(',');
    const scheme = p.mode === 'sentinel' ? 'redis-sentinel' : p.mode === 'cluster' ? (p.tls ? 'rediss-cluster' : 'redis-cluster') : p.tls ? 'rediss' : 'redis';
    return `${scheme}://${hosts}${p.masterName ? `/${p.masterName}` : ''}`;
  } catch {
    return 'the configured Redis';
  }
}

interface Emitter {
  on(event: 'error', fn: (err: Error) => void): unknown;
  on(event: 'ready', fn: () => void): unknown;
}

export class RedisOutageReporter {
  readonly target: string;
  readonly #log: Logger;
  readonly #reminderMs: number;
  readonly #clock: Clock;
  #down = false;
  #since = 0;
  #nextReminder = 0;
  #lastError = '';
  #closed = false;

  constructor(url: string, log: Logger, reminderMs = REMINDER_MS, clock: Clock = systemClock) {
    this.#clock = clock;
    this.target = redisTarget(url);
    this.#log = log;
    this.#reminderMs = reminderMs;
  }

  attach(client: Emitter): void {
    client.on('error', (err: Error) => this.error(err));
    client.on('ready', () => this.up());
  }

  error(err: Error): void {
    const msg = err?.message ?? String(err);
    // A command refused while disconnected is a symptom, not the cause: the connection error says why.
    if (this.#closed || /Stream isn't writeable/.test(msg)) {
      this.#log.debug({ err: { message: msg } }, 'redis connection error');
      return;
    }
    this.#lastError = msg;
    const now = this.#clock.now();
    if (!this.#down) {
      this.#down = true;
      this.#since = now;
      this.#nextReminder = now + this.#reminderMs;
      this.#log.error(
        { redis: this.target, err: { message: msg } },
        `cannot reach Redis at ${this.target} (${msg}); keys are refused with 503 until it answers. ` +
          'Start Redis there, or point REDIS_URL (serve --redis) at your Redis; to try keygate without one, run bin/keygate dev',
      );
    } else if (now >= this.#nextReminder) {
      this.#nextReminder = now + this.#reminderMs;
      this.#log.warn({ redis: this.target, downForS: Math.round((now - this.#since) / 1000), err: { message: msg } }, `still cannot reach Redis at ${this.target}`);
    }
  }

  up(): void {
    if (!this.#down) return;
    this.#down = false;
    this.#log.info({ redis: this.target, downForS: Math.round((this.#clock.now() - this.#since) / 1000) }, `Redis at ${this.target} answers again`);
  }

  /** Why the store is not reachable, for `/readyz`; undefined while connected. */
  reason(): string | undefined {
    return this.#down ? `cannot reach Redis at ${this.target}: ${this.#lastError}` : undefined;
  }

  /** After the store closes: later errors are the close's, not an outage. */
  close(): void {
    this.#closed = true;
  }
}
