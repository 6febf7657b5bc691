/**
 * Accounts' own upstream credentials at the Check (SPEC 18), on the unit tier's in-memory store with
 * the real cache: which accounts cost a lookup (only those whose record lists a credential for the
 * request's provider), decrypt once per record version, a change and a removal seen on the next
 * check, fail closed without the key or with an envelope of another account, the answer's headers
 * on both transports, the envelope's binding and a key rotation.
 */
import { BOOKING_ID_HEX } from '../../src/core/booking-id.ts';
import { describe, expect, it } from 'vitest';
import { allow, type Allow } from '../../src/core/decision.ts';
import { DEFAULT_CREDENTIAL_HEADERS, parseCredentialHeaders, parseCredentialMarker, credentialProblem } from '../../src/core/upstream-credential.ts';
import { generateKey } from '../../src/core/key-format.ts';
import { parseKeyring, envelopeKid } from '../../src/keys/crypto.ts';
import { openCredential, parseCredentialKeyring, sealCredential } from '../../src/keys/credential-crypto.ts';
import { decisionPhases } from '../../src/pipeline/index.ts';
import type { OwnCredentialDeps } from '../../src/pipeline/phases/own-credential.ts';
import { allowResponse, allowParts, checkResponse } from '../../src/transport/envoy/check.ts';
import { CheckAnswers } from '../../src/transport/envoy/services/check-answer.ts';
import { authzResponse } from '../../src/transport/http/authz-response.ts';
import type { ResponseOptions } from '../../src/transport/response-options.ts';
import { authorizer, input, MemoryKeyStore } from './memory-store.ts';

const KEY = generateKey('kg_');
const ACCOUNT = 'acct-own';
const ID = 'key_0123456789abcdef';
const SECRET = 'sk-proj-Own1Credential2Secret3xyz';
const kek = (b: number) => Buffer.alloc(32, b).toString('base64');
const RING = parseCredentialKeyring(`k1:${kek(1)}`);
const OPTS: ResponseOptions = { accountHeader: 'x-keygate-account-id', keyIdHeader: 'x-keygate-key-id', stripKeyHeaders: true, errorDomain: 'keygate' };

function setup(o: { providers?: string; envelopes?: Record<string, string>; deps?: Partial<OwnCredentialDeps> } = {}) {
  const store = new MemoryKeyStore();
  store.putKey(KEY, { id: ID, account: ACCOUNT, name: 'k', status: 'active', models: null, expiresAt: null });
  if (o.providers !== undefined) store.accountCredentials.set(ACCOUNT, o.providers);
  if (o.envelopes !== undefined) store.credentials.set(ACCOUNT, o.envelopes);
  const deps: OwnCredentialDeps = { ring: RING, headers: DEFAULT_CREDENTIAL_HEADERS, ...o.deps };
  const a = authorizer(store, { phases: decisionPhases({ credentials: deps }) });
  const check = (protocol = 'openai', headers: Record<string, string> = { authorization: `Bearer ${KEY}` }, at: { method?: string; path?: string } = {}) => a.check(input(headers, { protocol, ...at }));
  return { store, check };
}

const sealed = (secret = SECRET, account = ACCOUNT, provider = 'openai') => sealCredential(RING, account, provider, secret);

describe('the endpoint rule opens stateful endpoints on the account\'s own credential (SPEC 15, 18)', () => {
  const files = { method: 'GET', path: '/openai/v1/files' };
  it('without one, GET /openai/v1/files is refused; with its own OpenAI credential it is allowed and carries it', async () => {
    expect((await setup().check('openai', undefined, files)).decision).toMatchObject({ allow: false, code: 'ENDPOINT_NOT_ALLOWED', refusal: 'stateful' });
    const d = (await setup({ providers: 'openai', envelopes: { openai: sealed() } }).check('openai', undefined, files)).decision as Allow;
    expect(d).toMatchObject({ allow: true, upstream: { header: 'authorization', value: `Bearer ${SECRET}` } });
  });

  it("an OpenAI credential does not open another provider's stateful endpoints", async () => {
    const { check } = setup({ providers: 'openai', envelopes: { openai: sealed() } });
    const d = (await check('anthropic', { 'x-api-key': KEY }, { method: 'GET', path: '/anthropic/v1/files' })).decision;
    expect(d).toMatchObject({ allow: false, code: 'ENDPOINT_NOT_ALLOWED', refusal: 'stateful' });
  });
});

describe('which checks read a credential', () => {
  it('an account without one: allowed with no credential, and no credential lookup, cold or warm', async () => {
    const { store, check } = setup();
    for (let i = 0; i < 2; i++) {
      const d = (await check()).decision as Allow;
      expect(d.allow).toBe(true);
      expect(d.upstream).toBeUndefined();
    }
    expect(store.credentialLookups).toBe(0);
  });

  it('an account with one for OpenAI: the OpenAI entry carries it; the Anthropic entry neither reads nor carries it', async () => {
    const { store, check } = setup({ providers: 'openai', envelopes: { openai: sealed() } });
    const d = (await check()).decision as Allow;
    expect(d.upstream).toEqual({ header: 'authorization', value: `Bearer ${SECRET}` });
    expect(store.credentialLookups).toBe(1);
    const other = (await check('anthropic', { 'x-api-key': KEY })).decision as Allow;
    expect(other.allow).toBe(true);
    expect(other.upstream).toBeUndefined();
    expect(store.credentialLookups).toBe(1);
  });

  it('warm: the same allow object (opened once per record version), no new lookup; a change and a removal are seen on the next check', async () => {
    const { store, check } = setup({ providers: 'openai', envelopes: { openai: sealed() } });
    const first = (await check()).decision;
    expect((await check()).decision).toBe(first);
    expect(store.credentialLookups).toBe(1);
    store.credentials.set(ACCOUNT, { openai: sealed('sk-proj-Changed4Credential5Secret6') });
    expect(((await check()).decision as Allow).upstream?.value).toBe('Bearer sk-proj-Changed4Credential5Secret6');
    // Removal as the console writes it on Cluster: the record first, then the account's list.
    store.credentials.delete(ACCOUNT);
    expect(((await check()).decision as Allow).upstream).toBeUndefined();
    store.accountCredentials.delete(ACCOUNT);
    expect(((await check()).decision as Allow).upstream).toBeUndefined();
  });

  it('the header is configurable per family: the credential alone (no Bearer) in any header but authorization', async () => {
    const { check } = setup({ providers: 'anthropic,openai', envelopes: { openai: sealed(), anthropic: sealed(SECRET, ACCOUNT, 'anthropic') }, deps: { headers: parseCredentialHeaders('openai=api-key') } });
    expect(((await check()).decision as Allow).upstream).toEqual({ header: 'api-key', value: SECRET });
    expect(((await check('anthropic', { 'x-api-key': KEY })).decision as Allow).upstream).toEqual({ header: 'x-api-key', value: SECRET });
  });
});

describe('fail closed', () => {
  it('a sidecar without KEYGATE_CREDENTIAL_KEY refuses an account that has one (503), naming the problem for the operator only', async () => {
    const { check } = setup({ providers: 'openai', envelopes: { openai: sealed() }, deps: { ring: null } });
    const d = (await check()).decision;
    expect(d).toMatchObject({ allow: false, code: 'AUTH_UNAVAILABLE', status: 503, keyId: ID });
    expect(!d.allow && d.gatewayProblem).toContain('KEYGATE_CREDENTIAL_KEY');
    expect(JSON.stringify(d)).not.toContain(SECRET);
  });

  it("another account's envelope copied onto this account does not open (503), nor one sealed for another provider", async () => {
    for (const env of [sealed(SECRET, 'acct-other'), sealed(SECRET, ACCOUNT, 'anthropic')]) {
      const { check } = setup({ providers: 'openai', envelopes: { openai: env } });
      const d = (await check()).decision;
      expect(d).toMatchObject({ allow: false, code: 'AUTH_UNAVAILABLE' });
      expect(!d.allow && d.gatewayProblem).toContain('cannot be opened');
      expect(JSON.stringify(d)).not.toContain(SECRET);
    }
  });

  it('an account record whose credentials field names no provider is corrupt (503)', async () => {
    const { check } = setup({ providers: 'openai,azure' });
    expect((await check()).decision).toMatchObject({ allow: false, code: 'AUTH_UNAVAILABLE' });
    expect(parseCredentialMarker('openai,azure')).toBe('corrupt');
    expect(parseCredentialMarker('google,openai')).toBe(5);
    expect(parseCredentialMarker(null)).toBe(0);
  });
});

describe('KEYGATE_REQUIRE_OWN_CREDENTIAL', () => {
  it('refuses an account without one for the provider (403 ENDPOINT_NOT_ALLOWED, saying so), after the money rules; an account with one passes', async () => {
    expect(decisionPhases({ credentials: { ring: RING, headers: DEFAULT_CREDENTIAL_HEADERS, requireOwn: true } }).map((p) => p.name)).toEqual([
      'credential', 'format', 'key', 'expiry', 'account', 'own-credential', 'wallet', 'spend-limit', 'require-own-credential', 'endpoint', 'model',
    ]);
    const without = setup({ deps: { requireOwn: true } });
    const d = (await without.check()).decision;
    expect(d).toMatchObject({ allow: false, code: 'ENDPOINT_NOT_ALLOWED', status: 403, keyId: ID });
    expect(!d.allow && d.message).toMatch(/own openai credential/);
    const withOne = setup({ providers: 'openai', envelopes: { openai: sealed() }, deps: { requireOwn: true } });
    expect((await withOne.check()).decision.allow).toBe(true);
    // Listed on the account but gone from the record (a removal under way): none, so refused.
    const listedOnly = setup({ providers: 'openai', deps: { requireOwn: true } });
    expect((await listedOnly.check()).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED' });
    // Its own credential is per provider: the Anthropic entry is refused.
    expect((await withOne.check('anthropic', { 'x-api-key': KEY })).decision).toMatchObject({ code: 'ENDPOINT_NOT_ALLOWED' });
  });
});

describe('the answer', () => {
  const grant = { id: ID, account: ACCOUNT, models: null, expiresAt: null };
  const up = Object.freeze({ header: 'authorization', value: `Bearer ${SECRET}` });

  it('gRPC: the credential set with OVERWRITE (append false), and its header not among the removed ones (Envoy removes after it sets)', () => {
    const r = allowResponse(allowParts(allow(grant, null, null, up)), OPTS);
    expect(r.ok_response!.headers.at(-1)).toEqual({ header: { key: 'authorization', value: `Bearer ${SECRET}` }, append: { value: false } });
    expect(r.ok_response!.headers_to_remove).toEqual(['x-api-key', 'x-goog-api-key']);
    expect(JSON.stringify(r.dynamic_metadata)).not.toContain(SECRET);
    const plain = checkResponse({ decision: allow(grant, null), family: 'openai', requestId: 'r' }, OPTS);
    expect(plain.ok_response!.headers_to_remove).toEqual(['authorization', 'x-api-key', 'x-goog-api-key']);
    expect(JSON.stringify(plain)).not.toContain(SECRET);
  });

  it('gRPC bytes: kept by the allow only (one object per credential version and grant), never under the shared parts key', () => {
    const answers = new CheckAnswers(OPTS);
    const a = allow(grant, null, null, up);
    expect(allow(grant, null, null, up)).toBe(a);
    const f = answers.frame({ decision: a, family: 'openai', requestId: 'r' });
    // Each allow is a fresh copy of the kept bytes with its own booking id in the last BOOKING_ID_HEX bytes.
    const f2 = answers.frame({ decision: a, family: 'openai', requestId: 'r' });
    expect(f2).not.toBe(f);
    expect(f2.subarray(0, f2.length - BOOKING_ID_HEX)).toEqual(f.subarray(0, f.length - BOOKING_ID_HEX));
    expect(f2.subarray(f2.length - BOOKING_ID_HEX)).not.toEqual(f.subarray(f.length - BOOKING_ID_HEX));
    expect(f.includes(Buffer.from(SECRET))).toBe(true);
    // The same key's allow without the credential (removed) does not get those bytes.
    const plain = answers.frame({ decision: allow(grant, null), family: 'openai', requestId: 'r' });
    expect(plain.includes(Buffer.from(SECRET))).toBe(false);
    // A rated allow with the credential: built each time, carrying it.
    const rated = allow(grant, null, { headers: [['x-ratelimit-remaining-requests', '4']], limit: null }, up);
    expect(answers.frame({ decision: rated, family: 'openai', requestId: 'r' }).includes(Buffer.from(SECRET))).toBe(true);
  });

  it('HTTP authz: the credential header on the 200, and not in x-envoy-auth-headers-to-remove', () => {
    const r = authzResponse({ decision: allow(grant, null, null, Object.freeze({ header: 'x-api-key', value: SECRET })), family: 'anthropic', requestId: 'r' }, 'envoy', OPTS);
    const h = Object.fromEntries(r.headers);
    expect(h['x-api-key']).toBe(SECRET);
    expect(h['x-envoy-auth-headers-to-remove']).toBe('authorization,x-goog-api-key');
  });
});

describe('the envelope', () => {
  it('opens only for its account and provider; the kid is on it; a rotated ring (new first, old kept) opens old envelopes and seals with the new', () => {
    const env = sealed();
    expect(env).not.toContain(SECRET);
    expect(envelopeKid(env)).toBe('k1');
    expect(openCredential(RING, ACCOUNT, 'openai', env)).toBe(SECRET);
    expect(() => openCredential(RING, 'acct-other', 'openai', env)).toThrow(/does not decrypt/);
    expect(() => openCredential(RING, ACCOUNT, 'google', env)).toThrow(/does not decrypt/);
    const rotated = parseCredentialKeyring(`k2:${kek(2)},k1:${kek(1)}`);
    expect(openCredential(rotated, ACCOUNT, 'openai', env)).toBe(SECRET);
    expect(envelopeKid(sealCredential(rotated, ACCOUNT, 'openai', SECRET))).toBe('k2');
    expect(() => openCredential(parseCredentialKeyring(`k2:${kek(2)}`), ACCOUNT, 'openai', env)).toThrow(/k1.*KEYGATE_CREDENTIAL_KEY does not hold/);
    // The reveal keyring's envelope (bound to a key id) is not a credential envelope, under the same KEK.
    expect(() => openCredential(parseKeyring(`k1:${kek(1)}`), ACCOUNT, 'openai', sealCredential(RING, ACCOUNT, 'anthropic', SECRET))).toThrow();
  });

  it('what a credential may be: a header value (visible ASCII, no comma), 8-4096 characters; the message never echoes it', () => {
    expect(credentialProblem(SECRET)).toBeNull();
    for (const bad of ['short', `sk-${'x'.repeat(4100)}`, 'sk-has space-1234', 'sk-has,comma-1234', 'sk-line\nbreak-1234', 'sk-ünïcode-1234']) {
      const p = credentialProblem(bad);
      expect(p, bad).not.toBeNull();
      expect(p).not.toContain(bad.slice(0, 8));
    }
  });
});
