/** In-process sidecars for store tests: start, wait for cache tracking, client per sidecar. */
import { loadConfig, type Config } from '../../src/config.ts';
import { startSidecar, type Sidecar } from '../../src/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { EnvoyClient, type CheckResponseMsg } from './envoy-client.ts';

export interface TestSidecar {
  readonly sidecar: Sidecar;
  readonly client: EnvoyClient;
  close(): Promise<void>;
}

export async function startTestSidecar(redisUrl: string, extra: Partial<Record<keyof Config, unknown>> = {}): Promise<TestSidecar> {
  const sidecar = await startSidecar(
    loadConfig({ redisUrl, grpcPort: 0, httpPort: 0, adminPort: 0, redisTimeoutMs: 1000, shutdownTimeoutMs: 2000, drainDelayMs: 0, ...extra }, {}),
    createLogger(process.env.KEYGATE_TEST_LOG ?? 'silent'),
  );
  const client = new EnvoyClient(`127.0.0.1:${sidecar.grpcPort}`);
  return {
    sidecar,
    client,
    async close() {
      client.close();
      await sidecar.close();
    },
  };
}

/** Polls `cond` until true; throws with `what` after `timeoutMs`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const waitTracking = (...sc: TestSidecar[]) =>
  waitFor(() => sc.every((x) => x.sidecar.store.stats().tracking), 'cache tracking on every sidecar');

/** `'allow'` or the deny code. */
export function outcomeOf(res: CheckResponseMsg): string {
  if (res.ok_response && res.status?.code === 0) return 'allow';
  const body = JSON.parse(res.denied_response?.body ?? '{}');
  return body?.error?.code ?? `status ${res.denied_response?.status?.code}`;
}

export const chatRequest = (key: string, model?: string) => ({
  path: '/v1/chat/completions',
  headers: { 'x-api-key': key, 'content-type': 'application/json' },
  ...(model ? { body: JSON.stringify({ model, messages: [] }) } : {}),
});
