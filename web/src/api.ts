/**
 * The page's client for the management API. It authenticates with the session cookie (set by
 * POST /session, HttpOnly: the page never sees it) and sends the session's CSRF token in a header
 * on every change. No key or token ever goes into a URL, storage or the console log.
 */

export interface Limit {
  amount_micros: number;
  period: 'day' | 'week' | 'month' | 'total';
}

/** Requests and tokens counted by the sidecars (a key's or an account's). */
export interface TokenCounts {
  today: { input: number; output: number };
  month: { input: number; output: number };
}

/** The current window's use of each rate (null: no such rate). */
export interface RateUse {
  requests: { used: number; held: number; resets_at: string } | null;
  tokens: { used: number; resets_at: string } | null;
}

/** A key as the API answers a change of it (create, edit, roll, revoke). */
export interface KeyRecord {
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
  rolled_to: string | null;
  rolled_from: string | null;
  requests: { today: number; month: number };
  /** Requests refused by why (all time): `endpoint`, the endpoint rule (docs/endpoints.md). */
  refused: { endpoint: number };
  spend: { period: Limit['period']; period_micros: number; total_micros: number };
  /** Filled by metering: tokens today and this month. */
  tokens: TokenCounts;
  /** The key's rates (null: none). */
  rate: ApiRate | null;
  token_rate: ApiTokenRate | null;
  rate_use: RateUse;
}

/** A key of the list: its record and its status now. */
export interface Key extends KeyRecord {
  /** The status now: revoked, expired, limit_reached, rate_limited or active. */
  state: KeyState;
  /** limit_reached: when the spend limit lifts (null: a total limit, never). */
  limit_reached_until: string | null;
}

/** One UTC day of a key's usage (`GET /v1/keys/{id}/usage`). */
export interface KeyDay {
  day: string;
  amount_micros: number;
  requests: number;
  input_tokens: number;
  output_tokens: number;
}

export type KeyState = 'active' | 'expired' | 'limit_reached' | 'rate_limited' | 'revoked';
export type StatusFilter = 'current' | 'all' | KeyState;
export type KeySort = 'created' | '-created' | 'name' | '-name' | 'expires' | '-expires';

export interface KeyPage {
  keys: Key[];
  next_cursor: string | null;
  total: number;
  active_keys: number;
  max_active_keys: number;
}

export interface LedgerEntry {
  id: string;
  time: string;
  type: 'credit' | 'charge';
  amount_micros: number;
  reference: string | null;
  request_id: string | null;
  key_id: string | null;
  model: string | null;
  /** A metered charge's price rule and the name that priced it. */
  price_rule?: string;
  priced_by?: string | null;
}

export interface LedgerPage {
  currency: string;
  entries: LedgerEntry[];
  next_cursor: string | null;
}

/** An account's own upstream credential as the API shows it: never the secret (docs/credentials.md). */
export interface Credential {
  provider: 'openai' | 'anthropic' | 'google';
  hint: string;
  set_at: string;
}

export interface AuditEvent {
  time: string;
  action: string;
  actor: { type: string; id: string | null; name: string | null };
  account: string | null;
  key_id: string | null;
  changes: Record<string, unknown>;
}

/** How the live sidecars read a plain model name at one entry family (see the account answer's `bare_models`). */
export interface BareModelReading {
  rule: 'provider' | 'none' | 'mixed' | 'unreported';
  provider: string | null;
}

export interface Account {
  id: string;
  status: 'active' | 'disabled';
  /** How the account's usage is booked: by keygate (metered) or by its own router (external). */
  billing: 'metered' | 'external';
  wallet: { enforced: boolean; balance_micros: number; exists: boolean; rule: 'credited' | 'required' | 'not-required' | 'mixed' | 'unreported' };
  tokens: TokenCounts;
  /** The account's own rates (set by an operator; null: none). */
  rate: ApiRate | null;
  token_rate: ApiTokenRate | null;
  rate_use: RateUse;
  currency: string;
  /** The account's price multiplier, when an operator set one (a decimal). */
  price_multiplier?: string;
  /** How the live sidecars read a model name without a provider, per entry family. */
  bare_models: { openai: BareModelReading; anthropic: BareModelReading; google: BareModelReading };
}

export interface Session {
  signed_in: true;
  account: string;
  token_name?: string;
  csrf_token: string;
  expires_at: string;
  /** A person signed in with SSO (web/src/people.ts): who, their role here, the accounts they may pick. */
  user?: { name: string; email: string | null; sub: string };
  role?: 'owner' | 'developer' | 'viewer';
  accounts?: { account: string; role: 'owner' | 'developer' | 'viewer' }[];
}

/** Whether the console offers "Sign in with SSO" (said by GET /session while signed out). */
export let ssoOffered = false;

export interface Secret {
  id: string;
  key: string;
}

export interface NewKeyInput {
  name: string;
  models?: string[];
  expires_at?: string;
  limit?: Limit;
  rate?: ApiRate;
  token_rate?: ApiTokenRate;
}

/** A rate as the API takes it (`per`: second, minute, hour or day). */
export interface ApiRate {
  requests: number;
  per: string;
}
export interface ApiTokenRate {
  tokens: number;
  per: string;
}

export interface KeyPatch {
  name?: string;
  models?: string[] | null;
  expires_at?: string | null;
  limit?: Limit | null;
  rate?: ApiRate | null;
  token_rate?: ApiTokenRate | null;
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

export async function call<T>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
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
    const s = await call<(Session | { signed_in: false }) & { sso?: boolean }>('GET', '/session');
    ssoOffered = s.sso === true;
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
  async pickAccount(account: string): Promise<Session> {
    return call<Session>('POST', '/session/account', { account });
  },
  account: (account: string) => call<Account>('GET', `/v1/accounts/${enc(account)}`),
  keys: (account: string, q: { status: StatusFilter; q: string; sort: KeySort; cursor: string | null; limit?: number }) => {
    const p = new URLSearchParams({ status: q.status, sort: q.sort, limit: String(q.limit ?? 50) });
    if (q.q.trim()) p.set('q', q.q.trim());
    if (q.cursor) p.set('cursor', q.cursor);
    return call<KeyPage>('GET', `/v1/accounts/${enc(account)}/keys?${p}`);
  },
  ledger: (account: string, cursor: string | null, limit = 20) =>
    call<LedgerPage>('GET', `/v1/accounts/${enc(account)}/ledger?limit=${limit}${cursor ? `&cursor=${enc(cursor)}` : ''}`),
  audit: async (account: string) => (await call<{ events: AuditEvent[] }>('GET', `/v1/audit?account=${enc(account)}&limit=20`)).events,
  create: (account: string, input: NewKeyInput, idempotencyKey: string) =>
    call<KeyRecord & Secret>('POST', `/v1/accounts/${enc(account)}/keys`, input, { 'idempotency-key': idempotencyKey }),
  update: (id: string, patch: KeyPatch) => call<KeyRecord>('PATCH', `/v1/keys/${enc(id)}`, patch),
  reveal: (id: string) => call<Secret>('POST', `/v1/keys/${enc(id)}/reveal`, {}),
  roll: (id: string, graceSeconds: number) => call<KeyRecord & Secret & { old: KeyRecord }>('POST', `/v1/keys/${enc(id)}/roll`, { grace_seconds: graceSeconds }),
  revoke: (id: string) => call<KeyRecord>('POST', `/v1/keys/${enc(id)}/revoke`, {}),
  credentials: async (account: string) => (await call<{ credentials: Credential[] }>('GET', `/v1/accounts/${enc(account)}/credentials`)).credentials,
  setCredential: (account: string, provider: string, secret: string) => call<Credential>('PUT', `/v1/accounts/${enc(account)}/credentials/${enc(provider)}`, { secret }),
  removeCredential: (account: string, provider: string) => call<null>('DELETE', `/v1/accounts/${enc(account)}/credentials/${enc(provider)}`),
  usage: (id: string, days = 30) => call<{ key_id: string; currency: string; days: KeyDay[] }>('GET', `/v1/keys/${enc(id)}/usage?days=${days}`),
};
