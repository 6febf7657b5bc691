/**
 * src/lifecycle.ts on its own: listening, and the shutdown sequence on fake timers (order, the
 * drain delay and its cut near the deadline, the time each close is given, idempotence, failures).
 * The whole thing against a real process and Redis is test/shutdown.test.ts.
 */
import { createServer, type Server } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { closeAll, listenOn, shutdownSequence, type Closable, type ShutdownPlan } from '../src/lifecycle.ts';
import { createLogger } from '../src/telemetry/logger.ts';

let lines: string[];
let log: ReturnType<typeof createLogger>;
let events: string[];

beforeEach(() => {
  lines = [];
  log = createLogger('info', { write: (line: string) => void lines.push(line) });
  events = [];
});

const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

/** A closable that records when it is closed and with how much time, and takes `takesMs` to close. */
function closable(name: string, takesMs = 0, fails = false): Closable & { given: number[] } {
  const given: number[] = [];
  return {
    name,
    given,
    async close(timeoutMs) {
      given.push(timeoutMs);
      events.push(`${name}:start`);
      if (takesMs > 0) await new Promise((r) => setTimeout(r, takesMs));
      events.push(`${name}:end`);
      if (fails) throw new Error(`${name} broke`);
    },
  };
}

function plan(over: Partial<ShutdownPlan> = {}): ShutdownPlan {
  return {
    shutdownTimeoutMs: 20_000,
    drain: () => void events.push('drain'),
    transports: [closable('grpc', 100), closable('http', 50)],
    admin: closable('admin'),
    store: { close: async () => void events.push('store') },
    ...over,
  };
}

describe('shutdownSequence', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('drains at once, serves through the drain delay, then closes transports together, admin, store', async () => {
    const stop = shutdownSequence(plan(), log);
    const done = stop(5000);
    await vi.advanceTimersByTimeAsync(0);
    expect(events).toEqual(['drain']);
    expect(records().find((r) => r.msg === 'draining: not ready, still serving')).toMatchObject({ drainDelayMs: 5000, shutdownTimeoutMs: 20_000 });

    await vi.advanceTimersByTimeAsync(4999);
    expect(events).toEqual(['drain']);
    await vi.advanceTimersByTimeAsync(1);
    expect(events).toEqual(['drain', 'grpc:start', 'http:start']);

    await vi.advanceTimersByTimeAsync(100);
    await done;
    expect(events).toEqual(['drain', 'grpc:start', 'http:start', 'http:end', 'grpc:end', 'admin:start', 'admin:end', 'store']);
    expect(records().at(-1)?.msg).toBe('stopped');
  });

  it('gives each close the time left until the one deadline', async () => {
    const p = plan({ shutdownTimeoutMs: 10_000 });
    const done = shutdownSequence(p, log)(3000);
    await vi.advanceTimersByTimeAsync(3100);
    await done;
    const [grpc, http] = p.transports as Array<Closable & { given: number[] }>;
    expect(grpc!.given).toEqual([7000]);
    expect(http!.given).toEqual([7000]);
    // the admin port waited for the slower transport (100 ms)
    expect((p.admin as Closable & { given: number[] }).given).toEqual([6900]);
  });

  it('cuts the drain delay short to keep 1 s of the shutdown timeout for the closes', async () => {
    const p = plan({ shutdownTimeoutMs: 1500 });
    const done = shutdownSequence(p, log)(60_000);
    await vi.advanceTimersByTimeAsync(499);
    expect(events).toEqual(['drain']);
    await vi.advanceTimersByTimeAsync(1);
    expect(events).toContain('grpc:start');
    expect((p.transports[0] as Closable & { given: number[] }).given).toEqual([1000]);
    await vi.advanceTimersByTimeAsync(100);
    await done;
  });

  it('with no drain delay closes at once', async () => {
    const done = shutdownSequence(plan(), log)(0);
    await vi.advanceTimersByTimeAsync(100);
    await done;
    expect(events.at(-1)).toBe('store');
  });

  it('runs once: a second call (shutdown after close, a second signal) gets the same promise', async () => {
    const stop = shutdownSequence(plan(), log);
    const first = stop(0);
    const second = stop(5000);
    expect(second).toBe(first);
    await vi.advanceTimersByTimeAsync(100);
    await first;
    expect(events.filter((e) => e === 'drain')).toHaveLength(1);
    expect(events.filter((e) => e === 'store')).toHaveLength(1);
  });

  it('a failing close is logged by name and the rest still close', async () => {
    const p = plan({ transports: [closable('grpc', 0, true), closable('http')] });
    const done = shutdownSequence(p, log)(0);
    await vi.advanceTimersByTimeAsync(0);
    await done;
    expect(events).toEqual(['drain', 'grpc:start', 'grpc:end', 'http:start', 'http:end', 'admin:start', 'admin:end', 'store']);
    expect(records().find((r) => r.msg === 'close failed')).toMatchObject({ level: 50, closable: 'grpc', err: { message: 'grpc broke' } });
  });

  it('a failing store close rejects the shutdown', async () => {
    const done = shutdownSequence(plan({ store: { close: () => Promise.reject(new Error('store broke')) } }), log)(0);
    const outcome = expect(done).rejects.toThrow('store broke');
    await vi.advanceTimersByTimeAsync(100);
    await outcome;
  });
});

describe('listenOn', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => (s.listening ? s.close(r) : r(undefined)))));
  });
  const server = () => {
    const s = createServer();
    servers.push(s);
    return s;
  };

  it('port 0: resolves with the free port the server is bound to', async () => {
    const s = server();
    const port = await listenOn(s, 0, '127.0.0.1');
    expect(port).toBeGreaterThan(0);
    expect(s.address()).toMatchObject({ address: '127.0.0.1', port });
  });

  it('rejects when the port is taken, and leaves no error listener behind', async () => {
    const port = await listenOn(server(), 0, '127.0.0.1');
    const second = server();
    await expect(listenOn(second, port, '127.0.0.1')).rejects.toMatchObject({ code: 'EADDRINUSE' });
    const ok = server();
    await listenOn(ok, 0, '127.0.0.1');
    expect(ok.listenerCount('error')).toBe(0);
  });
});

describe('closeAll', () => {
  it('gives 0 ms, not a negative time, once the deadline has passed', async () => {
    const c = closable('late');
    await closeAll([c], Date.now() - 5000, log);
    expect(c.given).toEqual([0]);
  });
});
