/**
 * `keygate members …` as a child process (`bin/keygate`) against a real redis-server: add by email
 * or subject, list (text and --json), update, remove, each audited as `cli`; every bad input is one
 * stderr line, a non-zero exit, and Redis unchanged.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyConsole } from '../src/console/service.ts';
import { snapshot } from './helpers/redis-dump.ts';
import { destroyRedis, startRedis, type RedisServer } from './helpers/redis-server.ts';

const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));
let redis: RedisServer;
let db: Redis;

function keygate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH!, HOME: process.env.HOME!, KEYGATE_NODE: process.execPath, REDIS_URL: redis.url };
  return new Promise((resolve) => {
    execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr }));
  });
}

beforeAll(async () => {
  redis = await startRedis();
  db = redis.client();
});
afterAll(async () => {
  await destroyRedis(redis);
});

describe('keygate members', () => {
  it('add, list, update, remove; audited as the command line', async () => {
    const a = `acct-${randomBytes(3).toString('hex')}`;
    const added = await keygate(['members', 'add', a, '--email', 'Ada@Example.com', '--role', 'developer', '--json']);
    expect(added.stderr).toBe('');
    const m = JSON.parse(added.stdout);
    expect(m).toMatchObject({ account: a, email: 'ada@example.com', subject: null, role: 'developer', source: 'manual' });
    expect(m.id).toMatch(/^mem_[0-9A-Za-z]{16}$/);
    const bySub = await keygate(['members', 'add', a, '--subject', 'auth0|42', '--role', 'viewer']);
    expect(bySub.stdout).toMatch(/^Added member mem_\w+ \(subject auth0\|42\) to acct-\w+ as viewer\.\n$/);

    const text = await keygate(['members', 'list', a]);
    expect(text.stdout).toMatch(/ID\s+EMAIL\s+SUBJECT\s+ROLE\s+SOURCE/);
    expect(text.stdout).toContain('ada@example.com');
    const list = JSON.parse((await keygate(['members', 'list', a, '--json'])).stdout);
    expect(list.members.map((x: { role: string }) => x.role)).toEqual(['developer', 'viewer']);

    expect((await keygate(['members', 'update', a, m.id, '--role', 'owner'])).stdout).toBe(`Member ${m.id} (email ada@example.com) of ${a} is now owner.\n`);
    expect((await keygate(['members', 'remove', a, m.id])).stdout).toBe(`Removed member ${m.id} (email ada@example.com) from ${a}.\n`);
    expect(JSON.parse((await keygate(['members', 'list', a, '--json'])).stdout).members).toHaveLength(1);

    const kc = new KeyConsole({ redis: redis.url });
    try {
      const events = await kc.listAudit({ account: a });
      expect(events.map((e) => e.action)).toEqual(['member_remove', 'member_update', 'member_add', 'member_add']);
      for (const e of events) expect(e.actor.type).toBe('cli');
    } finally {
      await kc.close();
    }
  });

  it('bad input: one line on stderr, a non-zero exit, nothing written', async () => {
    const a = `acct-${randomBytes(3).toString('hex')}`;
    const first = await keygate(['members', 'add', a, '--email', 'grace@example.com', '--role', 'owner', '--json']);
    const id = JSON.parse(first.stdout).id;
    const before = await snapshot(db);
    for (const args of [
      ['members', 'add', a, '--role', 'owner'],
      ['members', 'add', a, '--email', 'x@example.com', '--subject', 's', '--role', 'owner'],
      ['members', 'add', a, '--email', 'x@example.com', '--role', 'admin'],
      ['members', 'add', a, '--email', 'not an email', '--role', 'viewer'],
      ['members', 'add', a, '--email', 'grace@example.com', '--role', 'viewer'],
      ['members', 'add', 'bad account!', '--email', 'x@example.com', '--role', 'viewer'],
      ['members', 'update', a, 'mem_0000000000000000', '--role', 'viewer'],
      ['members', 'update', a, id, '--role', 'root'],
      ['members', 'remove', a, 'not-a-member-id'],
    ]) {
      const r = await keygate(args);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stdout, args.join(' ')).toBe('');
      expect(r.stderr.trim().split('\n'), `${args.join(' ')}: ${r.stderr}`).toHaveLength(1);
    }
    expect((await snapshot(db)).values).toEqual(before.values);
  });
});
