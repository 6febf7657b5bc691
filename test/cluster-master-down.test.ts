/**
 * Console writes and Checks on a real three-master Redis Cluster with one master down, each master
 * killed in turn (docs/operations.md, "Redis Cluster with a master down"). The nodes run with
 * `cluster-require-full-coverage no`, so the live masters keep serving their slots. For an account
 * whose own records (and the key's) are all on live masters:
 *   - `keys revoke` succeeds (the record is revoked, a Check refuses the key at once), whatever else
 *     is down: the audit lists (`{mgmt}`), the events records (`{wh}`) are best-effort, and the
 *     parts that could not be written are reported (`unfinished`), never turned into a failure;
 *   - `keys create` succeeds the same way, and its key is allowed by a Check;
 *   - `accounts disable` succeeds the same way, and a Check refuses the account's keys;
 *   - a Check of a key whose records are live is allowed;
 *   - a revoke of a key whose own record is on the dead master fails (STORE_UNAVAILABLE), and no
 *     success is reported.
 * Then the master is started again (its data lost: no persistence here) and the next one is killed.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleError } from '../src/console/errors.ts';
import { CLI_ACTOR } from '../src/console/management.ts';
import { KeyConsole } from '../src/console/service.ts';
import { keyDigest } from '../src/core/key-format.ts';
import { eventsSchema } from '../src/schema/events.ts';
import { managementSchema } from '../src/schema/management.ts';
import { startCluster, type ClusterDeployment } from './helpers/redis-cluster.ts';
import { chatRequest, outcomeOf, startTestSidecar, waitFor, waitTracking, type TestSidecar } from './helpers/sidecars.ts';

const REVEAL = `k1:${randomBytes(32).toString('base64')}`;
const BIN = fileURLToPath(new URL('../bin/keygate', import.meta.url));

function keygate(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH!, HOME: process.env.HOME!, KEYGATE_NODE: process.execPath, REDIS_URL: dep.url, KEYGATE_REVEAL_KEY: REVEAL };
  return new Promise((resolve) => execFile(BIN, args, { env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 99) : 0, stdout, stderr })));
}
let dep: ClusterDeployment;
let kc: KeyConsole;
let sc: TestSidecar;

beforeAll(async () => {
  dep = await startCluster(3, ['--cluster-require-full-coverage', 'no']);
  kc = new KeyConsole({ redis: dep.url, revealKey: REVEAL });
  sc = await startTestSidecar(dep.url);
  await waitTracking(sc); // connected to every master and settled before the first Check
}, 90_000);

afterAll(async () => {
  await sc?.close();
  await kc?.close();
  await dep?.destroy();
});

const s = () => kc.schema;
const acct = () => `md-${randomBytes(5).toString('hex')}`;

/** Index of the master holding `key` (by its port). */
async function masterOf(key: string): Promise<number> {
  const n = await dep.nodeOf(key);
  return dep.nodes.indexOf(n);
}

async function allLive(dead: number, keys: string[]): Promise<boolean> {
  for (const k of keys) if ((await masterOf(k)) === dead) return false;
  return true;
}

/** An account whose own records (account record, key sets, `{account}`-tagged records) are not on `dead`. */
async function liveAccount(dead: number): Promise<string> {
  for (;;) {
    const a = acct();
    if (await allLive(dead, [s().account(a), s().accountKeys(a), s().accountActiveKeys(a), s().gate(a)])) return a;
  }
}

/** A key of `a` whose id index and record are on `dead` (`want` false: not on it). */
async function keyWhere(a: string, dead: number, onDead: boolean): Promise<{ id: string; key: string }> {
  for (let i = 0; i < 50; i++) {
    const k = await kc.createKey({ account: a, name: `k${i}` });
    const recs = [s().keyIdIndex(k.id), s().keyRecord(keyDigest(k.key))];
    if (onDead ? (await masterOf(recs[1]!)) === dead && (await masterOf(recs[0]!)) !== dead : await allLive(dead, recs)) return k;
    await kc.revokeKey(k.id);
  }
  throw new Error('no key with its records where wanted after 50 tries');
}

/**
 * What a write reports unfinished is what it did not write: the audit entry exactly when the
 * `{mgmt}` master is down (and then it is not in the lists after all); the event reported
 * unfinished only when `{wh}` is down, and an event not reported is in the account's stream.
 */
async function expectTruthful(unfinished: readonly string[] | undefined, mgmtDead: boolean, whDead: boolean, a: string, type: string, keyId: string): Promise<void> {
  const u = unfinished ?? [];
  expect(u.includes('audit log'), `${type}: ${u.join(', ')}`).toBe(mgmtDead);
  expect(u.filter((x) => x !== 'audit log' && x !== `${type} event`)).toEqual([]);
  if (!whDead) expect(u).not.toContain(`${type} event`);
  const stream = await kc.redis.xrange(eventsSchema(kc.schema.ns).stream(a), '-', '+');
  const told = stream.some(([, f]) => f.includes(type) && f.some((v) => v.includes(keyId)));
  expect(told, `${type} in the stream`).toBe(!u.includes(`${type} event`));
  if (!mgmtDead) expect((await kc.listAudit({ account: a })).some((e) => e.key_id === keyId)).toBe(true);
}

/** A Check of `key` answers `code` within 10 s (the sidecar's cache told by the live master); the last answer named if not. */
async function refusedWith(key: string, code: string): Promise<void> {
  let last = '';
  await waitFor(async () => (last = outcomeOf(await sc.client.check(chatRequest(key)))) === code, `${code} (last: ${last})`, 10_000).catch((err: Error) => {
    throw new Error(`${err.message}; last answer ${last}`);
  });
}

async function clusterOk(): Promise<void> {
  await waitFor(async () => {
    try {
      const c = dep.nodes[0]!.client();
      const infos = await Promise.all(dep.nodes.map((n) => n.client().cluster('INFO') as Promise<string>));
      c.disconnect();
      return infos.every((i) => i.includes('cluster_state:ok'));
    } catch {
      return false;
    }
  }, 'the cluster ok again', 30_000);
}

describe.each([0, 1, 2])('master %i down', (dead) => {
  it('keys revoke and keys create succeed for live records and report what they could not write; a Check answers; a dead record fails truthfully', async () => {
    const a = await liveAccount(dead);
    const revoked = await keyWhere(a, dead, false);
    const checked = await keyWhere(a, dead, false);
    const lost = await keyWhere(a, dead, true);
    const viaCli = await keyWhere(a, dead, false);
    const b = await liveAccount(dead);
    const ofB = await keyWhere(b, dead, false);
    expect(outcomeOf(await sc.client.check(chatRequest(checked.key)))).toBe('allow');
    const mgmtDead = (await masterOf(managementSchema(kc.schema.ns).audit())) === dead;
    const whDead = (await masterOf(eventsSchema(kc.schema.ns).due())) === dead;
    await dep.nodes[dead]!.stop();
    try {
      const t0 = Date.now();
      const r = await kc.revokeKey(revoked.id, CLI_ACTOR);
      expect(r).toMatchObject({ id: revoked.id, account: a, alreadyRevoked: false });
      await expectTruthful(r.unfinished, mgmtDead, whDead, a, 'key.revoked', revoked.id);
      expect(Date.now() - t0).toBeLessThan(15_000);
      expect((await kc.getKey(revoked.id)).status).toBe('revoked');
      await refusedWith(revoked.key, 'INVALID_API_KEY');

      // the CLI: exit 0, the revoke said on stdout, what was left unfinished on stderr
      const cli = await keygate(['keys', 'revoke', viaCli.id]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toBe(`Revoked key ${viaCli.id}.\n`);
      expect(cli.stderr).toMatch(mgmtDead ? /^keygate: warning: revoked key \S+, but could not write audit log/ : /^(keygate: warning: revoked key \S+, but could not write key\.revoked event .*\n)?$/);
      expect((await kc.getKey(viaCli.id)).status).toBe('revoked');

      const made = await kc.createKey({ account: a, name: 'made while a master is down' }, CLI_ACTOR);
      await expectTruthful(made.unfinished, mgmtDead, whDead, a, 'key.created', made.id);
      expect((await kc.getKey(made.id)).status).toBe('active');

      expect(outcomeOf(await sc.client.check(chatRequest(checked.key)))).toBe('allow');

      // the kill switch: the account record is the write; its audit entry and event follow
      const off = await kc.setAccountStatus(b, 'disabled', CLI_ACTOR);
      expect(off).toMatchObject({ account: b, status: 'disabled', changed: true });
      expect((off.unfinished ?? []).includes('audit log')).toBe(mgmtDead);
      expect((off.unfinished ?? []).filter((x) => x !== 'audit log' && x !== 'account.disabled event')).toEqual([]);
      if (!whDead) expect(off.unfinished ?? []).not.toContain('account.disabled event');
      await refusedWith(ofB.key, 'USER_BLOCKED');

      const failed = await kc.revokeKey(lost.id, CLI_ACTOR).then(
        () => null,
        (err: unknown) => err,
      );
      expect(failed).toBeInstanceOf(Error);
      expect(failed instanceof ConsoleError).toBe(false); // a store fault, not a refusal: STORE_UNAVAILABLE at the API, exit 1 at the CLI
    } finally {
      await dep.nodes[dead]!.start();
      await clusterOk();
    }
  }, 120_000);
});
