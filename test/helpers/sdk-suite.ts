/**
 * One end-to-end suite with the official SDKs (`openai`, `@anthropic-ai/sdk`, `@google/genai`) as
 * clients, run through each proxy (Caddy, nginx, the gRPC Envoy harness) in front of a real
 * keygate, a real redis-server and a stub upstream. Each test counts the checks that reach keygate
 * and the requests that reach the upstream.
 */
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import type { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KeyConsole } from '../../src/console/service.ts';
import { readModel } from '../../src/core/model/index.ts';
import { generateKey } from '../../src/core/key-format.ts';
import type { Sidecar } from '../../src/main.ts';
import { schema } from '../../src/schema/redis-schema.ts';
import type { RedisServer } from './redis-server.ts';
import { seedKey, setAccountStatus, type SeededKey } from './seed.ts';
import { startStack, type Stack } from './sidecars.ts';
import { startStubUpstream, UPSTREAM_TEXT, type StubUpstream } from './stub-upstream.ts';

export interface ProxyUnderTest {
  readonly baseUrl: string;
  output?(): string;
  close(): Promise<void>;
}

export interface SdkSuiteTarget {
  readonly name: string;
  /** Whether the proxy sends the request body to keygate (Envoy with_request_body does; Caddy and nginx cannot). */
  readonly sendsBody: boolean;
  start(ports: { readonly grpcPort: number; readonly httpPort: number; readonly upstreamPort: number }): Promise<ProxyUnderTest>;
}

type Family = 'openai' | 'anthropic' | 'google';

interface CallOptions {
  readonly key: string;
  readonly model?: string;
  readonly headers?: Record<string, string>;
  readonly retries?: number;
}

interface Sdk {
  readonly family: Family;
  readonly model: string;
  readonly otherModel: string;
  call(base: string, o: CallOptions): Promise<string>;
  /** Asserts the SDK's own typed error for `status`, carrying our `code`. */
  expectError(err: unknown, status: number, code: string): void;
}

const TYPED: Record<number, { openai: unknown; anthropic: unknown }> = {
  400: { openai: OpenAI.BadRequestError, anthropic: Anthropic.BadRequestError },
  401: { openai: OpenAI.AuthenticationError, anthropic: Anthropic.AuthenticationError },
  // Neither SDK has a class of its own for 402: their base API error, with the status and our code.
  402: { openai: OpenAI.APIError, anthropic: Anthropic.APIError },
  403: { openai: OpenAI.PermissionDeniedError, anthropic: Anthropic.PermissionDeniedError },
  429: { openai: OpenAI.RateLimitError, anthropic: Anthropic.RateLimitError },
  503: { openai: OpenAI.InternalServerError, anthropic: Anthropic.InternalServerError },
};

const SDKS: readonly Sdk[] = [
  {
    family: 'openai',
    model: 'gpt-4o',
    otherModel: 'gpt-5',
    async call(base, o) {
      const client = new OpenAI({ apiKey: o.key, baseURL: `${base}/v1`, maxRetries: o.retries ?? 0, defaultHeaders: o.headers });
      const r = await client.chat.completions.create({ model: o.model ?? this.model, messages: [{ role: 'user', content: 'hi' }] });
      return r.choices[0]?.message.content ?? '';
    },
    expectError(err, status, code) {
      expect(err).toBeInstanceOf(TYPED[status]!.openai as typeof OpenAI.APIError);
      const e = err as InstanceType<typeof OpenAI.APIError>;
      expect(e.status).toBe(status);
      expect(e.code).toBe(code);
      expect(e.message.length).toBeGreaterThan(20);
    },
  },
  {
    family: 'anthropic',
    model: 'claude-sonnet-4-6',
    otherModel: 'claude-haiku-4-5',
    async call(base, o) {
      const client = new Anthropic({ apiKey: o.key, baseURL: base, maxRetries: o.retries ?? 0, defaultHeaders: o.headers });
      const r = await client.messages.create({ model: o.model ?? this.model, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
      const block = r.content[0];
      return block?.type === 'text' ? block.text : '';
    },
    expectError(err, status, code) {
      expect(err).toBeInstanceOf(TYPED[status]!.anthropic as typeof Anthropic.APIError);
      const e = err as InstanceType<typeof Anthropic.APIError>;
      expect(e.status).toBe(status);
      const body = e.error as { type: string; error: { code: string; message: string } };
      expect(body.type).toBe('error');
      expect(body.error.code).toBe(code);
      expect(e.message).toContain(code);
    },
  },
  {
    family: 'google',
    model: 'gemini-2.0-flash',
    otherModel: 'gemini-2.5-pro',
    async call(base, o) {
      const retries = o.retries ?? 0;
      const ai = new GoogleGenAI({
        apiKey: o.key,
        httpOptions: {
          baseUrl: base,
          headers: o.headers,
          ...(retries > 0 ? { retryOptions: { attempts: retries + 1, initialDelay: 0.05, maxDelay: 0.2 } } : {}),
        },
      });
      const r = await ai.models.generateContent({ model: o.model ?? this.model, contents: 'hi' });
      return r.text ?? '';
    },
    expectError(err, status, code) {
      expect(err).toBeInstanceOf(ApiError);
      const e = err as ApiError;
      expect(e.status).toBe(status);
      const body = JSON.parse(e.message) as { error: { code: number; status: string; details: Array<{ reason: string }> } };
      expect(body.error.code).toBe(status);
      expect(body.error.details[0]!.reason).toBe(code);
    },
  },
];

/** Whether the model module reads a model from the path alone (Gemini), with no body. */
const PATH_MODELS =
  readModel({ family: 'google', method: 'POST', path: '/v1beta/models/gemini-2.0-flash:generateContent', contentType: undefined, body: undefined, bodyTruncated: false })
    .kind === 'model';

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the SDK call to fail');
}

export function sdkSuite(target: SdkSuiteTarget): void {
  const s = schema();
  let stack: Stack;
  let redis: RedisServer;
  let db: Redis;
  let sidecar: Sidecar;
  let upstream: StubUpstream;
  let proxy: ProxyUnderTest;
  let checks = 0;
  let valid: SeededKey;
  let restricted: SeededKey;

  beforeAll(async () => {
    stack = await startStack({ redisTimeoutMs: 2000 });
    ({ redis, db, sidecar } = stack);
    sidecar.authorizer.observe(() => void checks++);
    upstream = await startStubUpstream();
    proxy = await target.start({ grpcPort: sidecar.grpcPort, httpPort: sidecar.httpPort, upstreamPort: upstream.port });
    valid = await seedKey(db, s, { account: 'acct-e2e' });
    restricted = await seedKey(db, s, {
      account: 'acct-e2e',
      models: ['gpt-4o', 'openai/gpt-4o', 'anthropic/claude-sonnet-4-6', 'google/gemini-2.0-flash'],
    });
  });

  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
    await stack?.close();
  });

  beforeEach(() => {
    checks = 0;
    upstream.requests.length = 0;
  });

  /** A deny: the SDK's typed error, exactly one attempt, nothing upstream. */
  async function expectDenied(sdk: Sdk, o: CallOptions, status: number, code: string): Promise<unknown> {
    const err = await failure(sdk.call(proxy.baseUrl, o));
    sdk.expectError(err, status, code);
    expect(checks).toBe(1);
    expect(upstream.requests).toHaveLength(0);
    return err;
  }

  describe(`${target.name}: official SDKs end to end`, () => {
    describe.each(SDKS)('$family SDK', (sdk) => {
      it('a valid key reaches the upstream with the identity and without the key', async () => {
        const text = await sdk.call(proxy.baseUrl, { key: valid.key, headers: { 'x-keygate-account-id': 'forged', 'x-keygate-key-id': 'forged' } });
        expect(text).toBe(UPSTREAM_TEXT);
        expect(checks).toBe(1);
        expect(upstream.requests).toHaveLength(1);
        const seen = upstream.requests[0]!.headers;
        expect(seen['x-keygate-account-id']).toBe('acct-e2e');
        expect(seen['x-keygate-key-id']).toBe(valid.id);
        expect(seen.authorization).toBeUndefined();
        expect(seen['x-api-key']).toBeUndefined();
        expect(seen['x-goog-api-key']).toBeUndefined();
        expect(JSON.stringify(upstream.requests[0])).not.toContain(valid.key);
      });

      it('an unknown key → AuthenticationError 401 INVALID_API_KEY, one attempt', async () => {
        await expectDenied(sdk, { key: generateKey(), retries: 2 }, 401, 'INVALID_API_KEY');
      });

      it('a second key header → BadRequestError 400 AMBIGUOUS_API_KEY, one attempt', async () => {
        const extra: Record<string, string> = sdk.family === 'google' ? { authorization: `Bearer ${valid.key}` } : { 'x-goog-api-key': valid.key };
        await expectDenied(sdk, { key: valid.key, headers: extra, retries: 2 }, 400, 'AMBIGUOUS_API_KEY');
      });

      it('an expired key → 401 API_KEY_EXPIRED', async () => {
        const k = await seedKey(db, s, { expiresAt: Date.now() - 60_000 });
        await expectDenied(sdk, { key: k.key, retries: 2 }, 401, 'API_KEY_EXPIRED');
      });

      it('a disabled account → PermissionDeniedError 403 USER_BLOCKED, one attempt', async () => {
        const k = await seedKey(db, s);
        await setAccountStatus(db, s, k.account, 'disabled');
        await expectDenied(sdk, { key: k.key, retries: 2 }, 403, 'USER_BLOCKED');
      });

      it('an empty wallet → 402 INSUFFICIENT_BALANCE, one attempt', async () => {
        const k = await seedKey(db, s);
        const kc = new KeyConsole({ redis: db });
        await kc.creditAccount(k.account, 10, 'seed');
        await kc.recordUsage({ keyId: k.id, amountMicros: 10, requestId: `r-${k.id}` });
        await expectDenied(sdk, { key: k.key, retries: 2 }, 402, 'INSUFFICIENT_BALANCE');
      });

      it('a key at its spend limit → 402 KEY_LIMIT_EXCEEDED, one attempt', async () => {
        const k = await seedKey(db, s);
        const kc = new KeyConsole({ redis: db });
        await kc.setKeyLimit(k.id, { amountMicros: 5, period: 'day' });
        await kc.recordUsage({ keyId: k.id, amountMicros: 5, requestId: `r-${k.id}` });
        await expectDenied(sdk, { key: k.key, retries: 2 }, 402, 'KEY_LIMIT_EXCEEDED');
      });

      it('a model outside the key\'s list → PermissionDeniedError 403 MODEL_NOT_ALLOWED', async () => {
        await expectDenied(sdk, { key: restricted.key, model: sdk.otherModel, retries: 2 }, 403, 'MODEL_NOT_ALLOWED');
      });

      // Where the proxy cannot send the body, only a model in the path can be proved.
      const provable = sdk.family === 'google' ? PATH_MODELS : target.sendsBody;
      it(`a model in the key's list → ${provable ? 'allowed' : 'denied: the model cannot be read'}`, async () => {
        if (provable) {
          expect(await sdk.call(proxy.baseUrl, { key: restricted.key })).toBe(UPSTREAM_TEXT);
          expect(upstream.requests).toHaveLength(1);
          return;
        }
        const err = await expectDenied(sdk, { key: restricted.key, retries: 2 }, 403, 'MODEL_NOT_ALLOWED');
        expect((err as Error).message).toMatch(/The gateway cannot check the model for this route/);
        expect((err as Error).message).not.toMatch(/Use a model the key allows/);
      });

      it('a key at its request rate → RateLimitError 429 RATE_LIMITED, one attempt, nothing upstream', async () => {
        // 1 a minute, not within 3 s of the minute's end (both requests in one window)
        const left = 60_000 - (Date.now() % 60_000);
        if (left < 3000) await new Promise((r) => setTimeout(r, left + 50));
        const k = await seedKey(db, s);
        await new KeyConsole({ redis: db }).updateKey(k.id, { rates: { requests: { count: 1, per: 'minute' } } });
        expect(await sdk.call(proxy.baseUrl, { key: k.key })).toBe(UPSTREAM_TEXT);
        checks = 0;
        upstream.requests.length = 0;
        const err = await expectDenied(sdk, { key: k.key }, 429, 'RATE_LIMITED');
        // the wait to the next minute, for the SDKs that read it
        const headers = (err as { headers?: Headers | Record<string, string> }).headers;
        if (headers !== undefined) {
          const get = (n: string) => (headers instanceof Headers ? headers.get(n) : headers[n]);
          expect(Number(get('retry-after'))).toBeGreaterThanOrEqual(1);
          expect(Number(get('retry-after'))).toBeLessThanOrEqual(60);
          expect(get('x-should-retry')).toBeFalsy();
        }
      });

      if (sdk.family !== 'google') {
        // @google/genai's retry waits its own backoff, not retry-after (test/rate-sdk.test.ts)
        it('a key at 1/s: the SDK waits retry-after and its retry passes in the next window', async () => {
          for (let attempt = 0; ; attempt++) {
            const k = await seedKey(db, s);
            await new KeyConsole({ redis: db }).updateKey(k.id, { rates: { requests: { count: 1, per: 'second' } } });
            await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
            const second = Math.floor(Date.now() / 1000);
            expect(await sdk.call(proxy.baseUrl, { key: k.key })).toBe(UPSTREAM_TEXT);
            checks = 0;
            upstream.requests.length = 0;
            const started = Date.now();
            const inWindow = Math.floor(started / 1000) === second;
            expect(await sdk.call(proxy.baseUrl, { key: k.key, retries: 2 })).toBe(UPSTREAM_TEXT);
            if (!inWindow && checks === 1 && attempt < 3) continue; // the first call ended after its window: again
            expect(checks).toBe(2); // refused, then allowed after the wait
            expect(upstream.requests).toHaveLength(1);
            expect(Date.now() - started).toBeLessThan(5000);
            return;
          }
        });
      }

      it('a client cannot pick the error shape with x-keygate-protocol', async () => {
        const wrong = sdk.family === 'google' ? 'openai' : 'google';
        await expectDenied(sdk, { key: generateKey(), headers: { 'x-keygate-protocol': wrong } }, 401, 'INVALID_API_KEY');
      });
    });
  });

  describe(`${target.name}: key store down`, () => {
    it.each(SDKS)('$family SDK retries a 503 AUTH_UNAVAILABLE and then raises it', async (sdk) => {
      await redis.stop();
      try {
        const err = await failure(sdk.call(proxy.baseUrl, { key: valid.key, retries: 1 }));
        sdk.expectError(err, 503, 'AUTH_UNAVAILABLE');
        expect(checks).toBe(2);
        expect(upstream.requests).toHaveLength(0);
      } finally {
        await redis.start();
        db = redis.client();
      }
    });
  });
}
