/**
 * Invalidation and failover on Sentinel and Cluster deployments of real processes: a revoke on the
 * master (Sentinel) or on each of three masters (Cluster) is seen on the next request, and after a
 * Sentinel failover — the master killed, or a planned `SENTINEL FAILOVER` where the old master stays
 * up as a replica — the sidecar follows the new master, drops its cache and tracks there.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { KeyConsole } from '../src/console/service.ts';
import { KeyField, schema } from '../src/schema/redis-schema.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { startSentinel, type SentinelDeployment } from './helpers/redis-sentinel.ts';
import { seedKey, setAccountStatus, type SeededKey } from './helpers/seed.ts';
import { chatRequest, outcomeOf, startTestSidecar, waitFor, waitTracking, warmAllow, type TestSidecar } from './helpers/sidecars.ts';

const s = schema();

describe('Sentinel', () => {
  let dep: SentinelDeployment;
  let sc: TestSidecar;
  let db: Redis;

  beforeAll(async () => {
    dep = await startSentinel();
    db = dep.master.client();
    sc = await startTestSidecar(dep.url, { redisTimeoutMs: 500 });
    await waitTracking(sc);
  }, 60_000);

  afterAll(async () => {
    await sc?.close();
    await dep?.destroy();
  });

  it('money operations through Sentinel: a wallet emptied and credited is seen on the next request', async () => {
    const kc = new KeyConsole({ redis: dep.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
    try {
      const k = await kc.createKey({ account: 'acct-sentinel', name: 's', limit: { amountMicros: 1_000, period: 'day' } });
      await kc.creditAccount('acct-sentinel', 300, 'seed');
      await warmAllow(sc, k.key);
      await Promise.all(Array.from({ length: 30 }, (_, j) => kc.recordUsage({ keyId: k.id, amountMicros: 10, requestId: `s-${j}` })));
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('INSUFFICIENT_BALANCE');
      await kc.creditAccount('acct-sentinel', 1, 'more');
      expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
      expect((await kc.getKeyView(k.id)).usage.spend.totalMicros).toBe(300);
    } finally {
      await kc.close();
    }
  });

  it('sees a revoke on the next request; after failover follows the new master, drops the cache and tracks there', async () => {
    const [k1, k2, k3] = [await seedKey(db, s), await seedKey(db, s), await seedKey(db, s)];
    await db.wait(1, 5000);
    for (const k of [k1, k2, k3]) await warmAllow(sc, k.key);
    await db.hset(s.keyRecord(k1.digest), KeyField.status, 'revoked');
    expect(outcomeOf(await sc.client.check(chatRequest(k1.key)))).toBe('INVALID_API_KEY');
    await db.wait(1, 5000);

    const flushes = sc.sidecar.store.stats().flushes;
    const failover = dep.failover();
    // While the master is gone: fail closed, nothing from the cache, every answer in bounded time.
    await waitFor(() => !sc.sidecar.store.stats().tracking, 'link loss');
    const t0 = Date.now();
    expect(outcomeOf(await sc.client.check(chatRequest(k2.key)))).toBe('AUTH_UNAVAILABLE');
    expect(Date.now() - t0).toBeLessThan(3000);
    await failover;
    // Right after the switch: a revoke on the new master is seen on the next request.
    db = dep.master.client();
    await db.hset(s.keyRecord(k3.digest), KeyField.status, 'revoked');
    expect(outcomeOf(await sc.client.check(chatRequest(k3.key)))).not.toBe('allow');
    await waitTracking(sc);
    expect(sc.sidecar.store.stats().flushes).toBeGreaterThan(flushes);
    expect(outcomeOf(await sc.client.check(chatRequest(k3.key)))).toBe('INVALID_API_KEY');
    await db.hset(s.keyRecord(k3.digest), KeyField.status, 'active');

    expect(outcomeOf(await sc.client.check(chatRequest(k1.key)))).toBe('INVALID_API_KEY');
    await warmAllow(sc, k2.key);
    await warmAllow(sc, k3.key);
    // Tracking is on the new master: its writes are seen on the next request.
    await db.hset(s.keyRecord(k2.digest), KeyField.status, 'revoked');
    expect(outcomeOf(await sc.client.check(chatRequest(k2.key)))).toBe('INVALID_API_KEY');
    await setAccountStatus(db, s, k3.account, 'disabled');
    expect(outcomeOf(await sc.client.check(chatRequest(k3.key)))).toBe('USER_BLOCKED');
  });
});

describe('Sentinel planned failover (SENTINEL FAILOVER: the old master stays up and becomes a replica)', () => {
  let dep: SentinelDeployment;
  let a: TestSidecar;
  let b: TestSidecar;

  beforeAll(async () => {
    dep = await startSentinel();
    [a, b] = await Promise.all([startTestSidecar(dep.url, { redisTimeoutMs: 500 }), startTestSidecar(dep.url, { redisTimeoutMs: 500 })]);
    await waitTracking(a, b);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await dep?.destroy();
  });

  it('after the switch, a revoke on the new master is seen on the next request at every sidecar', async () => {
    let db = dep.master.client();
    const [k1, k2] = [await seedKey(db, s), await seedKey(db, s)];
    await db.wait(1, 5000);
    for (const sc of [a, b]) {
      await warmAllow(sc, k1.key);
      await warmAllow(sc, k2.key);
    }
    const flushes = [a, b].map((sc) => sc.sidecar.store.stats().flushes);
    await dep.switchover();
    const switched = Date.now();
    db = dep.master.client();
    await db.hset(s.keyRecord(k1.digest), KeyField.status, 'revoked');
    // The next request at each sidecar: no cached allow from the demoted node (503 while reconnecting is fine).
    for (const sc of [a, b]) expect(outcomeOf(await sc.client.check(chatRequest(k1.key)))).not.toBe('allow');
    await waitTracking(a, b);
    console.log(`planned failover: tracking on the new master ${Date.now() - switched} ms after the sentinel switched`);
    for (const [i, sc] of [a, b].entries()) {
      expect(sc.sidecar.store.stats().flushes).toBeGreaterThan(flushes[i]!);
      expect(outcomeOf(await sc.client.check(chatRequest(k1.key)))).toBe('INVALID_API_KEY');
      await warmAllow(sc, k2.key);
    }
    // Tracking is on the new master: its writes are seen on the next request.
    await db.hset(s.keyRecord(k2.digest), KeyField.status, 'revoked');
    for (const sc of [a, b]) expect(outcomeOf(await sc.client.check(chatRequest(k2.key)))).toBe('INVALID_API_KEY');
  });
});

describe('Sentinel test deployment', () => {
  it('a setup that fails halfway stops every process it started', async () => {
    const children = () =>
      execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
        .split('\n')
        .filter((l) => l.includes('redis'));
    const before = children();
    // Master and replica start; the sentinel refuses its configuration and exits.
    const started = startSentinel({ sentinelConfig: ['no-such-directive yes'] }).then(async (d) => {
      await d.destroy(); // (had it started after all)
      return d;
    });
    await expect(started).rejects.toThrow(/sentinel exited/);
    expect(children()).toEqual(before);
  }, 60_000);
});

describe('Cluster (three masters)', () => {
  let dep: ClusterDeployment;
  let a: TestSidecar;
  let b: TestSidecar;

  beforeAll(async () => {
    dep = await startCluster(3);
    [a, b] = await Promise.all([startTestSidecar(dep.url), startTestSidecar(dep.url)]);
    await waitTracking(a, b);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await dep?.destroy();
  });

  it('sees revoke and disable on the next request, for keys on every master', async () => {
    const db = dep.client() as unknown as Redis;
    // Seed until every master holds at least two key records.
    const byNode = new Map<number, SeededKey[]>();
    while (dep.nodes.some((n) => (byNode.get(n.port)?.length ?? 0) < 2)) {
      const k = await seedKey(db, s);
      const node = await dep.nodeOf(s.keyRecord(k.digest));
      byNode.set(node.port, [...(byNode.get(node.port) ?? []), k]);
    }
    for (const node of dep.nodes) {
      const [revoke, disable] = byNode.get(node.port)!;
      for (const sc of [a, b]) {
        await warmAllow(sc, revoke!.key);
        await warmAllow(sc, disable!.key);
      }
      await db.hset(s.keyRecord(revoke!.digest), KeyField.status, 'revoked');
      await setAccountStatus(db, s, disable!.account, 'disabled');
      for (const sc of [a, b]) {
        expect(outcomeOf(await sc.client.check(chatRequest(revoke!.key)))).toBe('INVALID_API_KEY');
        expect(outcomeOf(await sc.client.check(chatRequest(disable!.key)))).toBe('USER_BLOCKED');
      }
    }
    // One tracked link per master, each redirected to a subscriber on its own node.
    for (const node of dep.nodes) {
      const clients = String(await node.client().call('CLIENT', 'LIST'));
      const tracked = clients.split('\n').filter((l) => / flags=\S*t/.test(l));
      expect(tracked.length).toBe(2); // one per sidecar
      for (const l of tracked) {
        const redir = /redir=(\d+)/.exec(l)![1];
        expect(clients).toMatch(new RegExp(`id=${redir} .* name=keygate-inval-`));
      }
    }
  });

  it('money operations run as single-slot scripts: the wallet and limits are seen on the next request', async () => {
    const kc = new KeyConsole({ redis: dep.url, revealKey: `k1:${randomBytes(32).toString('base64')}` });
    try {
      // Accounts on every master (their money records share the slot of `{account}`).
      const seen = new Set<number>();
      for (let i = 0; seen.size < dep.nodes.length && i < 200; i++) {
        const account = `acct-cl-${i}`;
        const node = await dep.nodeOf(s.gate(account));
        if (seen.has(node.port)) continue;
        seen.add(node.port);
        for (const key of [s.wallet(account), s.credits(account), s.keySpend(account, 'key_x'), s.usageLog(account), s.usageRequest(account, 'r')]) {
          expect(await dep.nodeOf(key)).toBe(node);
        }
        const k = await kc.createKey({ account, name: 'cl', limit: { amountMicros: 500, period: 'month' } });
        await kc.creditAccount(account, 500, 'seed');
        for (const sc of [a, b]) await warmAllow(sc, k.key);
        await Promise.all(Array.from({ length: 20 }, (_, j) => kc.recordUsage({ keyId: k.id, amountMicros: 25, requestId: `r-${j}` })));
        for (const sc of [a, b]) expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('INSUFFICIENT_BALANCE');
        await kc.creditAccount(account, 10_000, 'more');
        for (const sc of [a, b]) expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('KEY_LIMIT_EXCEEDED');
        await kc.setKeyLimit(k.id, null);
        for (const sc of [a, b]) expect(outcomeOf(await sc.client.check(chatRequest(k.key)))).toBe('allow');
        expect((await kc.accountInfo(account)).wallet.balance_micros).toBe(10_000);
        // The usage counter has its own connection, which may still be joining the Cluster right
        // after start: a failed flush keeps its counts for the next one, so flush until none is left.
        for (const sc of [a, b]) {
          await waitFor(async () => (await sc.sidecar.usage!.flush(), sc.sidecar.usage!.pendingKeys === 0), 'usage counts written', 5_000);
        }
        const v = await kc.getKeyView(k.id);
        expect(v.usage.spend.totalMicros).toBe(500);
        expect(v.usage.requests.today).toBeGreaterThanOrEqual(6);
      }
      expect(seen.size).toBe(dep.nodes.length);
    } finally {
      await kc.close();
    }
  });

  it('a master going away drops the cache (fail closed for its slots); back, tracking resumes', async () => {
    const db = dep.client() as unknown as Redis;
    const victim = dep.nodes[2]!;
    let onVictim: SeededKey | undefined;
    let elsewhere: SeededKey | undefined;
    while (!onVictim || !elsewhere) {
      const k = await seedKey(db, s);
      const [keyNode, acctNode, gateNode] = [await dep.nodeOf(s.keyRecord(k.digest)), await dep.nodeOf(s.account(k.account)), await dep.nodeOf(s.gate(k.account))];
      if (keyNode === victim) onVictim ??= k;
      else if (acctNode !== victim && gateNode !== victim) elsewhere ??= k;
    }
    await warmAllow(a, elsewhere.key);
    const flushes = a.sidecar.store.stats().flushes;
    await victim.stop();
    // The cache is dropped at once (the victim's link broke). The master set then shrinks to the two
    // live masters, which stay tracked; the victim's slots have no connection and fail closed.
    await waitFor(() => a.sidecar.store.stats().flushes > flushes, 'cache drop');
    const t0 = Date.now();
    expect(outcomeOf(await a.client.check(chatRequest(onVictim.key)))).toBe('AUTH_UNAVAILABLE');
    expect(Date.now() - t0).toBeLessThan(3000);
    // The other masters keep serving.
    await waitFor(async () => outcomeOf(await a.client.check(chatRequest(elsewhere!.key))) === 'allow', 'live masters serving', 10_000);
    await victim.start();
    // Restarted empty (no persistence): the key is gone once its master is back and tracked.
    await waitFor(async () => outcomeOf(await a.client.check(chatRequest(onVictim!.key))) === 'INVALID_API_KEY', 'victim back', 30_000);
    await waitTracking(a, b);
    await warmAllow(a, elsewhere.key);
  });
});
