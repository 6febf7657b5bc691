/**
 * The page's client for the management API. It authenticates with the session cookie (set by
 * POST /session, HttpOnly: the page never sees it) and sends the session's CSRF token in a header
 * on every change. No key or token ever goes into a URL, storage or the console log.
 */

export interface Limit {
  amount_micros: number;
  period: 'day' | 'week' | 'month' | 'total';
}

export interface Key {
  id: string;
  name: string;
  account: string;
  status: 'active' | 'revoked';
  hint: string;
  models: string[] | null;
  expires_at: string | null;
  limit: Limit | null;
  created_at: string;
  updated_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
  /** Set on a key that was rolled: the id of the key that replaced it (it is not rolled again). */
  rolled_to?: string | null;
  rolled_from?: string | null;
  requests?: { today: number; month: number };
  spend?: { period_micros: number; total_micros: number };
}

export interface Account {
  id: string;
  status: 'active' | 'disabled';
  wallet?: { enforced: boolean; balance_micros: number };
}

export interface Session {
  signed_in: true;
  account: string;
  token_name?: string;
  csrf_token: string;
  expires_at: string;
}

export interface Secret {
  id: string;
  key: string;
}

export interface NewKeyInput {
  name: string;
  models?: string[];
  expires_at?: string;
  limit?: Limit;
}

export interface KeyPatch {
  name?: string;
  models?: string[] | null;
  expires_at?: string | null;
  limit?: Limit | null;
}

/** An error answer of the API (`{"error": {"code", "message"}}`) or a failure to reach it. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let csrf = '';

async function call<T>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...extra };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? null : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
    });
  } catch {
    throw new ApiError(0, 'NETWORK', 'The console could not be reached. Check your connection and try again.');
  }
  const text = await res.text();
  let json: unknown = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (!res.ok) {
    const err = (json as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    const code = typeof err?.code === 'string' ? err.code : `HTTP_${res.status}`;
    const message = typeof err?.message === 'string' && err.message ? err.message : `The console answered ${res.status}.`;
    throw new ApiError(res.status, code, message);
  }
  return json as T;
}

const enc = encodeURIComponent;

export const api = {
  async session(): Promise<Session | null> {
    const s = await call<Session | { signed_in: false }>('GET', '/session');
    if (!('csrf_token' in s)) return null;
    csrf = s.csrf_token;
    return s;
  },
  async signIn(token: string): Promise<Session> {
    const s = await call<Session>('POST', '/session', { token });
    csrf = s.csrf_token;
    return s;
  },
  async signOut(): Promise<void> {
    try {
      await call<unknown>('DELETE', '/session');
    } finally {
      csrf = '';
    }
  },
  forget(): void {
    csrf = '';
  },
  account: (account: string) => call<Account>('GET', `/v1/accounts/${enc(account)}`),
  keys: async (account: string) => (await call<{ keys: Key[] }>('GET', `/v1/accounts/${enc(account)}/keys`)).keys,
  create: (account: string, input: NewKeyInput, idempotencyKey: string) =>
    call<Key & Secret>('POST', `/v1/accounts/${enc(account)}/keys`, input, { 'idempotency-key': idempotencyKey }),
  update: (id: string, patch: KeyPatch) => call<Key>('PATCH', `/v1/keys/${enc(id)}`, patch),
  reveal: (id: string) => call<Secret>('POST', `/v1/keys/${enc(id)}/reveal`, {}),
  roll: (id: string, graceSeconds: number) => call<Key & Secret>('POST', `/v1/keys/${enc(id)}/roll`, { grace_seconds: graceSeconds }),
  revoke: (id: string) => call<Key>('POST', `/v1/keys/${enc(id)}/revoke`, {}),
};
