/**
 * The money side of the console library against a real redis-server: credits, usage records, key
 * limits, exact books under concurrency, idempotency, refusals that change nothing, the gate record
 * written only on threshold crossings, the usage log, and the UTC period arithmetic of the scripts.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis as IORedis, type Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { keyJson } from '../src/console/views.ts';
import { formatAmount, GATE_FOREVER, LUA_PERIODS, MAX_AMOUNT_MICROS, parseAmount, parseGate, periodBounds, type LimitPeriod } from '../src/schema/money.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { PLAIN_NAMES_UNREPORTED } from './helpers/console-api.ts';
import { expectCode, startConsoleOnRedis, type ConsoleOnRedis } from './helpers/key-console.ts';
import { snapshot } from './helpers/redis-dump.ts';
import type { RedisServer } from './helpers/redis-server.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const s = schema();
let env: ConsoleOnRedis;
let redis: RedisServer;
let db: Redis;
let kc: KeyConsole;

beforeAll(async () => {
  env = await startConsoleOnRedis({ revealKey: REVEAL, usageLogMaxEntries: 50 });
  ({ redis, db, kc } = env);
});

afterAll(() => env?.close());

const acct = () => `acct-${randomBytes(4).toString('hex')}`;
const rid = () => `req-${randomBytes(6).toString('hex')}`;

/** Writes to Redis since its start; unchanged = nothing was written. */
async function dirty(): Promise<number> {
  return (await snapshot(db)).dirty;
}

describe('amounts', () => {
  it('parses positive decimals with at most 6 decimals into micro-units, and nothing else', () => {
    expect(parseAmount('12.50')).toBe(12_500_000);
    expect(parseAmount('0.000001')).toBe(1);
    expect(parseAmount('7')).toBe(7_000_000);
    expect(parseAmount('1000000000')).toBe(MAX_AMOUNT_MICROS);
    for (const bad of ['0', '0.0', '-1', '+1', '1e3', '.5', '5.', '1.0000001', '', ' 1', '1,5', '0x10', '1000000000.000001', 'NaN']) {
      expect(parseAmount(bad), bad).toBeNull();
    }
    expect(formatAmount(12_500_000)).toBe('12.5');
    expect(formatAmount(-1)).toBe('-0.000001');
    expect(formatAmount(0)).toBe('0');
  });
});

describe('periods', () => {
  it('the scripts and the library agree on UTC day, Monday week and calendar month bounds', async () => {
    const probe = `${LUA_PERIODS}
local out = {}
for i = 1, #ARGV do
  local s, e = period_bounds(KEYS[1], tonumber(ARGV[i]))
  table.insert(out, string.format('%d', s)); table.insert(out, string.format('%d', e))
end
return out`;
    const instants = [
      Date.UTC(2024, 1, 29, 23, 59, 59, 999), // leap day
      Date.UTC(2024, 11, 31, 12), // year end, a Tuesday
      Date.UTC(2026, 10, 23, 0, 0, 0, 0), // a Monday at midnight
      Date.UTC(2026, 10, 22, 23, 59, 59, 999), // the Sunday before
      Date.UTC(2100, 1, 28, 5), // not a leap year
      Date.UTC(2000, 1, 29, 5), // a leap year
      0,
      ...Array.from({ length: 40 }, (_, i) => 1_700_000_000_000 + i * 7_654_321_987),
    ];
    for (const period of ['day', 'week', 'month'] as LimitPeriod[]) {
      const r = (await db.eval(probe, 1, period, ...instants.map(String))) as string[];
      instants.forEach((t, i) => {
        const b = periodBounds(period, t);
        expect([Number(r[2 * i]), Number(r[2 * i + 1])], `${period} ${new Date(t).toISOString()}`).toEqual([b.start, b.end]);
        expect(t >= b.start && t < b.end).toBe(true);
      });
    }
    expect(new Date(periodBounds('week', Date.UTC(2026, 10, 26)).start).getUTCDay()).toBe(1);
    expect(periodBounds('total', 5)).toEqual({ start: 0, end: Infinity });
  });
});

describe('credits', () => {
  it('creates the wallet on the first credit, adds, and is idempotent on the reference', async () => {
    const a = acct();
    expect(await kc.accountInfo(a)).toEqual({ id: a, status: 'active', wallet: { enforced: false, balance_micros: 0, rule: 'unreported' }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, rates: { requests: null, tokens: null }, rateUse: { requests: null, tokens: null }, bareModels: PLAIN_NAMES_UNREPORTED, billing: 'metered' });
    expect(await kc.creditAccount(a, 2_500_000, 'pay-1')).toMatchObject({ credited: true, balanceMicros: 2_500_000 });
    expect(await kc.creditAccount(a, '1000000', 'pay-2')).toMatchObject({ credited: true, balanceMicros: 3_500_000 });
    const before = await dirty();
    expect(await kc.creditAccount(a, 9_000_000, 'pay-1')).toMatchObject({ credited: false, amountMicros: 2_500_000, balanceMicros: 3_500_000 });
    expect(await dirty()).toBe(before);
    expect(await kc.accountInfo(a)).toEqual({ id: a, status: 'active', wallet: { enforced: true, balance_micros: 3_500_000, rule: 'credited' }, tokens: { today: { input: 0, output: 0 }, month: { input: 0, output: 0 } }, rates: { requests: null, tokens: null }, rateUse: { requests: null, tokens: null }, bareModels: PLAIN_NAMES_UNREPORTED, billing: 'metered' });
    expect(parseGate(await db.hgetall(s.gate(a)))).toEqual({ wallet: 'open', limits: null });
  });

  it('refuses a missing or bad reference, a bad amount and a bad account, writing nothing', async () => {
    const a = acct();
    const before = await dirty();
    await expectCode(kc.creditAccount(a, 1, ''), 'INVALID_INPUT', /reference/);
    await expectCode(kc.creditAccount(a, 1, undefined as unknown as string), 'INVALID_INPUT', /reference/);
    await expectCode(kc.creditAccount(a, 1, 'has space'), 'INVALID_INPUT', /reference/);
    for (const amount of [0, -5, 1.5, Number.NaN, MAX_AMOUNT_MICROS + 1, '12.5', '-1', '1e6']) {
      await expectCode(kc.creditAccount(a, amount as number, 'r'), 'INVALID_INPUT', /amount/);
    }
    await expectCode(kc.creditAccount('bad account!', 1, 'r'), 'INVALID_INPUT', /account id/);
    expect(await dirty()).toBe(before);
  });

  it('an account never credited is enforced when the deployment requires wallets', async () => {
    const strict = new KeyConsole({ redis: db, requireWallet: true });
    expect((await strict.accountInfo(acct())).wallet).toEqual({ enforced: true, balance_micros: 0, rule: 'unreported' });
  });
});

describe('usage records', () => {
  it('debit the wallet, add to the key spend, append to the log; the key view shows them', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'router', limit: { amountMicros: 10_000_000, period: 'month' } });
    await kc.creditAccount(a, 5_000_000, 'p1');
    const r = await kc.recordUsage({ keyId: k.id, amountMicros: 1_250_000, requestId: 'req-1', model: 'openai/gpt-4o', inputTokens: 12, outputTokens: 34 });
    expect(r).toEqual({ booked: true, keyId: k.id, account: a, requestId: 'req-1', amountMicros: 1_250_000, balanceMicros: 3_750_000 });
    const v = keyJson(await kc.getKeyView(k.id));
    expect(v).toMatchObject({
      id: k.id,
      limit: { amount_micros: 10_000_000, period: 'month' },
      spend: { period: 'month', period_micros: 1_250_000, total_micros: 1_250_000 },
      requests: { today: 0, month: 0 },
      last_used_at: null,
    });
    const log = [];
    for await (const e of kc.exportUsage({ since: 0, account: a })) log.push(e);
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ account: a, keyId: k.id, requestId: 'req-1', amountMicros: 1_250_000, model: 'openai/gpt-4o', inputTokens: 12, outputTokens: 34 });
  });

  it('an account without a wallet is not debited (no wallet is created), but the key spend is booked', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'free' });
    expect((await kc.recordUsage({ keyId: k.id, amountMicros: 7, requestId: rid() })).balanceMicros).toBeNull();
    expect(await db.exists(s.wallet(a))).toBe(0);
    expect(await db.exists(s.gate(a))).toBe(0);
    expect((await kc.getKeyView(k.id)).usage.spend.totalMicros).toBe(7);
  });

  it('1,000 records in parallel from several clients leave balance and spend exactly right', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'busy' });
    await kc.creditAccount(a, 1_000_000_000, 'seed');
    const consoles = Array.from({ length: 4 }, () => new KeyConsole({ redis: redis.url, usageLogMaxEntries: 50 }));
    try {
      const amounts = Array.from({ length: 1000 }, (_, i) => 1 + (i % 97) * 13);
      const results = await Promise.all(amounts.map((amountMicros, i) => consoles[i % 4]!.recordUsage({ keyId: k.id, amountMicros, requestId: `bulk-${i}` })));
      expect(results.every((r) => r.booked)).toBe(true);
      const sum = amounts.reduce((x, y) => x + y, 0);
      expect((await kc.accountInfo(a)).wallet.balance_micros).toBe(1_000_000_000 - sum);
      const u = (await kc.getKeyView(k.id)).usage;
      expect(u.spend.totalMicros).toBe(sum);
      expect(u.spend.periodMicros).toBe(sum);
      // Capped: usageLogMaxEntries 50, trimmed by whole stream nodes (at most 100 entries each) beyond it.
      expect(await db.xlen(s.usageLog(a))).toBeGreaterThanOrEqual(50);
      expect(await db.xlen(s.usageLog(a))).toBeLessThanOrEqual(150);
    } finally {
      await Promise.all(consoles.map((c) => c.close()));
    }
  });

  it('the same request id recorded twice, also at the same moment, is booked once', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'retry' });
    await kc.creditAccount(a, 100, 'seed');
    const clients = Array.from({ length: 3 }, () => new KeyConsole({ redis: redis.url }));
    try {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => clients[i % 3]!.recordUsage({ keyId: k.id, amountMicros: 10, requestId: 'same-request' })),
      );
      expect(results.filter((r) => r.booked)).toHaveLength(1);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    const before = await dirty();
    expect((await kc.recordUsage({ keyId: k.id, amountMicros: 10, requestId: 'same-request' })).booked).toBe(false);
    expect(await dirty()).toBe(before);
    expect((await kc.accountInfo(a)).wallet.balance_micros).toBe(90);
    expect((await kc.getKeyView(k.id)).usage.spend.totalMicros).toBe(10);
    expect(await db.xlen(s.usageLog(a))).toBe(1);
  });

  it('refuses an unknown key, a bad amount, a missing request id, writing nothing', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'x' });
    const before = await dirty();
    await expectCode(kc.recordUsage({ keyId: 'key_0000000000000000000000', amountMicros: 1, requestId: rid() }), 'NOT_FOUND');
    await expectCode(kc.recordUsage({ keyId: 'nope', amountMicros: 1, requestId: rid() }), 'INVALID_INPUT', /key id/);
    for (const amountMicros of [0, -1, 0.5, '1.5', 'abc', '', MAX_AMOUNT_MICROS + 1]) {
      await expectCode(kc.recordUsage({ keyId: k.id, amountMicros: amountMicros as number, requestId: rid() }), 'INVALID_INPUT', /amount/);
    }
    await expectCode(kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: '' }), 'INVALID_INPUT', /request id/);
    await expectCode(kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: undefined as unknown as string }), 'INVALID_INPUT', /request id/);
    await expectCode(kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid(), inputTokens: -1 }), 'INVALID_INPUT', /tokens/);
    await expectCode(kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid(), model: 'a b' }), 'INVALID_INPUT', /model/);
    expect(await dirty()).toBe(before);
  });

  it('a key revoked after its request was allowed is still booked', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'gone' });
    await kc.creditAccount(a, 100, 'seed');
    await kc.revokeKey(k.id);
    expect(await kc.recordUsage({ keyId: k.id, amountMicros: 40, requestId: rid() })).toMatchObject({ booked: true, balanceMicros: 60 });
  });
});

describe('the gate record (what the sidecars cache)', () => {
  /** Counts writes to one key: the gate's invalidations as a sidecar would receive them. */
  async function gateWrites(a: string, fn: () => Promise<unknown>): Promise<number> {
    // RESP2: ioredis drops RESP3 invalidation pushes (as the sidecar's tracker does).
    const sub = new IORedis({ port: redis.port, host: '127.0.0.1', protocol: 2 });
    const spy = redis.client();
    try {
      const id = await sub.client('ID');
      await sub.subscribe('__redis__:invalidate');
      await spy.client('TRACKING', 'on', 'REDIRECT', String(id), 'BCAST', 'PREFIX', s.gate(a));
      let n = 0;
      sub.on('messageBuffer', (_ch: Buffer, keys: unknown) => {
        if (Array.isArray(keys) && keys.map(String).includes(s.gate(a))) n++;
      });
      await fn();
      await spy.ping();
      await new Promise((r) => setTimeout(r, 50));
      return n;
    } finally {
      sub.disconnect();
      spy.disconnect();
    }
  }

  it('changes only when the wallet crosses zero, not on every record', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'w' });
    await kc.creditAccount(a, 1_000, 'seed');
    const writes = await gateWrites(a, async () => {
      for (let i = 0; i < 9; i++) await kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: `w-${i}` });
    });
    expect(writes).toBe(0);
    expect(parseGate(await db.hgetall(s.gate(a)))).toMatchObject({ wallet: 'open' });
    const crossing = await gateWrites(a, () => kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: 'w-last' }));
    expect(crossing).toBe(1);
    expect(parseGate(await db.hgetall(s.gate(a)))).toMatchObject({ wallet: 'empty' });
    // Overdraft by requests already allowed: booked, the gate stays as it is.
    expect(await gateWrites(a, () => kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: 'w-over' }))).toBe(0);
    expect((await kc.accountInfo(a)).wallet.balance_micros).toBe(-100);
    // A credit that leaves it at or below zero does not lift it; one that lifts it writes once.
    expect(await gateWrites(a, () => kc.creditAccount(a, 100, 'p-0'))).toBe(0);
    expect(await gateWrites(a, () => kc.creditAccount(a, 1, 'p-1'))).toBe(1);
    expect(parseGate(await db.hgetall(s.gate(a)))).toMatchObject({ wallet: 'open' });
  });

  it('blocks a key at its limit until the period ends; raising or removing the limit lifts it', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'capped', limit: { amountMicros: 300, period: 'day' } });
    const w1 = await gateWrites(a, async () => {
      await kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: 'l-1' });
      await kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: 'l-2' });
    });
    expect(w1).toBe(0);
    expect(await gateWrites(a, () => kc.recordUsage({ keyId: k.id, amountMicros: 100, requestId: 'l-3' }))).toBe(1);
    const g = parseGate(await db.hgetall(s.gate(a)));
    if (typeof g === 'string') throw new Error(g);
    expect(g.limits?.get(k.id)).toBe(periodBounds('day', Date.now()).end);
    expect(await gateWrites(a, () => kc.setKeyLimit(k.id, { amountMicros: 301, period: 'day' }))).toBe(1);
    expect(parseGate(await db.hgetall(s.gate(a)))).toBe(parseGate({}));
    await kc.setKeyLimit(k.id, { amountMicros: 50, period: 'total' });
    expect(await db.hget(s.gate(a), `limit:${k.id}`)).toBe(GATE_FOREVER);
    await kc.setKeyLimit(k.id, null);
    expect(await db.hget(s.gate(a), `limit:${k.id}`)).toBeNull();
    expect((await kc.getKeyView(k.id)).usage).toMatchObject({ limit: null, spend: { period: 'month', periodMicros: 300, totalMicros: 300 } });
  });

  it('a block left from an ended period is removed by the next record, not by a write at midnight', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'old', limit: { amountMicros: 1_000, period: 'day' } });
    await db.hset(s.gate(a), `limit:${k.id}`, String(periodBounds('day', Date.now()).start)); // ended at today's start
    await kc.recordUsage({ keyId: k.id, amountMicros: 1, requestId: rid() });
    expect(await db.hget(s.gate(a), `limit:${k.id}`)).toBeNull();
  });

  it('refuses bad limits and limits of revoked keys, writing nothing', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'l' });
    const before = await dirty();
    await expectCode(kc.setKeyLimit(k.id, { amountMicros: 0, period: 'day' }), 'INVALID_INPUT', /amount/);
    await expectCode(kc.setKeyLimit(k.id, { amountMicros: 5, period: 'year' as LimitPeriod }), 'INVALID_INPUT', /period/);
    await expectCode(kc.createKey({ account: a, name: 'n', limit: { amountMicros: -5, period: 'day' } }), 'INVALID_INPUT', /amount/);
    expect(await dirty()).toBe(before);
    await kc.revokeKey(k.id);
    const afterRevoke = await dirty();
    await expectCode(kc.setKeyLimit(k.id, { amountMicros: 5, period: 'day' }), 'REVOKED');
    expect(await dirty()).toBe(afterRevoke);
  });
});

describe('usage export', () => {
  it('merges the accounts oldest first from --since, and pages', async () => {
    const a = acct();
    const b = acct();
    const ka = await kc.createKey({ account: a, name: 'a' });
    const kb = await kc.createKey({ account: b, name: 'b' });
    const start = Date.now();
    for (let i = 0; i < 6; i++) {
      await kc.recordUsage({ keyId: i % 2 ? kb.id : ka.id, amountMicros: i + 1, requestId: `e-${i}` });
    }
    const got = [];
    for await (const e of kc.exportUsage({ since: start - 5 })) if (e.account === a || e.account === b) got.push(e);
    // Oldest first; entries of two accounts within the same millisecond may come in either order.
    expect(got.map((e) => e.requestId).sort()).toEqual(['e-0', 'e-1', 'e-2', 'e-3', 'e-4', 'e-5']);
    expect(got.map((e) => e.time)).toEqual(got.map((e) => e.time).sort((x, y) => x - y));
    const ofA = got.filter((e) => e.account === a).map((e) => e.requestId);
    expect(ofA).toEqual(['e-0', 'e-2', 'e-4']);
    const future = [];
    for await (const e of kc.exportUsage({ since: Date.now() + 60_000 })) future.push(e);
    expect(future).toEqual([]);
  });
});

describe('through the management layer (CLI and API)', () => {
  it('a credit is audited once (not its replay); a limit change is audited; a roll keeps the limit', async () => {
    const { CLI_ACTOR } = await import('../src/console/management.ts');
    const mc = kc; // the one console service: the library's class, called with an actor
    const a = acct();
    await mc.creditAccount(a, 5_000_000, 'inv-audit', CLI_ACTOR);
    await mc.creditAccount(a, 5_000_000, 'inv-audit', CLI_ACTOR);
    const credits = (await mc.listAudit({ account: a })).filter((e) => e.action === 'credit');
    expect(credits).toHaveLength(1);
    expect(credits[0]).toMatchObject({ actor: { type: 'cli' }, account: a, changes: { amount_micros: 5_000_000, reference: 'inv-audit', balance_micros: 5_000_000 } });
    const k = await mc.createKey({ account: a, name: 'rolled', limit: { amountMicros: 700, period: 'week' } }, CLI_ACTOR);
    await mc.updateKey(k.id, { limit: { amountMicros: 900, period: 'week' } }, CLI_ACTOR);
    const upd = (await mc.listAudit({ account: a })).find((e) => e.action === 'update');
    expect(upd?.changes).toEqual({ limit: { amount_micros: 900, period: 'week' } });
    const rolled = await mc.rollKey(k.id, 0, CLI_ACTOR);
    expect((await mc.getKeyView(rolled.id)).usage.limit).toEqual({ amountMicros: 900, period: 'week' });
  });
});
