/**
 * The console library's key writes on a real three-master Redis Cluster, where a create and a roll
 * run as single-slot steps: the cap of 100 active keys (max accepted, max+1 refused), parallel rolls
 * of one key (exactly one new key), a grace-0 roll at the cap, and a refused roll that leaves nothing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleError } from '../src/console/errors.ts';
import { KeyConsole } from '../src/console/service.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { expectCode } from './helpers/key-console.ts';

let dep: ClusterDeployment;
let kc: KeyConsole;

beforeAll(async () => {
  dep = await startCluster(3);
  kc = new KeyConsole({ redis: dep.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
}, 60_000);

afterAll(async () => {
  await kc?.close();
  await dep?.destroy();
});

const acct = () => `acct-${randomBytes(5).toString('hex')}`;
const active = (a: string) => kc.redis.smembers(kc.schema.accountActiveKeys(a));

describe('Cluster: active-key cap and rolls', () => {
  it('100 active keys are accepted, the 101st refused; a revoke frees one slot', async () => {
    const a = acct();
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await kc.createKey({ account: a, name: `k${i}` })).id);
    expect((await active(a)).length).toBe(100);
    await expectCode(kc.createKey({ account: a, name: 'one too many' }), 'LIMIT');
    expect((await active(a)).length).toBe(100);
    await kc.revokeKey(ids[0]!);
    await kc.createKey({ account: a, name: 'fits again' });
    await expectCode(kc.createKey({ account: a, name: 'full again' }), 'LIMIT');
    // A grace-0 roll at the cap: the old key leaves the set, the new one takes its slot.
    const rolled = await kc.rollKey(ids[1]!, 0);
    const set = await active(a);
    expect(set.length).toBe(100);
    expect(set).not.toContain(ids[1]);
    expect(set).toContain(rolled.id);
    // With a grace both would be active: refused, and the old key is not left claimed.
    await expectCode(kc.rollKey(ids[2]!, 60), 'LIMIT');
    expect(await kc.redis.hget(kc.schema.keyRecord(await kc.redis.get(kc.schema.keyIdIndex(ids[2]!)) as string), 'rolled_to')).toBeNull();
    expect((await active(a)).length).toBe(100);
    await kc.rollKey(ids[2]!, 0); // and it can still be rolled
  }, 60_000);

  it('ten parallel rolls of one key make exactly one new key', async () => {
    const a = acct();
    const k = await kc.createKey({ account: a, name: 'racy' });
    const out = await Promise.allSettled(Array.from({ length: 10 }, () => kc.rollKey(k.id, 60)));
    const won = out.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of out) if (r.status === 'rejected') expect((r.reason as ConsoleError).code).toBe('REVOKED');
    const list = await kc.listKeys(a);
    expect(list.map((x) => x.id).sort()).toEqual([k.id, (won[0] as PromiseFulfilledResult<{ id: string }>).value.id].sort());
    expect((await active(a)).sort()).toEqual(list.map((x) => x.id).sort());
  }, 30_000);
});
