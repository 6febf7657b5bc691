/**
 * At least once across a real `keygate console` killed in the middle of a delivery: the console runs
 * as a child process (`bin/keygate console`) with an all-accounts endpoint on a loopback receiver;
 * a burst of events on three accounts (credits, key creations, usage records crossing a key's
 * thresholds) is delivered while the receiver holds one delivery open without answering; the console
 * is SIGKILLed then, more events are written while no console runs, and a new console on the same
 * Redis delivers the rest. Every event is answered 2xx at least once, in order per account (no event
 * is sent before the ones before it were answered), duplicates carry the same event id and body, and
 * every delivery's signature verifies with the docs' own snippet.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI_ACTOR } from '../src/console/management.ts';
import { KeyConsole } from '../src/console/service.ts';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { until } from './helpers/until.ts';
import { startReceiver, verifyDocs, type Received, type Receiver } from './helpers/webhook-receiver.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
const REVEAL = `base64:${randomBytes(32).toString('base64')}`;
const run = promisify(execFile);

let redis: RedisServer | undefined;
let kc: KeyConsole | undefined;
let r: Receiver | undefined;
const children: ChildProcess[] = [];

const env = () => ({
  PATH: process.env.PATH!,
  HOME: process.env.HOME ?? '/',
  KEYGATE_NODE: process.execPath,
  REDIS_URL: redis!.url,
  KEYGATE_REVEAL_KEY: REVEAL,
  KEYGATE_CONSOLE_HOST: '127.0.0.1',
  KEYGATE_DRAIN_DELAY_MS: '0',
  KEYGATE_WEBHOOK_ALLOW_PRIVATE: 'true', // the receiver is on loopback
  KEYGATE_WEBHOOK_TIMEOUT_MS: '60000', // the held delivery is cut by the kill, not by a timeout
  KEYGATE_LOG_LEVEL: 'warn',
});

/** `keygate console` as a child process, ready (its /readyz answers). */
async function startConsole(): Promise<{ proc: ChildProcess; output: () => string }> {
  const port = await freePort();
  const proc = spawn(BIN, ['console', '--port', String(port)], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let out = '';
  for (const s of [proc.stdout!, proc.stderr!]) s.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  await until(() => `the console ready\n${out}`, () => fetch(`http://127.0.0.1:${port}/readyz`).then((x) => x.ok, () => false), 30_000);
  return { proc, output: () => out };
}

async function kill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((x) => proc.once('exit', () => x()));
  proc.kill('SIGKILL');
  await exited;
}

beforeAll(async () => {
  redis = await startRedis();
  kc = new KeyConsole({ redis: redis.url, revealKey: REVEAL });
  r = await startReceiver();
}, 30_000);

afterAll(async () => {
  for (const c of children) await kill(c);
  await r?.close();
  await kc?.close();
  if (redis) await destroyRedis(redis);
});

/** What an event is, in the test's own words: its type and what tells it apart within its account. */
const label = (e: Received['event']) => `${e.type}:${e.data.reference ?? e.data.name ?? e.data.threshold}`;

it('a console SIGKILLed while a delivery is held open: a new console delivers every event at least once, in order per account, signed', async () => {
  const made = await run(BIN, ['webhooks', 'create', '--url', r!.url, '--all-accounts', '--events', 'wallet.credited,key.created,key.limit.threshold', '--json'], { env: env() });
  const { secret } = JSON.parse(made.stdout) as { secret: string };
  // Each step writes one event per account, told apart by its label; a key's limit of 1.000000 a day
  // has its default thresholds 50, 80 and 100 % crossed by usage records.
  type Step = [string, (a: string) => Promise<unknown>];
  const keys = new Map<string, string>();
  const steps: Step[] = [
    ['wallet.credited:c1', (a) => kc!.creditAccount(a, 1_000_000, 'c1', CLI_ACTOR)],
    ['key.created:k1', async (a) => keys.set(a, (await kc!.createKey({ account: a, name: 'k1', limit: { amountMicros: 1_000_000, period: 'day' } }, CLI_ACTOR)).id)],
    ['wallet.credited:c2', (a) => kc!.creditAccount(a, 1_000_000, 'c2', CLI_ACTOR)],
    ['key.limit.threshold:50', (a) => kc!.recordUsage({ keyId: keys.get(a)!, amountMicros: 500_000, requestId: `${a}-r1` })],
    ['wallet.credited:c3', (a) => kc!.creditAccount(a, 1_000_000, 'c3', CLI_ACTOR)],
    ['key.limit.threshold:80', (a) => kc!.recordUsage({ keyId: keys.get(a)!, amountMicros: 300_000, requestId: `${a}-r2` })],
  ];
  const afterKill: Step[] = [
    ['wallet.credited:c4', (a) => kc!.creditAccount(a, 1_000_000, 'c4', CLI_ACTOR)],
    ['key.limit.threshold:100', (a) => kc!.recordUsage({ keyId: keys.get(a)!, amountMicros: 200_000, requestId: `${a}-r3` })],
    ['key.created:k2', (a) => kc!.createKey({ account: a, name: 'k2' }, CLI_ACTOR)],
  ];
  const order = [...steps, ...afterKill].map(([l]) => l);
  const accounts = [0, 1, 2].map((i) => `kill${i}-${randomBytes(3).toString('hex')}`);
  const [held] = accounts;

  // The receiver holds the first delivery of the held account's second credit open; every other
  // request is answered 200. `answered` is what the receiver acknowledged, in the order it did.
  const answered: Received[] = [];
  let heldRequest: Received | undefined;
  const sentEarly: string[] = [];
  r!.respond = (x) => {
    const mine = x.event.account!;
    // At least once, in order: an event is sent only when every earlier event of its account was answered.
    const before = order.slice(0, Math.max(0, order.indexOf(label(x.event))));
    const acked = new Set(answered.filter((a) => a.event.account === mine).map((a) => label(a.event)));
    for (const b of before) if (!acked.has(b)) sentEarly.push(`${label(x.event)} of ${mine} before ${b} was answered`);
    if (heldRequest === undefined && mine === held && label(x.event) === 'wallet.credited:c2') {
      heldRequest = x;
      return 'hang';
    }
    answered.push(x);
    return 200;
  };

  const burst = async (list: Step[]) => {
    for (const [, step] of list) for (const a of accounts) await step(a);
  };

  const first = await startConsole();
  await burst(steps);
  await until('the held delivery', () => heldRequest);
  // Mid-delivery: the held request is unanswered; the other accounts go on meanwhile.
  await until('the other accounts delivered', () => accounts.slice(1).every((a) => answered.filter((x) => x.event.account === a).length === steps.length));
  expect(answered.filter((x) => x.event.account === held).map((x) => label(x.event))).toEqual(['wallet.credited:c1', 'key.created:k1']);
  await kill(first.proc);
  expect(first.proc.signalCode).toBe('SIGKILL');
  await until('the held connection closed by the kill', () => r!.inFlight.get(heldRequest!.event.id) === 0);

  await burst(afterKill); // written while no console runs
  const second = await startConsole();
  // The held pair's lease (30 s) must lapse before the new console takes it over.
  const delivered = (a: string) => [...new Set(answered.filter((x) => x.event.account === a).map((x) => label(x.event)))];
  await until(
    () => `every event answered: ${JSON.stringify(accounts.map(delivered))}\n${second.output()}`,
    () => accounts.every((a) => delivered(a).length === order.length),
    60_000,
  );
  await new Promise((x) => setTimeout(x, 500)); // nothing more comes

  for (const a of accounts) expect(delivered(a), a).toEqual(order);
  expect(sentEarly).toEqual([]);
  // The held event came again, the same event: same id, same body.
  const again = r!.received.filter((x) => x.event.id === heldRequest!.event.id);
  expect(again.length).toBeGreaterThanOrEqual(2);
  for (const x of again) expect(x.body).toBe(heldRequest!.body);
  // Duplicates are the same event by id, and one id is one event.
  const byId = new Map<string, string>();
  for (const x of r!.received) {
    expect(x.headers['keygate-event-id']).toBe(x.event.id);
    expect(byId.get(x.event.id) ?? x.body).toBe(x.body);
    byId.set(x.event.id, x.body);
    expect(verifyDocs(secret, x.body, String(x.headers['keygate-signature'])), `signature of ${label(x.event)}`).toBe(true);
  }
  expect(byId.size).toBe(accounts.length * (steps.length + afterKill.length));
  await kill(second.proc);
}, 150_000);
