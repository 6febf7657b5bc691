/**
 * The decision pipeline as production runs it (`Authorizer.check`), over an in-memory store: every
 * phase at its boundary, and a property test over random requests, records and store states
 * against an oracle written from the README's decision table.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DENY_CODES, DENY_STATUS, type DenyCode } from '../../src/core/codes.ts';
import { modelAllowed } from '../../src/core/model/index.ts';
import { generateKey } from '../../src/core/key-format.ts';
import { decisionPhases } from '../../src/pipeline/index.ts';
import { authorizer, input, MemoryKeyStore } from './memory-store.ts';
import { FakeClock } from './fake-clock.ts';

const KEY = generateKey('kg_');
const ACCOUNT = 'acct-1';
const ID = 'key_0123456789abcdef';
const chat = (model: string) => JSON.stringify({ model, messages: [] });

function storeWith(o: { models?: string[] | null; expiresAt?: number | null; status?: 'active' | 'revoked' } = {}) {
  const store = new MemoryKeyStore();
  store.putKey(KEY, { id: ID, account: ACCOUNT, name: 'k', status: o.status ?? 'active', models: o.models ?? null, expiresAt: o.expiresAt ?? null });
  return store;
}

/** The same key with one checksum character changed (right prefix, length and alphabet). */
function badChecksum(k: string): string {
  const last = k.at(-1)!;
  return k.slice(0, -1) + (last === 'a' ? 'b' : 'a');
}

describe('credential and format: denied without a store lookup', () => {
  const cases: Array<[string, Record<string, string | string[]>, DenyCode]> = [
    ['no key header', {}, 'API_KEY_REQUIRED'],
    ['two key headers', { authorization: `Bearer ${KEY}`, 'x-api-key': KEY }, 'AMBIGUOUS_API_KEY'],
    ['a non-Bearer scheme', { authorization: `Basic ${KEY}` }, 'INVALID_API_KEY'],
    ['a key one character short', { 'x-api-key': KEY.slice(0, -1) }, 'INVALID_API_KEY'],
    ['a key with a wrong checksum', { 'x-api-key': badChecksum(KEY) }, 'INVALID_API_KEY'],
    ['a key with another prefix', { 'x-api-key': `kx_${KEY.slice(3)}` }, 'INVALID_API_KEY'],
    ['a key outside the alphabet', { 'x-api-key': `${KEY.slice(0, 10)}!${KEY.slice(11)}` }, 'INVALID_API_KEY'],
  ];
  for (const [name, headers, code] of cases) {
    it(`${name} → ${code}, no lookup`, async () => {
      const store = storeWith();
      const out = await authorizer(store).check(input(headers));
      expect(out.decision).toMatchObject({ allow: false, code, status: DENY_STATUS[code] });
      expect(store.lookups).toEqual({ key: 0, account: 0 });
    });
  }

  it('the well-formed key is looked up once (the control for the cases above)', async () => {
    const store = storeWith();
    const out = await authorizer(store).check(input({ 'x-api-key': KEY }));
    expect(out.decision.allow).toBe(true);
    expect(store.lookups).toEqual({ key: 1, account: 1 });
  });
});

describe('expiry takes effect at its exact instant', () => {
  const T = 1_800_000_000_000;
  const at = (now: number) => authorizer(storeWith({ expiresAt: T }), { clock: new FakeClock(now) }).check(input({ 'x-api-key': KEY }));

  it('allowed one millisecond before', async () => {
    expect((await at(T - 1)).decision.allow).toBe(true);
  });
  it('expired at the instant itself', async () => {
    expect((await at(T)).decision).toMatchObject({ allow: false, code: 'API_KEY_EXPIRED', keyId: ID });
  });
  it('expired after', async () => {
    expect((await at(T + 1)).decision).toMatchObject({ allow: false, code: 'API_KEY_EXPIRED' });
  });
});

describe('store, account and model phases', () => {
  const check = (store: MemoryKeyStore, body?: string) => authorizer(store).check(input({ authorization: `Bearer ${KEY}` }, { body }));

  it('unknown, revoked and corrupt records are invalid keys', async () => {
    expect((await check(new MemoryKeyStore())).decision).toMatchObject({ code: 'INVALID_API_KEY' });
    expect((await check(storeWith({ status: 'revoked' }))).decision).toMatchObject({ code: 'INVALID_API_KEY' });
    const corrupt = new MemoryKeyStore();
    corrupt.putRaw(KEY, { v: '99', id: ID, account: ACCOUNT, status: 'active' });
    expect((await check(corrupt)).decision).toMatchObject({ code: 'INVALID_API_KEY' });
  });

  it('a disabled account is USER_BLOCKED; a corrupt account record fails closed (503)', async () => {
    const s = storeWith();
    s.accounts.set(ACCOUNT, 'disabled');
    expect((await check(s)).decision).toMatchObject({ code: 'USER_BLOCKED', status: 403 });
    s.accounts.set(ACCOUNT, 'maybe');
    expect((await check(s)).decision).toMatchObject({ code: 'AUTH_UNAVAILABLE', status: 503 });
    s.accounts.set(ACCOUNT, 'active');
    expect((await check(s)).decision.allow).toBe(true);
  });

  it('a store that cannot answer is AUTH_UNAVAILABLE', async () => {
    const s = storeWith();
    s.down = true;
    expect((await check(s)).decision).toMatchObject({ allow: false, code: 'AUTH_UNAVAILABLE', status: 503 });
  });

  it('a restricted key passes only with an allowed model; an unrestricted key reads the body only for the endpoint rule', async () => {
    const restricted = storeWith({ models: ['openai/gpt-4o'] });
    expect((await check(restricted, chat('openai/gpt-4o'))).decision).toEqual({ allow: true, keyId: ID, accountId: ACCOUNT, model: 'openai/gpt-4o' });
    expect((await check(restricted, chat('openai/gpt-4o-mini'))).decision).toMatchObject({ code: 'MODEL_NOT_ALLOWED' });
    expect((await check(restricted)).decision).toMatchObject({ code: 'MODEL_NOT_ALLOWED' });
    // Chat completions may name provider files: the endpoint rule reads the body of every key, and refuses one it cannot read.
    expect((await check(storeWith(), 'not json at all')).decision).toMatchObject({ allow: false, code: 'USAGE_NOT_GUARANTEED', status: 400 });
    // Embeddings name nothing: an unrestricted key's body is not read there.
    const embed = await authorizer(storeWith()).check(input({ authorization: `Bearer ${KEY}` }, { path: '/v1/embeddings', body: 'not json at all' }));
    expect(embed.decision).toEqual({ allow: true, keyId: ID, accountId: ACCOUNT, model: null });
  });
});

describe('the pipeline over random requests, records and store states', () => {
  const cred = fc.constantFrom('missing', 'ambiguous', 'bad-scheme', 'malformed', 'key');
  const record = fc.oneof(
    fc.constant({ kind: 'absent' } as const),
    fc.constant({ kind: 'revoked' } as const),
    fc.constant({ kind: 'corrupt' } as const),
    fc.record({
      kind: fc.constant('active' as const),
      models: fc.option(fc.constantFrom(['*'], ['openai/gpt-4o'], ['anthropic/*'], ['openai/*', 'google/*']), { nil: null }),
      expiresAt: fc.option(fc.integer({ min: 0, max: 2_000 }), { nil: null }),
    }),
  );
  const account = fc.constantFrom(undefined, 'active', 'disabled', 'weird');
  const model = fc.constantFrom(undefined, 'openai/gpt-4o', 'openai/gpt-4o-mini', 'gpt-4o', 'anthropic/claude-x');
  /** The account's gate: wallet state, and this key's block end (or none). */
  const gate = fc.record({
    wallet: fc.constantFrom(undefined, 'open', 'empty', 'bogus'),
    limitUntil: fc.option(fc.oneof(fc.integer({ min: 0, max: 2_000 }).map(String), fc.constant('never')), { nil: undefined }),
    requireWallet: fc.boolean(),
  });

  /**
   * The README's decision table, in order, written independently of the pipeline's composition (the model
   * rules themselves are `modelAllowed`'s, tested on their own).
   */
  function oracle(c: string, r: any, acct: string | undefined, down: boolean, m: string | undefined, now: number, g: { wallet?: string; limitUntil?: string; requireWallet: boolean }): DenyCode | 'allow' {
    if (c === 'missing') return 'API_KEY_REQUIRED';
    if (c === 'ambiguous') return 'AMBIGUOUS_API_KEY';
    if (c !== 'key') return 'INVALID_API_KEY';
    if (down) return 'AUTH_UNAVAILABLE';
    if (r.kind !== 'active') return 'INVALID_API_KEY';
    if (r.expiresAt !== null && now >= r.expiresAt) return 'API_KEY_EXPIRED';
    if (acct === 'disabled') return 'USER_BLOCKED';
    if (acct === 'weird') return 'AUTH_UNAVAILABLE';
    if (g.wallet === 'bogus') return 'AUTH_UNAVAILABLE';
    if (g.wallet === 'empty' || (g.wallet === undefined && g.requireWallet)) return 'INSUFFICIENT_BALANCE';
    if (g.limitUntil === 'never' || (g.limitUntil !== undefined && now < Number(g.limitUntil))) return 'KEY_LIMIT_EXCEEDED';
    if (r.models === null) return 'allow';
    if (m === undefined) return 'MODEL_NOT_ALLOWED';
    return modelAllowed(r.models, m, 'openai') ? 'allow' : 'MODEL_NOT_ALLOWED';
  }

  it('decides as the decision table says, never throws, and looks nothing up for a malformed key', async () => {
    await fc.assert(
      fc.asyncProperty(cred, record, account, fc.boolean(), model, fc.integer({ min: 0, max: 2_000 }), gate, async (c, r, acct, down, m, now, g) => {
        const store = new MemoryKeyStore();
        if (r.kind === 'active' || r.kind === 'revoked') {
          store.putKey(KEY, { id: ID, account: ACCOUNT, name: 'k', status: r.kind === 'revoked' ? 'revoked' : 'active', models: r.kind === 'active' ? r.models : null, expiresAt: r.kind === 'active' ? r.expiresAt : null });
        } else if (r.kind === 'corrupt') store.putRaw(KEY, { v: '1', id: 'not-an-id', account: ACCOUNT, status: 'active' });
        if (acct !== undefined) store.accounts.set(ACCOUNT, acct);
        const gateHash: Record<string, string> = {};
        if (g.wallet !== undefined) gateHash.wallet = g.wallet;
        if (g.limitUntil !== undefined) gateHash[`limit:${ID}`] = g.limitUntil;
        store.gates.set(ACCOUNT, gateHash);
        store.down = down;
        const headers: Record<string, string> =
          c === 'missing' ? {} : c === 'ambiguous' ? { 'x-api-key': KEY, 'x-goog-api-key': KEY } : c === 'bad-scheme' ? { authorization: `Token ${KEY}` } : c === 'malformed' ? { 'x-api-key': badChecksum(KEY) } : { authorization: `Bearer ${KEY}` };
        const body = m === undefined ? undefined : chat(m);
        const a = authorizer(store, { clock: new FakeClock(now), requireWallet: g.requireWallet });
        const want = oracle(c, r, acct, down, m, now, g);
        // Cold (every record read from the store), then warm (what the first check read is in the cache).
        for (const temperature of ['cold', 'warm']) {
          const reads = store.lookups.key + store.lookups.account + store.gateLookups;
          const out = await a.check(input({ ...headers, 'content-type': 'application/json' }, { body }));
          if (want === 'allow') expect(out.decision.allow, temperature).toBe(true);
          else {
            expect(out.decision, temperature).toMatchObject({ allow: false, code: want, status: DENY_STATUS[want] });
            expect(DENY_CODES).toContain(want);
          }
          if (c !== 'key') expect(store.lookups.key).toBe(0);
          if (temperature === 'warm' && !down) expect(store.lookups.key + store.lookups.account + store.gateLookups, 'a warm check reads nothing from the store').toBe(reads);
          expect(out.family).toBe('openai');
          expect(out.requestId).toBe('req-1');
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('the phases and the cache', () => {
  it('run in the decision order, one named phase per rule', () => {
    expect(decisionPhases().map((p) => p.name)).toEqual(['credential', 'format', 'key', 'expiry', 'account', 'wallet', 'spend-limit', 'endpoint', 'model']);
  });

  it('a warm key is answered from the cache, and a write to its record is seen at the next check', async () => {
    const store = storeWith();
    const a = authorizer(store);
    const check = () => a.check(input({ 'x-api-key': KEY }));
    expect((await check()).decision.allow).toBe(true);
    const cold = { ...store.lookups, gate: store.gateLookups };
    expect(cold).toEqual({ key: 1, account: 1, gate: 1 });
    expect((await check()).decision.allow).toBe(true);
    expect({ ...store.lookups, gate: store.gateLookups }).toEqual(cold);
    store.accounts.set(ACCOUNT, 'disabled'); // invalidates the account record only
    expect((await check()).decision).toMatchObject({ code: 'USER_BLOCKED' });
    expect({ ...store.lookups, gate: store.gateLookups }).toEqual({ key: 1, account: 2, gate: 1 });
    store.putKey(KEY, { id: ID, account: ACCOUNT, name: 'k', status: 'revoked', models: null, expiresAt: null });
    expect((await check()).decision).toMatchObject({ code: 'INVALID_API_KEY' });
    expect(store.lookups.key).toBe(2);
  });

  it('the uncached source decides the same (the control: the cache adds no rule)', async () => {
    const store = new MemoryKeyStore({ cached: false });
    store.putKey(KEY, { id: ID, account: ACCOUNT, name: 'k', status: 'active', models: null, expiresAt: null });
    const a = authorizer(store);
    expect((await a.check(input({ 'x-api-key': KEY }))).decision.allow).toBe(true);
    expect((await a.check(input({ 'x-api-key': KEY }))).decision.allow).toBe(true);
    expect(store.lookups).toEqual({ key: 2, account: 2 });
  });
});
