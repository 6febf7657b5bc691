/**
 * The official SDKs against a key limited to 5 requests per second, through the gRPC ext_authz
 * harness in front of a real sidecar, Redis and a stub upstream: five calls in one second pass, the
 * sixth gets one 429 RATE_LIMITED and succeeds after the window, attempts counted at keygate. openai and @anthropic-ai/sdk retry a 429 by default and wait
 * `retry-after-ms`/`retry-after`; @google/genai retries only when `httpOptions.retryOptions` is set,
 * and then waits its own backoff (`initialDelay`), not `retry-after`: the case sets it.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { startGrpcProxy, type GrpcProxy } from './helpers/grpc-proxy.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';
import { startStubUpstream, type StubUpstream } from './helpers/stub-upstream.ts';
import { nextSecond } from './helpers/rate-window.ts';

let stack: Stack;
let upstream: StubUpstream;
let proxy: GrpcProxy;
let kc: KeyConsole;
/** Decisions per key id at keygate (the SDK's attempts), with the second each was made in. */
const decisions = new Map<string, { outcome: string; second: number }[]>();
beforeAll(async () => {
  stack = await startStack({ countUsage: false });
  upstream = await startStubUpstream();
  proxy = await startGrpcProxy({
    checkTarget: `127.0.0.1:${stack.sidecar.grpcPort}`,
    upstreamPort: upstream.port,
    withRequestBody: { maxRequestBytes: 1024 * 1024, allowPartialMessage: true },
    routes: [
      { prefix: '/v1/messages', contextExtensions: { protocol: 'anthropic' } },
      { prefix: '/v1/chat/', contextExtensions: { protocol: 'openai' } },
    ],
  });
  kc = new KeyConsole({ redis: stack.redis.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
  stack.sidecar.authorizer.observe((o) => {
    const d = o.decision;
    const id = d.keyId;
    if (id === undefined) return;
    if (!decisions.has(id)) decisions.set(id, []);
    decisions.get(id)!.push({ outcome: d.allow ? 'allow' : d.code, second: Math.floor(Date.now() / 1000) });
  });
}, 60_000);

afterAll(async () => {
  await kc?.close();
  await proxy?.close();
  await upstream?.close();
  await stack?.close();
});

const CALLS: Record<string, (base: string, key: string) => Promise<string>> = {
  openai: async (base, key) => {
    const c = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 2 });
    const r = await c.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
    return r.choices[0]?.message.content ?? '';
  },
  anthropic: async (base, key) => {
    const c = new Anthropic({ apiKey: key, baseURL: base, maxRetries: 2 });
    const r = await c.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    const b = r.content[0];
    return b?.type === 'text' ? b.text : '';
  },
  google: async (base, key) => {
    // Without retryOptions @google/genai does not retry at all; its delay does not read retry-after.
    const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base, retryOptions: { attempts: 3, initialDelay: 1.1, maxDelay: 2 } } });
    const r = await ai.models.generateContent({ model: 'gemini-2.0-flash', contents: 'hi' });
    return r.text ?? '';
  },
};

describe('a key limited to 5/s: the sixth request in a second is a 429 that each SDK retries after the window', () => {
  for (const [family, call] of Object.entries(CALLS)) {
    it(`${family}: five pass, the sixth is refused once, then succeeds; attempts counted`, async () => {
      for (let attempt = 0; ; attempt++) {
        const k = await kc.createKey({ account: `acct-${randomBytes(4).toString('hex')}`, name: family, rates: { requests: { count: 5, per: 'second' } } });
        await nextSecond();
        const texts = await Promise.all(Array.from({ length: 5 }, () => call(proxy.baseUrl, k.key))); // the window's five
        const started = Date.now();
        const sixth = await call(proxy.baseUrl, k.key); // refused once, then retried by the SDK
        const seen = decisions.get(k.id) ?? [];
        // On a slow machine the burst may cross a window (the sixth then passes at once): again.
        if (new Set(seen.slice(0, 6).map((d) => d.second)).size > 1 && attempt < 3) continue;
        for (const t of [...texts, sixth]) expect(t.length).toBeGreaterThan(0);
        expect(seen.map((d) => d.outcome)).toEqual(['allow', 'allow', 'allow', 'allow', 'allow', 'RATE_LIMITED', 'allow']);
        // the retry came in a later window than the refusal (the SDK waited), and soon after it
        expect(seen[6]!.second).toBeGreaterThan(seen[5]!.second);
        expect(Date.now() - started).toBeLessThan(5000);
        return;
      }
    }, 40_000);
  }
});
