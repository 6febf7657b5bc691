/**
 * deploy/prometheus and deploy/grafana against the real thing: `promtool check rules` and
 * `promtool test rules` (the alerts' unit tests, and a mutated threshold they must catch), then a
 * real Prometheus (the Debian package) on a free port and a temp directory, scraping a running
 * sidecar and console, loading the rules and evaluating every expression of the rules and of the
 * dashboard through its HTTP API: each must evaluate, and every metric it names must be among the
 * scraped series. Skipped only when the prometheus or promtool binary is absent (scripts/install
 * installs them).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { findOnPath } from '../src/dev/index.ts';
import { callApi, startTestConsole, type TestConsole } from './helpers/console-api.ts';
import { startPostgres, type PostgresServer } from './helpers/postgres.ts';
import { destroyRedis, freePort, startRedis, type RedisServer } from './helpers/redis-server.ts';
import { chatRequest, startTestSidecar, waitFor, type TestSidecar } from './helpers/sidecars.ts';

type Obj = Record<string, any>;
const promtool = findOnPath('promtool');
const prometheus = findOnPath('prometheus');
const missing = !promtool || !prometheus;
const RULES_DIR = fileURLToPath(new URL('../deploy/prometheus/', import.meta.url));
const RULES = join(RULES_DIR, 'keygate-rules.yaml');
const rules: Obj = parse(readFileSync(RULES, 'utf8'));
const dashboard: Obj = JSON.parse(readFileSync(new URL('../deploy/grafana/keygate.json', import.meta.url), 'utf8'));

const ruleExprs: string[] = rules.groups.flatMap((g: Obj) => g.rules.map((r: Obj) => r.expr as string));
const recorded = new Set<string>(rules.groups.flatMap((g: Obj) => g.rules.filter((r: Obj) => r.record).map((r: Obj) => r.record as string)));
const panelExprs: string[] = dashboard.panels.flatMap((p: Obj) => (p.targets ?? []).map((t: Obj) => t.expr as string));
const variableMetrics: string[] = dashboard.templating.list.filter((v: Obj) => v.type === 'query').map((v: Obj) => /^label_values\((\w+),/.exec(v.query)![1]!);
/** Grafana's variables as a dashboard with "All" selected sends them. */
const concrete = (e: string) => e.replaceAll('$__rate_interval', '1m').replaceAll('$sidecar_job', '.*').replaceAll('$console_job', '.*');
/** The metric names an expression reads: keygate's, the Node.js process ones, and recorded ones. */
const metricNames = (e: string) => [...e.matchAll(/\b(?:keygate|process|nodejs)_[A-Za-z0-9_]+\b/g)].map((m) => m[0]).filter((n) => !/^keygate_[a-z_]+_job$/.test(n));
const recordedNames = (e: string) => [...e.matchAll(/\bkeygate:[A-Za-z0-9_:]+/g)].map((m) => m[0]);

function run(bin: string, args: string[], cwd?: string) {
  const r = spawnSync(bin, args, { cwd, encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

// scripts/install installs prometheus and promtool; in CI their absence is a broken setup, not a skip.
it.runIf(missing && process.env.CI === 'true')('CI has prometheus and promtool (scripts/install puts them there)', () => {
  expect(missing, 'prometheus/promtool not on PATH in CI').toBe(false);
});

describe.skipIf(missing)(`Prometheus rules and Grafana dashboard (${missing ? 'skipped: prometheus/promtool not on PATH; run scripts/install (Debian: apt-get install prometheus)' : 'promtool and a real Prometheus'})`, () => {
  it('promtool check rules accepts the rules', () => {
    const r = run(promtool!, ['check', 'rules', RULES]);
    expect(r.out).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('promtool test rules: every alert fires on its case and stays silent on the others', () => {
    const r = run(promtool!, ['test', 'rules', 'keygate-rules.test.yaml'], RULES_DIR);
    expect(r.out).toContain('SUCCESS');
    expect(r.status).toBe(0);
    // Every alert has a unit test.
    const tests = readFileSync(join(RULES_DIR, 'keygate-rules.test.yaml'), 'utf8');
    for (const g of rules.groups) for (const rule of g.rules) if (rule.alert) expect(tests, rule.alert).toContain(`alertname: ${rule.alert}`);
  });

  it('the unit tests catch a broken threshold (negative test)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-rules-'));
    try {
      copyFileSync(join(RULES_DIR, 'keygate-rules.test.yaml'), join(dir, 'keygate-rules.test.yaml'));
      const text = readFileSync(RULES, 'utf8');
      for (const [from, to] of [
        ['keygate:decision_duration_seconds:p99_5m > 0.01', 'keygate:decision_duration_seconds:p99_5m > 0.1'],
        ['max by (instance) (keygate_ready) == 0\n        for: 2m', 'max by (instance) (keygate_ready) == 0\n        for: 4m'],
        ['connection="invalidation"', 'connection=~"invalidation|usage"'],
        ['reason!~"no-identity|no-response-headers"', 'reason!~"no-identity"'],
        ['(rate(keygate_metering_booking_lag_seconds_bucket[5m]))) > 1', '(rate(keygate_metering_booking_lag_seconds_bucket[5m]))) > 10'],
        ['(increase(keygate_metering_failures_total[5m])) > 0', '(increase(keygate_metering_failures_total[5m])) > 5'],
        ['min_over_time(keygate_metering_pending_bookings[10m]) > 0\n          and ', ''],
        ['keygate:denies_by_code:rate5m{code!="RATE_LIMITED"} > 1', 'keygate:denies_by_code:rate5m > 1'],
        // A failed scrape marks the target's series stale: only a range lookback still sees it was keygate.
        ['last_over_time(keygate_build_info[1d])', 'keygate_build_info'],
        ['last_over_time(keygate_build_info[1d])\n        for: 2m', 'last_over_time(keygate_build_info[1d])\n        for: 5m'],
        ['up == 0 and on (job, instance) last_over_time(keygate_console_process_start_time_seconds[1d])', 'up == 0'],
        ['absent(keygate_build_info)\n        for: 10m', 'absent(keygate_build_info)\n        for: 30m'],
        ['max(keygate_ledger_lag_seconds) > 300', 'max(keygate_ledger_lag_seconds) > 900'],
        ['max(delta(keygate_usage_log_dropped_unacknowledged[15m])) > 0', 'max(delta(keygate_usage_log_dropped_unacknowledged[15m])) > 5'],
      ] as const) {
        expect(text).toContain(from);
        writeFileSync(join(dir, 'keygate-rules.yaml'), text.replace(from, to));
        const r = run(promtool!, ['test', 'rules', 'keygate-rules.test.yaml'], dir);
        expect(r.status, `${to}: ${r.out}`).not.toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 360_000); // twelve promtool runs: seconds idle, far more on a loaded machine

  describe('a real Prometheus scraping a running sidecar and console', () => {
    let redis: RedisServer;
    let pgs: PostgresServer | undefined;
    let sc: TestSidecar;
    let con: TestConsole;
    let prom: ChildProcess | undefined;
    let dir: string;
    let base: string;
    let names: Set<string>;
    let promLog = '';

    const query = async (q: string): Promise<Obj> => {
      const res = await fetch(`${base}/api/v1/query?${new URLSearchParams({ query: q })}`);
      return (await res.json()) as Obj;
    };

    beforeAll(async () => {
      redis = await startRedis();
      sc = await startTestSidecar(redis.url, { metricsAccountLabels: true });
      pgs = await startPostgres(); // the console runs the usage ledger's sink: its metrics are scraped too
      con = await startTestConsole(redis.url, 'acct-ops', { KEYGATE_LEDGER_URL: pgs.url });
      // Some traffic: a deny at the sidecar, answered and refused calls at the console.
      await sc.client.check(chatRequest('kg_not-a-key'));
      await callApi(con.base, 'GET', '/v1/usage', { token: con.admin });
      await callApi(con.base, 'GET', '/v1/usage', { token: null });
      dir = mkdtempSync(join(tmpdir(), 'keygate-prometheus-'));
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      writeFileSync(
        join(dir, 'prometheus.yml'),
        JSON.stringify({
          global: { scrape_interval: '1s', evaluation_interval: '1s' },
          rule_files: [RULES],
          scrape_configs: [
            { job_name: 'keygate-sidecar', static_configs: [{ targets: [`127.0.0.1:${sc.sidecar.adminPort}`] }] },
            { job_name: 'keygate-console', static_configs: [{ targets: [`127.0.0.1:${con.srv.port}`] }] },
          ],
        }),
      );
      prom = spawn(prometheus!, [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      prom.stdout!.on('data', (c: Buffer) => (promLog = (promLog + c.toString()).slice(-4000)));
      prom.stderr!.on('data', (c: Buffer) => (promLog = (promLog + c.toString()).slice(-4000)));
      await waitFor(
        async () => {
          if (prom!.exitCode !== null) throw new Error(`prometheus exited: ${promLog}`);
          const res = await fetch(`${base}/api/v1/label/__name__/values`).catch(() => null);
          if (!res?.ok) return false;
          const got = new Set<string>(((await res.json()) as Obj).data);
          names = got;
          return got.has('keygate_ready') && got.has('keygate_console_requests_total');
        },
        'prometheus scraped both targets',
        60_000,
      );
    }, 120_000);

    afterAll(async () => {
      if (prom && prom.exitCode === null) {
        prom.kill('SIGTERM');
        await new Promise((r) => prom!.once('exit', r));
      }
      await sc?.close();
      await con?.srv.close();
      await pgs?.destroy();
      if (redis) await destroyRedis(redis);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('scrapes both targets up', async () => {
      const targets = ((await (await fetch(`${base}/api/v1/targets`)).json()) as Obj).data.activeTargets as Obj[];
      expect(targets.map((t) => [t.labels.job, t.health]).sort()).toEqual([
        ['keygate-console', 'up'],
        ['keygate-sidecar', 'up'],
      ]);
    });

    it('loads the rules without an evaluation error', async () => {
      await new Promise((r) => setTimeout(r, 1500));
      const groups = ((await (await fetch(`${base}/api/v1/rules`)).json()) as Obj).data.groups as Obj[];
      expect(groups.map((g) => g.name).sort()).toEqual(['keygate.alerts', 'keygate.recording']);
      for (const g of groups) for (const r of g.rules) expect(r.health, `${r.name}: ${r.lastError}`).not.toBe('err');
    });

    it('every expression of the rules and the dashboard evaluates and names only scraped metrics', async () => {
      const exprs = [...new Set([...ruleExprs, ...panelExprs].map(concrete))];
      expect(exprs.length).toBeGreaterThan(25);
      const used = new Set<string>(variableMetrics);
      for (const e of exprs) {
        const r = await query(e);
        expect(r.status, `${e}: ${r.error}`).toBe('success');
        for (const n of metricNames(e)) used.add(n);
        for (const n of recordedNames(e)) expect(recorded.has(n), `${n} (in ${e}) is not a recording rule`).toBe(true);
      }
      // The names scraped by now (series a later scrape brought, e.g. counters made at a first decision, count too).
      const res = await fetch(`${base}/api/v1/label/__name__/values`);
      for (const n of ((await res.json()) as Obj).data as string[]) names.add(n);
      const absent = [...used].filter((n) => !names.has(n));
      expect(absent, `not exported by keygate: ${absent.join(', ')}`).toEqual([]);
      // Sanity: the check is not vacuous.
      expect(used.size).toBeGreaterThan(15);
      expect(names.has('keygate_no_such_metric_total')).toBe(false);
    });

    it('a dashboard query returns keygate\'s numbers (the sidecar is ready, the deny counted)', async () => {
      const ready = await query(concrete(panelExprs.find((e) => e.startsWith('sum(keygate_ready'))!));
      expect(Number(ready.data.result[0].value[1])).toBe(1);
      const denies = await query('sum(keygate_decisions_total{code="API_KEY_REQUIRED"} or keygate_decisions_total{code="INVALID_API_KEY"})');
      expect(Number(denies.data.result[0].value[1])).toBeGreaterThanOrEqual(1);
      // The opt-in per-account counters: the keyless deny under "_none".
      const byAccount = await query('sum(keygate_account_decisions_total{account="_none",result="deny"})');
      expect(Number(byAccount.data.result[0].value[1])).toBeGreaterThanOrEqual(1);
      // The sidecar-gone and console-gone alerts read series both really export: not absent while scraped.
      for (const rule of rules.groups.flatMap((g: Obj) => g.rules).filter((r: Obj) => /^Keygate(Sidecar|Console)(Absent|Down)$/.test(r.alert ?? ''))) {
        const r = await query(rule.expr);
        expect(r.data.result, rule.alert).toEqual([]);
      }
      const absentExprs = ruleExprs.filter((e) => e.startsWith('absent('));
      expect(absentExprs).toHaveLength(2);
      expect((await query(absentExprs[0]!.replace('keygate_', 'keygate_no_such_'))).data.result).toHaveLength(1);
    });
  });
});
