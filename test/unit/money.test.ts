/**
 * Rows 6 and 7 of the decision without Redis: the gate record's decoding, the money phase, and its
 * place in the pipeline's order (over the in-memory store).
 */
import { describe, expect, it } from 'vitest';
import { moneyDeny } from '../../src/core/money.ts';
import { generateKey } from '../../src/core/key-format.ts';
import { GATE_FOREVER, NO_GATE, parseGate, type Gate } from '../../src/schema/money.ts';
import { authorizer, input, MemoryKeyStore } from './memory-store.ts';
import { FakeClock } from './fake-clock.ts';

const KEY_ID = 'key_0123456789abcdef';
const NOW = 1_795_464_528_608;
const code = (d: { code: string } | null) => (d === null ? 'pass' : d.code);
const gate = (hash: Record<string, string>): Gate => {
  const g = parseGate(hash);
  if (typeof g === 'string') throw new Error(g);
  return g;
};

describe('the gate record', () => {
  it('decodes wallet and limit flags and ignores other fields', () => {
    expect(parseGate({})).toBe(NO_GATE);
    expect(gate({ wallet: 'open', note: 'x' })).toEqual({ wallet: 'open', limits: null });
    const g = gate({ wallet: 'empty', [`limit:${KEY_ID}`]: String(NOW + 1), 'limit:key_bbbbbbbbbbbbbbbb': GATE_FOREVER });
    expect(g.wallet).toBe('empty');
    expect(g.limits?.get(KEY_ID)).toBe(NOW + 1);
    expect(g.limits?.get('key_bbbbbbbbbbbbbbbb')).toBe(Infinity);
  });

  it('is corrupt on a bad wallet value, a bad key id or a bad instant', () => {
    const bad: Record<string, string>[] = [{ wallet: 'closed' }, { wallet: '' }, { 'limit:nope': '1' }, { [`limit:${KEY_ID}`]: '-1' }, { [`limit:${KEY_ID}`]: '1e9' }, { [`limit:${KEY_ID}`]: '' }];
    for (const h of bad) {
      expect(typeof parseGate(h), JSON.stringify(h)).toBe('string');
    }
  });
});

describe('the money phase', () => {
  it('refuses an empty wallet, and no wallet only when wallets are required', () => {
    expect(code(moneyDeny(NO_GATE, KEY_ID, NOW, false))).toBe('pass');
    expect(code(moneyDeny(NO_GATE, KEY_ID, NOW, true))).toBe('INSUFFICIENT_BALANCE');
    expect(code(moneyDeny(gate({ wallet: 'open' }), KEY_ID, NOW, true))).toBe('pass');
    expect(code(moneyDeny(gate({ wallet: 'empty' }), KEY_ID, NOW, false))).toBe('INSUFFICIENT_BALANCE');
  });

  it('refuses a key at its limit until the stored instant (exclusive), only that key', () => {
    const g = gate({ wallet: 'open', [`limit:${KEY_ID}`]: String(NOW) });
    expect(code(moneyDeny(g, KEY_ID, NOW - 1, false))).toBe('KEY_LIMIT_EXCEEDED');
    expect(code(moneyDeny(g, KEY_ID, NOW, false))).toBe('pass');
    expect(code(moneyDeny(g, 'key_otherotherother', NOW - 1, false))).toBe('pass');
    expect(code(moneyDeny(gate({ [`limit:${KEY_ID}`]: GATE_FOREVER }), KEY_ID, Number.MAX_SAFE_INTEGER, false))).toBe('KEY_LIMIT_EXCEEDED');
  });

  it('an empty wallet is reported before a reached limit; a corrupt gate fails closed', () => {
    expect(code(moneyDeny(gate({ wallet: 'empty', [`limit:${KEY_ID}`]: GATE_FOREVER }), KEY_ID, NOW, false))).toBe('INSUFFICIENT_BALANCE');
    expect(code(moneyDeny('corrupt', KEY_ID, NOW, false))).toBe('AUTH_UNAVAILABLE');
  });

  it('sits after the account (row 5) and before the model (row 8) in the pipeline', async () => {
    const KEY = generateKey('kg_');
    const store = new MemoryKeyStore();
    store.putKey(KEY, { id: KEY_ID, account: 'acct', name: 'k', status: 'active', models: ['openai/gpt-4o'], expiresAt: null });
    const check = async (body: string, requireWallet = false) =>
      (await authorizer(store, { requireWallet, clock: new FakeClock(NOW) }).check(input({ 'x-api-key': KEY }, { body }))).decision;
    const other = JSON.stringify({ model: 'gpt-5', messages: [] });
    const allowed = JSON.stringify({ model: 'openai/gpt-4o', messages: [] });
    store.gates.set('acct', { wallet: 'empty', [`limit:${KEY_ID}`]: GATE_FOREVER });
    store.accounts.set('acct', 'disabled');
    expect(await check(other)).toMatchObject({ code: 'USER_BLOCKED' });
    store.accounts.delete('acct');
    expect(await check(other)).toMatchObject({ code: 'INSUFFICIENT_BALANCE', status: 402, keyId: KEY_ID });
    store.gates.set('acct', { wallet: 'open', [`limit:${KEY_ID}`]: GATE_FOREVER });
    expect(await check(other)).toMatchObject({ code: 'KEY_LIMIT_EXCEEDED', status: 402, keyId: KEY_ID });
    store.gates.set('acct', { [`limit:${KEY_ID}`]: String(NOW) }); // ended at this instant
    expect(await check(other)).toMatchObject({ code: 'MODEL_NOT_ALLOWED' });
    expect((await check(allowed)).allow).toBe(true);
    expect(await check(allowed, true)).toMatchObject({ code: 'INSUFFICIENT_BALANCE' });
    store.gates.set('acct', { wallet: 'bogus' });
    expect(await check(allowed)).toMatchObject({ code: 'AUTH_UNAVAILABLE', status: 503 });
    store.gates.delete('acct');
    expect(store.gateLookups).toBeGreaterThan(0);
  });
});
