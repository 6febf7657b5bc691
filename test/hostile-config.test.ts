/** Every invalid setting is refused at start with one line naming it; nothing starts. */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ConfigError, ENV, loadConfig, type Config } from '../src/config.ts';

const BAD: { [K in keyof Config]: string[] } = {
  redisUrl: ['http://x', 'redis:/x', 'redis://a b', ''],
  listenHost: [],
  adminHost: [],
  grpcPort: ['-1', '65536', 'abc', '1.5'],
  httpPort: ['70000', 'x'],
  adminPort: ['-5'],
  keyPrefix: ['KG_', 'kg', '_kg_', 'kg$_', 'averyveryverylongprefix_'],
  redisNamespace: ['a:b', 'x'.repeat(40), 'a b'],
  accountHeader: ['X-Upper', 'x-envoy-foo', 'has space', 'host'],
  keyIdHeader: ['bad_header!'],
  stripKeyHeaders: ['maybe', '2'],
  pathPrefixes: ['noslash=openai', '/a=azure', '/a', '=openai'],
  modelEndpoints: ['openai:POST', 'azure:POST:/x', 'openai:FETCH:/x', 'openai:POST:x', 'openai:POST:/v1/models/{model}', 'openai:POST:/a/{model}/{model}'],
  endpoints: ['/nonexistent/keygate-endpoints.yaml'],
  meter: ['maybe'],
  meterForceUsage: ['2'],
  usageLogMax: ['99', 'x', '-1', '1.5'],
  meterMaxStreams: ['0', '-1', 'x', '1.5'],
  meterMaxStreamMs: ['999', 'x'],
  meterFlushMs: ['5', '1001'],
  priceCatalog: ['maybe'],
  bareModelProviders: ['openai', 'azure=openai', 'openai=', 'openai=bad provider', 'openai=a,openai=b', '=openai'],
  errorDomain: ['bad domain', ''],
  redisTimeoutMs: ['0', '5', 'x', '1000000'],
  cacheMaxEntries: ['-1', 'many'],
  serveCachedDuringOutage: ['perhaps'],
  requireWallet: ['sometimes'],
  credentialKey: ['base64:short', 'nokid', 'k1:!!!!', `k1:${Buffer.alloc(32).toString('base64')},k1:${Buffer.alloc(32).toString('base64')}`],
  credentialHeaders: ['openai', 'azure=api-key', 'openai=Bad Header', 'google=host', 'anthropic=x-envoy-x'],
  requireOwnCredential: ['perhaps'],
  countUsage: ['2'],
  storeMaxInflight: ['0', '-3', 'lots'],
  stalenessBoundMs: ['0', '29', '1.5', 'soon', '600000'],
  grpcTransport: ['grpc', 'GRPC-JS', 'http'],
  grpcMaxReceiveBytes: ['10', '1e12'],
  grpcReceiveTimeoutMs: ['0', '99', 'soon', '1000000'],
  grpcMaxConnectionBufferedBytes: ['10', '1e12', '1048576'],
  grpcMaxBufferedBytes: ['10', '1e12', '33554432'],
  httpMaxBodyBytes: ['10', '1e12'],
  drainDelayMs: ['-1'],
  shutdownTimeoutMs: ['5'],
  logLevel: ['verbose', 'INFO'],
  metricsAccountLabels: ['some'],
  metricsMaxAccounts: ['0', '-1', '1000001', 'all'],
  otlpEndpoint: ['collector:4318', 'ftp://collector', 'not a url'],
  otlpTraces: ['jaeger', 'OTLP'],
  otlpMetrics: ['prometheus'],
  otlpServiceName: ['x'.repeat(300)],
  otlpMetricsIntervalMs: ['0', 'soon'],
  traceUnparentedRatio: ['-0.1', '1.5', 'half'],
};

describe('configuration validation', () => {
  const rows = Object.entries(BAD).flatMap(([k, vs]) => vs.filter((v) => v !== '').map((v) => [k, v] as const));
  it.each(rows)('%s = %j is refused with a message naming it', (k, v) => {
    const env = { [ENV[k as keyof Config]]: v };
    let err: unknown;
    try {
      loadConfig({}, env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    expect(msg).toContain(ENV[k as keyof Config]);
    expect(msg).not.toContain('\n');
  });

  it('defaults are valid and ports must differ', () => {
    expect(loadConfig({}, {}).grpcPort).toBe(9001);
    expect(() => loadConfig({}, { KEYGATE_HTTP_PORT: '9001' })).toThrow(/must differ/);
  });

  it('the CLI refuses a bad setting with one stderr line and a non-zero exit', () => {
    const r = spawnSync('bin/keygate', ['serve'], {
      env: { ...process.env, KEYGATE_NODE: process.execPath, KEYGATE_KEY_PREFIX: 'BAD' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('KEYGATE_KEY_PREFIX');
    expect(r.stdout).toBe('');
  });

  it('a Redis password in a bad URL is never echoed', () => {
    for (const url of ['redis://user:s3cretpass@host:notaport', 'http://user:s3cretpass@host', 'redis://:s3cretpass@h/x']) {
      expect(() => loadConfig({}, { REDIS_URL: url })).toThrow(ConfigError);
      try {
        loadConfig({}, { REDIS_URL: url });
      } catch (e) {
        expect((e as Error).message).toContain('REDIS_URL');
        expect((e as Error).message).not.toContain('s3cretpass');
      }
    }
  });
});

describe('KEYGATE_CREDENTIAL_KEY', () => {
  it('a bad credential key is refused without echoing any of it', () => {
    const secretish = 'Zm9vYmFyZm9vYmFyZm9vYmFyZm9vYmFy'; // 24 bytes: the wrong length
    let err: unknown;
    try {
      loadConfig({}, { KEYGATE_CREDENTIAL_KEY: `base64:${secretish}` });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('KEYGATE_CREDENTIAL_KEY');
    expect((err as Error).message).not.toContain(secretish);
  });

  it('a credential header that is an identity header is refused', () => {
    expect(() => loadConfig({}, { KEYGATE_CREDENTIAL_HEADERS: 'openai=x-keygate-account-id' })).toThrow(/KEYGATE_CREDENTIAL_HEADERS/);
    expect(loadConfig({}, { KEYGATE_CREDENTIAL_HEADERS: 'openai=api-key' }).credentialHeaders).toBe('openai=api-key');
  });

  it('a keyring of two keys (a rotation) is accepted', () => {
    const k = (b: number) => Buffer.alloc(32, b).toString('base64');
    expect(loadConfig({}, { KEYGATE_CREDENTIAL_KEY: `new:${k(1)},old:${k(2)}` }).credentialKey).toContain('new:');
  });
});
