/** Small clients for the admin port and the Prometheus text it serves. */

export interface AdminResponse {
  readonly status: number;
  readonly type: string;
  readonly body: string;
}

export async function adminGet(port: number, path: string, init: RequestInit = {}): Promise<AdminResponse> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { ...init, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

/** The value of one sample, e.g. `keygate_decisions_total{result="deny",code="INVALID_API_KEY",family="openai"}`. */
export function sample(metricsText: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of metricsText.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** Polls until `fn` returns true (or throws after `timeoutMs`). */
export async function waitFor(what: string, fn: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await fn()) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
