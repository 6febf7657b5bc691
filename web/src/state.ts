/**
 * The "API keys" page's state: one object the views read and the actions change, the dialog on
 * screen (opened and closed here), and the page's words for an API error. `update()` draws the
 * page again from it (main.ts says how).
 */
import { ApiError, type Account, type AuditEvent, type Key, type KeyDay, type KeyPage, type KeySort, type LedgerPage, type Session, type StatusFilter } from './api.ts';
import type { Field } from './format.ts';

export type Load<T> = { state: 'loading' } | { state: 'ok'; value: T } | { state: 'error'; message: string };
export type FieldErrors = Partial<Record<Field | 'form', string>>;

export type Dialog =
  | { kind: 'create'; errors: FieldErrors; busy: boolean }
  | { kind: 'edit'; key: Key; errors: FieldErrors; busy: boolean }
  | { kind: 'roll'; key: Key; error?: string; busy: boolean }
  | { kind: 'revoke'; key: Key; error?: string; busy: boolean }
  | { kind: 'secret'; title: string; intro: string; keyName: string; secret: string; copied?: string };

/** What a create or edit form held when the session ended: given back after the next sign-in. */
export interface Draft {
  kind: 'create' | 'edit';
  key?: Key;
  values: Record<string, string>;
}

export interface ListQuery {
  status: StatusFilter;
  q: string;
  sort: KeySort;
  /** Cursors of the pages before this one (the first page's is null); this page's is the last. */
  cursors: (string | null)[];
}

export interface State {
  phase: 'checking' | 'signed-out' | 'signed-in';
  session: Session | null;
  /** `ended`: the session was ended for the user (revoked, expired), said as a warning; else the user signed out. */
  signIn: { busy: boolean; error?: string; notice?: string; ended?: boolean };
  account: Load<Account>;
  keys: Load<KeyPage>;
  /** The index of the page `keys` holds (its rows start at 50 × this + 1). */
  keysPageIndex: number;
  list: ListQuery;
  ledger: Load<LedgerPage>;
  ledgerCursors: (string | null)[];
  ledgerNote: string;
  audit: Load<AuditEvent[]>;
  offline: boolean;
  draft: Draft | null;
  dialog: Dialog | null;
  dialogSeq: number;
  rowError: Map<string, string>;
  rowBusy: Set<string>;
  /** Keys whose 30-day usage panel is open, and what it shows. */
  usage: Map<string, Load<{ currency: string; days: KeyDay[] }>>;
  notice: string;
  focusId: string | null;
}

export const state: State = {
  phase: 'checking',
  session: null,
  signIn: { busy: false },
  account: { state: 'loading' },
  keys: { state: 'loading' },
  keysPageIndex: 0,
  list: { status: 'current', q: '', sort: '-created', cursors: [null] },
  ledger: { state: 'loading' },
  ledgerCursors: [null],
  ledgerNote: '',
  audit: { state: 'loading' },
  offline: typeof navigator !== 'undefined' && navigator.onLine === false,
  draft: null,
  dialog: null,
  dialogSeq: 0,
  rowError: new Map(),
  rowBusy: new Set(),
  usage: new Map(),
  notice: '',
  focusId: null,
};

/** The page's mount point (index.html's #app). */
export const root = document.getElementById('app')!;

let draw: () => void = () => {};
/** Says how `update()` draws the page (main.ts: render the views into the root). */
export function drawWith(f: () => void): void {
  draw = f;
}

/** Draws the page again from the state. */
export function update(): void {
  draw();
}

export const isAuthEnd = (err: unknown) => err instanceof ApiError && err.status === 401;
export function authEndNotice(err: unknown): string {
  const expires = state.session ? Date.parse(state.session.expires_at) : NaN;
  if (Date.now() >= expires) return 'Your session has ended: it expired. Sign in again.';
  const why = err instanceof ApiError ? err.message : '';
  if (/revoked/i.test(why)) return 'Your session has ended: its token was revoked. Sign in with another token.';
  return 'Your session has ended: it was signed out or expired. Sign in again.';
}

export function message(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.code === 'NETWORK' && (state.offline || navigator.onLine === false)) return 'You are offline. Check your connection; the page tries again when it is back.';
    return sentence(err.message);
  }
  return 'Something went wrong. Try again.';
}

/** The API's message as a sentence: capitalised and ended. */
function sentence(m: string): string {
  const t = m.trim();
  if (!t) return t;
  const s = t[0]!.toUpperCase() + t.slice(1);
  return /[.!?]$/.test(s) ? s : `${s}.`;
}

// ---------------------------------------------------------------- dialogs

/** Values to put in the next form (a kept draft), read once by the form's template. */
let prefill: Record<string, string> | null = null;

export function openDialog(d: Dialog, values?: Record<string, string>): void {
  prefill = values ?? null;
  state.dialog = d;
  state.dialogSeq++;
  update();
}

export function closeDialog(): void {
  if (!state.dialog) return;
  const d = state.dialog;
  state.dialog = null;
  // Give focus back to where the user was: the row's control, or the list after a revoke.
  if (d.kind === 'create' || d.kind === 'secret') state.focusId = lastOpener ?? 'create-key';
  else state.focusId = d.kind === 'revoke' ? 'keys-title' : `key-${d.key.id}-${d.kind}`;
  lastOpener = null;
  update();
}
let lastOpener: string | null = null;

/** Where the focus goes back when the next create or secret dialog closes (the control that opened it). */
export function setLastOpener(id: string | null): void {
  lastOpener = id;
}

/** The kept draft's values for the form being drawn (null: none). */
export const prefilled = (): Record<string, string> | null => prefill;

export const currency = () => (state.account.state === 'ok' ? (state.account.value.currency ?? 'USD') : '');
