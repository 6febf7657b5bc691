/**
 * A proxy that cannot send the body (Caddy forward_auth, nginx auth_request, Envoy without
 * with_request_body): a restricted key on a route whose model is in the body is refused with a
 * message that says the gateway cannot check the model for this route (not "use another model"),
 * and the operator gets one log line per interval, not one per request.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayProblemLog } from '../src/telemetry/gateway-problem.ts';
import { FakeClock } from './unit/fake-clock.ts';
import { schema } from '../src/schema/redis-schema.ts';
import { json, send } from './helpers/http-client.ts';
import { seedKey, type SeededKey } from './helpers/seed.ts';
import { startStack, type Stack } from './helpers/sidecars.ts';

const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
    done();
  },
});

let stack: Stack;
let restricted: SeededKey;

beforeAll(async () => {
  stack = await startStack({}, pino({ level: 'warn' }, sink));
  restricted = await seedKey(stack.db, schema(), { account: 'acct-nobody', models: ['openai/gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest'] });
});

afterAll(async () => {
  await stack?.close();
});

const asked = (mode: 'nginx' | 'forward', method: string, uri: string, key: string) =>
  send(stack.sidecar.httpPort, {
    path: '/authz',
    headers:
      mode === 'nginx'
        ? { 'x-original-method': method, 'x-original-uri': uri, authorization: `Bearer ${key}` }
        : { 'x-forwarded-method': method, 'x-forwarded-uri': uri, 'x-api-key': key },
  });

describe('restricted key behind a proxy that sends no body', () => {
  it('says plainly that the gateway cannot check the model for this route, and logs it once', async () => {
    const before = lines.filter((l) => l.configProblem === true).length;
    for (const [mode, uri] of [
      ['nginx', '/v1/chat/completions'],
      ['forward', '/v1/messages'],
      ['nginx', '/v1/embeddings'],
    ] as const) {
      const res = await asked(mode, 'POST', uri, restricted.key);
      const body = mode === 'nginx' ? String(res.headers['x-keygate-body']) : res.body;
      expect(res.status, body).toBe(403);
      expect(body).toContain('MODEL_NOT_ALLOWED');
      expect(body).toContain('The gateway cannot check the model for this route');
      expect(body).not.toMatch(/Use a model the key allows/);
    }
    const problems = lines.filter((l) => l.configProblem === true);
    expect(problems.length - before).toBe(1);
    expect(String(problems.at(-1)!.msg)).toMatch(/no request body reaches keygate/);
    expect(JSON.stringify(problems)).not.toContain(restricted.key);
  });

  it('a model outside the list in the path still gets the usual message', async () => {
    const res = await asked('forward', 'POST', '/v1beta/models/gemini-2.5-pro:generateContent', restricted.key);
    expect(res.status).toBe(403);
    expect(json(res).error.message).toMatch(/not among this key's allowed models/);
  });
});

describe('GatewayProblemLog', () => {
  it('logs a problem once per interval, then again with the count it suppressed', () => {
    const got: Record<string, unknown>[] = [];
    const log = pino({ level: 'warn' }, new Writable({ write: (c: Buffer, _e, done) => (got.push(JSON.parse(c.toString('utf8')) as Record<string, unknown>), done()) }));
    const clock = new FakeClock(1_000_000);
    const p = new GatewayProblemLog(log, 60_000, clock);
    for (let i = 0; i < 5; i++) p.note('no body reaches keygate', { path: '/v1/chat/completions' });
    clock.tick(59_999);
    p.note('no body reaches keygate', {});
    p.note('another problem', {});
    clock.tick(1);
    p.note('no body reaches keygate', {});
    expect(got.map((l) => [l.msg, l.suppressedSinceLast])).toEqual([
      ['no body reaches keygate', 0],
      ['another problem', 0],
      ['no body reaches keygate', 5],
    ]);
  });
});
