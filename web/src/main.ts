/**
 * The "API keys" page: sign in with an account's management token (exchanged for a session
 * cookie), list the account's keys and wallet balance, create, reveal, edit, roll and revoke keys.
 * Rendered with lit-html (escaped templates, no innerHTML); one state object, one render function.
 */
import { html, nothing, render, type TemplateResult } from 'lit-html';
import { keyed } from 'lit-html/directives/keyed.js';
import { usageChart } from './usage-chart.ts';
import { actorWords, can, createdByMe, loadPeople, membersView, PEOPLE_ACTION_WORDS, personBar, pickAccount, ssoView } from './people.ts';
import { credentialsView, loadCredentials } from './credentials.ts';
import { amountProblem, expiryProblem, KEY_LIMITS, modelsProblem, nameProblem, parseAmountText, splitModels } from '../../src/core/key-rules.ts';
import { formatRate, parseRateText, RATE_UNITS, rateProblem, type Rate, type RateUnit } from '../../src/core/rate-text.ts';
import {
  api,
  ApiError,
  type Account,
  type AuditEvent,
  type Key,
  type KeyDay,
  type KeyPage,
  type KeyPatch,
  type KeySort,
  type KeyState,
  type LedgerPage,
  type Limit,
  type ApiRate,
  type ApiTokenRate,
  type NewKeyInput,
  type Session,
  type StatusFilter,
} from './api.ts';
import {
  PERIODS,
  amountInput,
  csvLine,
  decimal,
  fieldOf,
  rateRefusalWords,
  rateWords,
  useWords,
  fromLocalInput,
  localInput,
  money,
  periodWord,
  plainNameWords,
  rolledName,
  timeZoneName,
  when,
  whenZoned,
  type Field,
} from './format.ts';

type Load<T> = { state: 'loading' } | { state: 'ok'; value: T } | { state: 'error'; message: string };
type FieldErrors = Partial<Record<Field | 'form', string>>;

type Dialog =
  | { kind: 'create'; errors: FieldErrors; busy: boolean }
  | { kind: 'edit'; key: Key; errors: FieldErrors; busy: boolean }
  | { kind: 'roll'; key: Key; error?: string; busy: boolean }
  | { kind: 'revoke'; key: Key; error?: string; busy: boolean }
  | { kind: 'secret'; title: string; intro: string; keyName: string; secret: string; copied?: string };

/** What a create or edit form held when the session ended: given back after the next sign-in. */
interface Draft {
  kind: 'create' | 'edit';
  key?: Key;
  values: Record<string, string>;
}

interface ListQuery {
  status: StatusFilter;
  q: string;
  sort: KeySort;
  /** Cursors of the pages before this one (the first page's is null); this page's is the last. */
  cursors: (string | null)[];
}

interface State {
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

const state: State = {
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

const root = document.getElementById('app')!;
root.replaceChildren(); // drop the static "Loading…" placeholder: lit-html renders into an empty container

function update(): void {
  render(view(), root);
  const dialog = root.querySelector('dialog');
  if (dialog && !dialog.open) dialog.showModal();
  if (state.focusId) {
    const el = document.getElementById(state.focusId);
    state.focusId = null;
    el?.focus();
  }
}

// ---------------------------------------------------------------- session

async function start(): Promise<void> {
  window.addEventListener('offline', () => {
    state.offline = true;
    update();
  });
  window.addEventListener('online', () => {
    state.offline = false;
    update();
    if (state.phase === 'signed-in') void reload();
  });
  try {
    const s = await api.session();
    if (s) return signedIn(s);
    state.phase = 'signed-out';
  } catch (err) {
    state.phase = 'signed-out';
    state.signIn.error = message(err);
  }
  update();
}

function signedIn(s: Session): void {
  state.session = s;
  state.phase = 'signed-in';
  state.signIn = { busy: false };
  state.focusId = 'page-title';
  state.list = { status: 'current', q: '', sort: '-created', cursors: [null] };
  state.ledgerCursors = [null];
  void reload();
  void loadPeople(s, update);
  const d = state.draft;
  if (d && d.values.account === s.account) {
    // The form that was being typed when the session ended comes back as it was.
    state.draft = null;
    state.notice = 'Your form was kept: check it and submit again.';
    if (d.kind === 'create') openDialog({ kind: 'create', errors: {}, busy: false }, d.values);
    else if (d.key) openDialog({ kind: 'edit', key: d.key, errors: {}, busy: false }, d.values);
  } else state.draft = null;
}

/** The values of the open create or edit form, to give back after the next sign-in. */
function keepDraft(): void {
  const d = state.dialog;
  const form = root.querySelector('dialog form') as HTMLFormElement | null;
  if (!d || !form || (d.kind !== 'create' && d.kind !== 'edit')) return;
  const values: Record<string, string> = { account: state.session?.account ?? '' };
  for (const n of ['name', 'models', 'expires', 'limit', 'period', 'rate', 'token_rate']) {
    const el = form.elements.namedItem(n) as HTMLInputElement | HTMLSelectElement | null;
    if (el) values[n] = el.value;
  }
  state.draft = { kind: d.kind, key: d.kind === 'edit' ? d.key : undefined, values };
}

/** The session ended (expired, signed out elsewhere, or its token was revoked): say why, keep what was typed. */
function sessionEnded(notice: string, keep = true): void {
  if (keep) keepDraft();
  api.forget();
  state.session = null;
  state.phase = 'signed-out';
  state.dialog = null;
  state.keys = { state: 'loading' };
  state.account = { state: 'loading' };
  state.ledger = { state: 'loading' };
  state.audit = { state: 'loading' };
  state.rowError.clear();
  state.signIn = { busy: false, ended: keep, notice: state.draft ? `${notice} What you typed is kept for after you sign in.` : notice };
  state.focusId = 'token';
  update();
}

async function onSignIn(e: SubmitEvent): Promise<void> {
  e.preventDefault();
  const input = (e.currentTarget as HTMLFormElement).elements.namedItem('token') as HTMLInputElement;
  const token = input.value.trim();
  if (!token) {
    state.signIn = { ...state.signIn, busy: false, error: 'Enter the management token of your account.' };
    state.focusId = 'token';
    return update();
  }
  state.signIn = { ...state.signIn, busy: true, error: undefined };
  update();
  try {
    const s = await api.signIn(token);
    input.value = ''; // the token does not stay in the page
    signedIn(s);
  } catch (err) {
    state.signIn = { ...state.signIn, busy: false, error: message(err) };
    state.focusId = 'token';
    update();
  }
}

async function onSignOut(): Promise<void> {
  try {
    await api.signOut();
  } catch {
    // the cookie may already be gone; the page forgets the session either way
  }
  state.draft = null;
  sessionEnded('You are signed out.', false);
}

// ---------------------------------------------------------------- data

/** Reloads everything the page shows (after sign-in, a change, or coming back online). */
async function reload(): Promise<void> {
  await Promise.all([loadKeys(), loadAccount(), loadLedger(), loadAudit(), state.session ? loadCredentials(state.session.account, read, update) : undefined]);
}

/** Runs a read; a 401 ends the session (with the server's reason); else the error is the section's. */
async function read<T>(f: () => Promise<T>): Promise<Load<T> | null> {
  try {
    return { state: 'ok', value: await f() };
  } catch (err) {
    if (isAuthEnd(err)) {
      if (state.phase === 'signed-in') sessionEnded(authEndNotice(err));
      return null;
    }
    return { state: 'error', message: message(err) };
  }
}

let keysSeq = 0;
async function loadKeys(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const seq = ++keysSeq;
  if (state.keys.state !== 'ok') state.keys = { state: 'loading' };
  update();
  const l = state.list;
  const r = await read(() => api.keys(account, { status: l.status, q: l.q, sort: l.sort, cursor: l.cursors[l.cursors.length - 1] ?? null }));
  if (r === null || seq !== keysSeq) return;
  state.keys = r;
  state.keysPageIndex = l.cursors.length - 1;
  update();
}

async function loadAccount(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const r = await read(() => api.account(account));
  if (r === null) return;
  state.account = r;
  update();
}

async function loadLedger(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const r = await read(() => api.ledger(account, state.ledgerCursors[state.ledgerCursors.length - 1] ?? null));
  if (r === null) return;
  state.ledger = r;
  update();
}

async function loadAudit(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const r = await read(() => api.audit(account));
  if (r === null) return;
  state.audit = r;
  update();
}

const isAuthEnd = (err: unknown) => err instanceof ApiError && err.status === 401;
function authEndNotice(err: unknown): string {
  const expires = state.session ? Date.parse(state.session.expires_at) : NaN;
  if (Date.now() >= expires) return 'Your session has ended: it expired. Sign in again.';
  const why = err instanceof ApiError ? err.message : '';
  if (/revoked/i.test(why)) return 'Your session has ended: its token was revoked. Sign in with another token.';
  return 'Your session has ended: it was signed out or expired. Sign in again.';
}

function message(err: unknown): string {
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

// ---------------------------------------------------------------- list controls

function setList(change: Partial<ListQuery>): void {
  state.list = { ...state.list, ...change, cursors: change.cursors ?? [null] };
  void loadKeys();
}

let searchTimer: ReturnType<typeof setTimeout> | undefined;
function onSearch(e: Event): void {
  const q = (e.currentTarget as HTMLInputElement).value;
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => setList({ q }), 250);
}

function onSearchSubmit(e: SubmitEvent): void {
  e.preventDefault();
  clearTimeout(searchTimer);
  const q = ((e.currentTarget as HTMLFormElement).elements.namedItem('q') as HTMLInputElement).value;
  setList({ q });
}

function nextPage(): void {
  if (state.keys.state !== 'ok' || !state.keys.value.next_cursor) return;
  state.list = { ...state.list, cursors: [...state.list.cursors, state.keys.value.next_cursor] };
  state.focusId = 'keys-title';
  void loadKeys();
}

function previousPage(): void {
  if (state.list.cursors.length <= 1) return;
  state.list = { ...state.list, cursors: state.list.cursors.slice(0, -1) };
  state.focusId = 'keys-title';
  void loadKeys();
}

function ledgerOlder(): void {
  if (state.ledger.state !== 'ok' || !state.ledger.value.next_cursor) return;
  state.ledgerCursors = [...state.ledgerCursors, state.ledger.value.next_cursor];
  void loadLedger();
}

function ledgerNewer(): void {
  if (state.ledgerCursors.length <= 1) return;
  state.ledgerCursors = state.ledgerCursors.slice(0, -1);
  void loadLedger();
}

/** Every ledger entry (up to 100,000), as a CSV file the browser saves. */
async function exportCsv(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  state.ledgerNote = 'Preparing the CSV…';
  update();
  const lines = [csvLine(['time', 'type', 'amount', 'currency', 'reference', 'request_id', 'key_id', 'model'])];
  let cursor: string | null = null;
  try {
    for (let pages = 0; pages < 500; pages++) {
      const page: LedgerPage = await api.ledger(account, cursor, 200);
      for (const e of page.entries) lines.push(csvLine([e.time, e.type, decimal(e.amount_micros), page.currency, e.reference, e.request_id, e.key_id, e.model]));
      cursor = page.next_cursor;
      if (!cursor) break;
    }
  } catch (err) {
    if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
    state.ledgerNote = `The CSV could not be made: ${message(err)}`;
    return update();
  }
  const url = URL.createObjectURL(new Blob([`${lines.join('\r\n')}\r\n`], { type: 'text/csv' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = `ledger-${account}-${new Date().toISOString().slice(0, 10)}.csv`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  state.ledgerNote = `Exported ${lines.length - 1} ${lines.length === 2 ? 'entry' : 'entries'}.`;
  update();
}

async function copyText(text: string, id: string): Promise<void> {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    ok = false;
  }
  state.notice = ok ? `Copied ${text}.` : `Could not copy: select ${text} and copy it yourself.`;
  state.focusId = id;
  update();
}

// ---------------------------------------------------------------- dialogs

/** Values to put in the next form (a kept draft), read once by the form's template. */
let prefill: Record<string, string> | null = null;

function openDialog(d: Dialog, values?: Record<string, string>): void {
  prefill = values ?? null;
  state.dialog = d;
  state.dialogSeq++;
  update();
}

function closeDialog(): void {
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

interface KeyFormValues {
  name: string;
  models: string[];
  expires: string;
  limit: string;
  period: Limit['period'];
  rate: string;
  tokenRate: string;
}

/** Every field of the key form, in its order (the first wrong one gets the focus). */
const KEY_FIELDS = ['name', 'models', 'expires', 'limit', 'rate', 'token_rate'] as const;

/** Reads the key form and checks every field at once, with the API's rules; the errors found before any request. */
function readKeyForm(form: HTMLFormElement): { values: KeyFormValues; errors: FieldErrors } {
  const get = (n: string) => ((form.elements.namedItem(n) as HTMLInputElement | HTMLSelectElement | null)?.value ?? '').trim();
  const values: KeyFormValues = {
    name: get('name'),
    models: splitModels(get('models')),
    expires: get('expires'),
    limit: get('limit'),
    period: (get('period') || 'month') as Limit['period'],
    rate: get('rate'),
    tokenRate: get('token_rate'),
  };
  const errors: FieldErrors = {};
  const name = nameProblem(values.name);
  if (name) errors.name = name;
  const models = modelsProblem(values.models);
  if (models) errors.models = models;
  if (values.expires) {
    const expiry = expiryProblem(fromLocalInput(values.expires), Date.now());
    if (expiry) errors.expires = expiry;
  }
  if (values.limit) {
    const limit = amountProblem(values.limit);
    if (limit) errors.limit = limit;
  }
  const rate = rateProblem(values.rate, 'requests');
  if (rate) errors.rate = rate;
  const tokenRate = rateProblem(values.tokenRate, 'tokens');
  if (tokenRate) errors.token_rate = tokenRate;
  return { values, errors };
}

const limitOf = (v: KeyFormValues): Limit | null => (v.limit ? { amount_micros: parseAmountText(v.limit)!, period: v.period } : null);
/** A checked rate text as a Rate, or null when empty. */
const rateOf = (text: string, kind: 'requests' | 'tokens'): Rate | null => (text ? (parseRateText(text, kind) as Rate) : null);
const requestRateOf = (v: KeyFormValues): ApiRate | null => {
  const r = rateOf(v.rate, 'requests');
  return r && { requests: r.count, per: r.per };
};
const tokenRateOf = (v: KeyFormValues): ApiTokenRate | null => {
  const r = rateOf(v.tokenRate, 'tokens');
  return r && { tokens: r.count, per: r.per };
};
/** A key's rate from the API as the form shows it (`5/s`), or empty. */
const rateInput = (r: { per: string } & ({ requests: number } | { tokens: number }) | null | undefined): string =>
  r && (RATE_UNITS as readonly string[]).includes(r.per) ? formatRate({ count: 'requests' in r ? r.requests : r.tokens, per: r.per as RateUnit }) : '';
const expiryOf = (v: KeyFormValues): string | null => (v.expires ? new Date(fromLocalInput(v.expires)).toISOString() : null);

/** Puts an API error next to the field it names, or at the form's foot. */
function apiErrors(err: unknown): FieldErrors {
  const msg = rateRefusalWords(message(err));
  const field = err instanceof ApiError && (err.status === 400 || err.status === 422) ? fieldOf(err.message) : null;
  return field ? { [field]: msg } : { form: msg };
}

/** The open create or edit dialog and its values, once they pass the checks made before any request. */
type FormDialog = Extract<Dialog, { kind: 'create' | 'edit' }>;
function submittedKeyForm(e: SubmitEvent, kind: FormDialog['kind']): { d: FormDialog; values: KeyFormValues } | null {
  e.preventDefault();
  const d = state.dialog;
  if (!d || d.kind !== kind || (d.kind !== 'create' && d.kind !== 'edit') || d.busy) return null;
  const { values, errors } = readKeyForm(e.currentTarget as HTMLFormElement);
  if (Object.keys(errors).length) {
    showFormErrors(d, errors);
    return null;
  }
  return { d, values };
}

/** A request of an open dialog failed: end the session on 401, else show the error in the dialog. */
function dialogFailed(d: Exclude<Dialog, { kind: 'secret' }>, err: unknown): void {
  if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
  d.busy = false;
  if (d.kind === 'create' || d.kind === 'edit') return showFormErrors(d, apiErrors(err));
  d.error = message(err);
  update();
}

let createIdem: { body: string; key: string } | null = null;

async function onCreate(e: SubmitEvent): Promise<void> {
  const form = submittedKeyForm(e, 'create');
  if (!form) return;
  const { d, values } = form;
  const input: NewKeyInput = { name: values.name };
  if (values.models.length) input.models = values.models;
  const expires = expiryOf(values);
  if (expires) input.expires_at = expires;
  const limit = limitOf(values);
  if (limit) input.limit = limit;
  const rate = requestRateOf(values);
  if (rate) input.rate = rate;
  const tokenRate = tokenRateOf(values);
  if (tokenRate) input.token_rate = tokenRate;
  // A retried submit of the same form (say after a lost answer) makes one key, not two.
  const body = JSON.stringify(input);
  if (createIdem?.body !== body) createIdem = { body, key: crypto.randomUUID() };
  d.busy = true;
  d.errors = {};
  update();
  try {
    const created = await api.create(state.session!.account, input, createIdem.key);
    createdByMe(created.id);
    createIdem = null;
    openDialog({
      kind: 'secret',
      title: 'Key created',
      intro: 'Copy this key now and keep it somewhere safe, such as an environment variable on your server.',
      keyName: created.name,
      secret: created.key,
    });
    state.notice = `Key “${created.name}” created.`;
    void reload();
  } catch (err) {
    dialogFailed(d, err);
  }
}

function showFormErrors(d: Extract<Dialog, { errors: FieldErrors }>, errors: FieldErrors): void {
  d.errors = errors;
  const first = KEY_FIELDS.find((f) => errors[f]);
  state.focusId = first ? `f-${first}` : null;
  update();
}

async function onEdit(e: SubmitEvent): Promise<void> {
  const form = submittedKeyForm(e, 'edit');
  if (!form) return;
  const { d, values } = form;
  if (d.kind !== 'edit') return;
  const k = d.key;
  // Send only what changed, so an unchanged expiry keeps its exact instant.
  const patch: KeyPatch = {};
  if (values.name !== k.name) patch.name = values.name;
  const models = values.models.length ? values.models : null;
  if ((models ?? []).join(',') !== (k.models ?? []).join(',')) patch.models = models;
  if (values.expires !== localInput(k.expires_at)) patch.expires_at = expiryOf(values);
  const limit = limitOf(values);
  if (JSON.stringify(limit) !== JSON.stringify(k.limit ?? null)) patch.limit = limit;
  if (values.rate !== rateInput(k.rate)) patch.rate = requestRateOf(values);
  if (values.tokenRate !== rateInput(k.token_rate)) patch.token_rate = tokenRateOf(values);
  if (!Object.keys(patch).length) return closeDialog();
  d.busy = true;
  d.errors = {};
  update();
  try {
    await api.update(k.id, patch);
    state.notice = `Key “${values.name}” updated.`;
    closeDialog();
    void reload();
  } catch (err) {
    dialogFailed(d, err);
  }
}

async function onRoll(e: SubmitEvent): Promise<void> {
  e.preventDefault();
  const d = state.dialog;
  if (d?.kind !== 'roll' || d.busy) return;
  const grace = Number(((e.currentTarget as HTMLFormElement).elements.namedItem('grace') as HTMLSelectElement | null)?.value ?? 0);
  d.busy = true;
  d.error = undefined;
  update();
  try {
    // The console names the new key in the roll itself ("NAME (rolled)", "NAME (rolled 2)"…), so the
    // two are told apart in the list, the audit and the logs.
    const rolled = await api.roll(d.key.id, grace);
    createdByMe(rolled.id);
    const shownName = rolled.name;
    openDialog({
      kind: 'secret',
      title: 'Key rolled',
      intro:
        grace > 0
          ? `This new key replaces “${d.key.name}”, whose old value keeps working for ${graceWords(grace)}.`
          : `This new key replaces “${d.key.name}”; the old value no longer works.`,
      keyName: shownName,
      secret: rolled.key,
    });
    lastOpener = 'keys-title';
    state.notice = `Key “${d.key.name}” rolled: the new key is “${shownName}”.`;
    void reload();
  } catch (err) {
    dialogFailed(d, err);
  }
}

const GRACES: [number, string][] = [
  [0, 'At once'],
  [3600, 'After 1 hour'],
  [86_400, 'After 24 hours'],
];
const graceWords = (s: number) => (s >= 86_400 ? '24 hours' : s >= 3600 ? '1 hour' : `${s} seconds`);

async function onRevoke(e: SubmitEvent): Promise<void> {
  e.preventDefault();
  const d = state.dialog;
  if (d?.kind !== 'revoke' || d.busy) return;
  d.busy = true;
  d.error = undefined;
  update();
  try {
    await api.revoke(d.key.id);
    state.notice = `Key “${d.key.name}” revoked. Revoked keys are listed under Status: Revoked.`;
    closeDialog();
    void reload();
  } catch (err) {
    dialogFailed(d, err);
  }
}

/** Opens (loading it) or closes a key's 30-day usage panel. */
async function onUsage(k: Key): Promise<void> {
  if (state.usage.has(k.id)) {
    state.usage.delete(k.id);
    update();
    return;
  }
  state.usage.set(k.id, { state: 'loading' });
  update();
  try {
    const u = await api.usage(k.id, 30);
    if (state.usage.has(k.id)) state.usage.set(k.id, { state: 'ok', value: { currency: u.currency, days: u.days } });
  } catch (err) {
    if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
    if (state.usage.has(k.id)) state.usage.set(k.id, { state: 'error', message: message(err) });
  }
  update();
}

/** The row under a key with its usage panel open. */
function usageRow(k: Key, columns: number): TemplateResult {
  const u = state.usage.get(k.id);
  if (!u) return html``;
  const id = `key-${k.id}-usage`;
  return html`<tr class="usage-row" id=${id}>
    <td colspan=${columns}>
      ${u.state === 'loading'
        ? html`<p class="muted" role="status">Loading the last 30 days of ${k.name}…</p>`
        : u.state === 'error'
          ? html`<p class="error" role="alert">${u.message}</p>`
          : usageChart(id, k.name, u.value.days, u.value.currency)}
    </td>
  </tr>`;
}

async function onReveal(k: Key): Promise<void> {
  if (state.rowBusy.has(k.id)) return;
  state.rowBusy.add(k.id);
  state.rowError.delete(k.id);
  update();
  try {
    const { key } = await api.reveal(k.id);
    lastOpener = `key-${k.id}-reveal`;
    openDialog({
      kind: 'secret',
      title: 'Key revealed',
      intro: 'Treat this key like a password: keep it on your server, never in client-side code or a repository.',
      keyName: k.name,
      secret: key,
    });
  } catch (err) {
    if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
    state.rowError.set(k.id, message(err));
  } finally {
    state.rowBusy.delete(k.id);
    update();
  }
}

async function onCopy(): Promise<void> {
  const d = state.dialog;
  if (d?.kind !== 'secret') return;
  let ok = false;
  try {
    await navigator.clipboard.writeText(d.secret);
    ok = true;
  } catch {
    // No clipboard API (a plain-HTTP address that is not localhost): copy the selected field.
    const input = document.getElementById('secret') as HTMLInputElement | null;
    input?.select();
    ok = document.execCommand('copy');
  }
  d.copied = ok ? 'Copied to the clipboard.' : 'Could not copy: select the key and copy it yourself.';
  update();
}

// ---------------------------------------------------------------- views

function view(): TemplateResult {
  return html`
    <header class="bar">
      <span class="brand">keygate console</span>
      ${state.phase === 'signed-in' && state.session
        ? html`${personBar(state.session, (a) => void onPickAccount(a))}
            <span class="who">Account <strong>${state.session.account}</strong></span>
            <button type="button" class="link signout" @click=${onSignOut}>Sign out</button>`
        : nothing}
    </header>
    ${state.offline
      ? html`<p class="offline" role="status">You are offline. What is shown may be out of date, and no change can be sent until the connection is back.</p>`
      : nothing}
    <main class="page" id="main">
      ${state.phase === 'checking'
        ? html`<h1>API keys</h1>
            <p class="muted" role="status">Loading…</p>`
        : state.phase === 'signed-out'
          ? signInView()
          : keysPage()}
    </main>
    ${state.dialog ? keyed(state.dialogSeq, dialogView(state.dialog)) : nothing}
  `;
}

function signInView(): TemplateResult {
  const s = state.signIn;
  return html`
    <h1 id="page-title" tabindex="-1">API keys</h1>
    <form class="card signin" @submit=${onSignIn} novalidate aria-labelledby="signin-title">
      <h2 id="signin-title">Sign in</h2>
      ${s.notice ? html`<p class="notice ${s.ended ? 'ended' : 'signed-out'}" role="status">${s.notice}</p>` : nothing}
      <p class="muted" id="token-help">
        Use a management token for your account. It is exchanged for a session and does not stay in this page.
      </p>
      <label for="token">Token</label>
      <input
        id="token"
        name="token"
        type="password"
        autocomplete="off"
        spellcheck="false"
        required
        aria-describedby=${s.error ? 'token-help token-error' : 'token-help'}
        aria-invalid=${s.error ? 'true' : 'false'}
      />
      ${s.error ? html`<p class="error" id="token-error" role="alert">${s.error}</p>` : nothing}
      <div class="actions">
        <button type="submit" class="primary" ?disabled=${s.busy} aria-disabled=${s.busy ? 'true' : 'false'}>Sign in</button>
        ${s.busy ? html`<span class="muted" role="status">Signing in…</span>` : nothing}
      </div>
    </form>
    ${ssoView()}
  `;
}

/** A person in several accounts picks another ("Account" select). */
async function onPickAccount(account: string): Promise<void> {
  try {
    signedIn(await pickAccount(account));
  } catch (err) {
    if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
    state.notice = message(err);
    update();
  }
}

/** Why a key cannot be created now (the account's active-key limit), or null. */
function createBlocked(): string | null {
  const k = state.keys;
  if (k.state !== 'ok' || k.value.active_keys < k.value.max_active_keys) return null;
  return `Your account has ${k.value.active_keys} active keys, the most it may have. Revoke a key you no longer use to create another.`;
}

function keysPage(): TemplateResult {
  const blocked = createBlocked();
  return html`
    <div class="page-head">
      <h1 id="page-title" tabindex="-1">API keys</h1>
      ${can('create') ? html`<button
        type="button"
        class="primary"
        id="create-key"
        aria-disabled=${blocked ? 'true' : 'false'}
        aria-describedby=${blocked ? 'create-blocked' : nothing}
        @click=${() => {
          if (createBlocked()) return;
          lastOpener = 'create-key';
          openDialog({ kind: 'create', errors: {}, busy: false });
        }}
      >
        Create key
      </button>` : nothing}
    </div>
    ${blocked ? html`<p class="warning" id="create-blocked">${blocked}</p>` : nothing}
    <p class="muted intro">
      Send a key in the <code>Authorization: Bearer</code>, <code>x-api-key</code> or <code>x-goog-api-key</code> header.
      Keep keys on your server: never in client-side code or a repository.
    </p>
    <p class="notice live" role="status" aria-live="polite">${state.notice}</p>
    ${keysView()} ${accountView()} ${auditView()} ${membersView()}
  `;
}

const STATUS_OPTIONS: [StatusFilter, string][] = [
  ['current', 'Current'],
  ['all', 'All'],
  ['active', 'Active'],
  ['expired', 'Expired'],
  ['limit_reached', 'Limit reached'],
  ['rate_limited', 'Rate limited'],
  ['revoked', 'Revoked'],
];

const SORT_OPTIONS: [KeySort, string][] = [
  ['-created', 'Newest first'],
  ['created', 'Oldest first'],
  ['name', 'Name A–Z'],
  ['-name', 'Name Z–A'],
  ['expires', 'Expiring soonest'],
];

function listControls(): TemplateResult {
  const l = state.list;
  return html`<div class="controls">
    <form role="search" class="search" @submit=${onSearchSubmit}>
      <label for="q">Search</label>
      <input id="q" name="q" type="search" .value=${l.q} autocomplete="off" spellcheck="false" placeholder="Name, key id or hint"
        aria-describedby="q-help" @input=${onSearch} />
      <span class="visually-hidden" id="q-help">Part of a name, or a whole key id or hint.</span>
    </form>
    <div class="control">
      <label for="status">Status</label>
      <select id="status" @change=${(e: Event) => setList({ status: (e.currentTarget as HTMLSelectElement).value as StatusFilter })}>
        ${STATUS_OPTIONS.map(([v, label]) => html`<option value=${v} ?selected=${l.status === v}>${label}</option>`)}
      </select>
    </div>
    <div class="control">
      <label for="sort">Sort</label>
      <select id="sort" @change=${(e: Event) => setList({ sort: (e.currentTarget as HTMLSelectElement).value as KeySort })}>
        ${SORT_OPTIONS.map(([v, label]) => html`<option value=${v} ?selected=${l.sort === v}>${label}</option>`)}
      </select>
    </div>
  </div>`;
}

function keysView(): TemplateResult {
  const k = state.keys;
  const section = (body: TemplateResult, busy = false) => html`<section class="keys-section" aria-labelledby="keys-title" aria-busy=${busy ? 'true' : 'false'}>
    <h2 id="keys-title" tabindex="-1">Keys</h2>
    ${listControls()} ${body}
  </section>`;
  if (k.state === 'loading') return section(html`<p class="muted placeholder" role="status">Loading keys…</p>`, true);
  if (k.state === 'error')
    return section(html`<div class="card failure" role="alert">
      <p><strong>The keys could not be loaded.</strong> ${k.message}</p>
      <button type="button" @click=${() => void loadKeys()}>Try again</button>
    </div>`);
  const p = k.value;
  const l = state.list;
  if (p.keys.length === 0 && state.keysPageIndex === 0) {
    if (l.q.trim() || l.status !== 'current')
      return section(html`<div class="card empty">
        <p><strong>No keys match.</strong></p>
        <p class="muted">Nothing ${l.q.trim() ? html`matches “${l.q.trim()}”` : nothing} with the status ${STATUS_OPTIONS.find(([v]) => v === l.status)?.[1]}.</p>
        <button type="button" @click=${() => setList({ q: '', status: 'current' })}>Show current keys</button>
      </div>`);
    return section(html`<div class="card empty">
      <p><strong>No keys yet.</strong></p>
      <p class="muted">Create a key to send requests to the gateway. You can restrict it to some models, give it an expiry
      and a spend limit.${p.total === 0 && p.active_keys === 0 ? nothing : ' Revoked keys are under Status: Revoked.'}</p>
    </div>`);
  }
  const first = state.keysPageIndex * 50 + 1;
  const showTokens = p.keys.some((x) => x.tokens !== undefined);
  const showRates = p.keys.some((x) => x.rate !== undefined || x.token_rate !== undefined);
  return section(html`
    <p class="muted count" role="status">
      ${p.keys.length ? `${first.toLocaleString()}–${(first + p.keys.length - 1).toLocaleString()} of ${p.total.toLocaleString()}` : `0 of ${p.total.toLocaleString()}`}
      ${p.total === 1 ? 'key' : 'keys'} · ${p.active_keys} of ${p.max_active_keys} active keys used
    </p>
    <div class="table-wrap" role="region" aria-labelledby="keys-title" tabindex="0">
      <table class="keys">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key id</th>
            <th scope="col">Hint</th>
            <th scope="col">Status</th>
            <th scope="col">Models</th>
            <th scope="col">Expires</th>
            <th scope="col">Last used</th>
            <th scope="col">Requests</th>
            <th scope="col">Spend</th>
            ${showTokens ? html`<th scope="col" data-slot="tokens">Tokens</th>` : nothing}
            ${showRates ? html`<th scope="col" data-slot="rates">Rates</th>` : nothing}
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          ${p.keys.map((x) => html`${keyRow(x, showTokens, showRates)}${usageRow(x, 10 + (showTokens ? 1 : 0) + (showRates ? 1 : 0))}`)}
        </tbody>
      </table>
    </div>
    <nav class="pager" aria-label="Pages of keys">
      <button type="button" ?disabled=${l.cursors.length <= 1} @click=${previousPage}>Previous page</button>
      <button type="button" ?disabled=${!p.next_cursor} @click=${nextPage}>Next page</button>
    </nav>
  `);
}

const STATE_WORDS: Record<KeyState, string> = {
  active: 'Active',
  expired: 'Expired',
  limit_reached: 'Limit reached',
  rate_limited: 'Rate-limited',
  revoked: 'Revoked',
};

function stateOf(k: Key): KeyState {
  if (k.state) return k.state;
  if (k.status === 'revoked') return 'revoked';
  return k.expires_at !== null && Date.parse(k.expires_at) <= Date.now() ? 'expired' : 'active';
}

function statusCell(k: Key): TemplateResult {
  const s = stateOf(k);
  if (s === 'limit_reached')
    return html`<span class="badge ${s}">Limit reached</span>
      <span class="sub">${k.limit_reached_until ? html`until <time datetime=${k.limit_reached_until}>${whenZoned(k.limit_reached_until)}</time>` : 'for good (a total limit): raise it to lift'}</span>`;
  return html`<span class="badge ${s}">${STATE_WORDS[s]}</span>${s === 'revoked' && k.revoked_at ? html`<span class="sub">${when(k.revoked_at)}</span>` : nothing}`;
}

/** The metering slot: tokens in and out, when the deployment meters them. */
const tokensCell = (k: Key) =>
  html`<td class="nowrap" data-slot="tokens">${k.tokens ? html`${k.tokens.today.input.toLocaleString()} in · ${k.tokens.today.output.toLocaleString()} out today<span class="sub">${k.tokens.month.input.toLocaleString()} in · ${k.tokens.month.output.toLocaleString()} out this month</span>` : html`<span class="muted">—</span>`}</td>`;

/** The rate-limit slot: the key's request rate and token rate, each with the current window's use, when the deployment has rate limits. */
const ratesCell = (k: Key) =>
  html`<td class="nowrap" data-slot="rates">${k.rate ? `${rateWords(k.rate.requests, 'request', k.rate.per)}${useWords(k.rate_use?.requests)}` : html`<span class="muted">No request rate</span>`}
    <span class="sub">${k.token_rate ? `${rateWords(k.token_rate.tokens, 'token', k.token_rate.per)}${useWords(k.rate_use?.tokens)}` : 'No token rate'}</span></td>`;

/**
 * The allowed models, two lines at most: the list wraps only after a comma (never inside a name) and
 * is cut short on screen past two lines, whole in the tooltip and to screen readers.
 */
const modelsCell = (k: Key) =>
  k.models?.length
    ? html`<td class="models" title=${k.models.join(', ')}><span class="clamp">${k.models.map((m, i) => html`${i ? ', ' : ''}<span class="model">${m}</span>`)}</span></td>`
    : html`<td class="models"><span class="muted">All models</span></td>`;

function keyRow(k: Key, showTokens: boolean, showRates: boolean): TemplateResult {
  const id = `key-${k.id}`;
  const s = stateOf(k);
  const busy = state.rowBusy.has(k.id);
  const err = state.rowError.get(k.id);
  const spent = k.spend?.period_micros ?? 0;
  const cur = currency();
  return html`<tr class="key ${s}" id=${id}>
    <th scope="row">
      <span id="${id}-title" class="key-name" title=${k.name}>${k.name}</span>
      ${k.rolled_to && k.status === 'active' ? html`<span class="sub">${rolledNote(k)}</span>` : nothing}
      ${err ? html`<span class="error" role="alert">${err}</span>` : nothing}
    </th>
    <td class="nowrap">
      <code>${k.id}</code>
      <button type="button" class="link small" id="${id}-copy" aria-label="Copy key id ${k.id}" @click=${() => void copyText(k.id, `${id}-copy`)}>Copy</button>
    </td>
    <td class="nowrap"><code>${k.hint}</code></td>
    <td>${statusCell(k)}</td>
    ${modelsCell(k)}
    <td class="nowrap">${k.expires_at ? html`<time datetime=${k.expires_at}>${whenZoned(k.expires_at)}</time>` : html`<span class="muted">Never</span>`}</td>
    <td class="nowrap">${k.last_used_at ? html`<time datetime=${k.last_used_at}>${when(k.last_used_at)}</time>` : html`<span class="muted">Not yet</span>`}</td>
    <td class="nowrap">${k.requests ? html`${k.requests.today.toLocaleString()} today<span class="sub">${k.requests.month.toLocaleString()} this month</span>` : html`<span class="muted">—</span>`}${k.refused && k.refused.endpoint > 0 ? html`<span class="sub" data-slot="refused" title="Requests refused by the endpoint rule: unknown, stateful or unbillable endpoints, objects of another account">refused: endpoint ${k.refused.endpoint.toLocaleString()}</span>` : nothing}</td>
    <td class="nowrap">
      ${k.limit
        ? html`${money(spent)} of ${money(k.limit.amount_micros)} ${cur} ${periodWord(k.limit.period)}
            <meter min="0" max=${k.limit.amount_micros} high=${Math.round(k.limit.amount_micros * 0.8)} value=${Math.min(spent, k.limit.amount_micros)}
              aria-label="Spend of ${k.name} against its limit"></meter>`
        : html`${money(spent)} ${cur} <span class="muted">(no limit)</span>`}
    </td>
    ${showTokens ? tokensCell(k) : nothing} ${showRates ? ratesCell(k) : nothing}
    <td class="row-actions">
      <button type="button" id="${id}-usage-toggle" aria-expanded=${state.usage.has(k.id) ? 'true' : 'false'}
        aria-controls=${state.usage.has(k.id) ? `${id}-usage` : nothing} aria-describedby="${id}-title"
        @click=${() => void onUsage(k)}>30 days</button>
      ${k.status === 'active' && can('change', k)
        ? html`<button type="button" id="${id}-reveal" ?disabled=${busy} @click=${() => void onReveal(k)} aria-describedby="${id}-title">Reveal</button>
            <button type="button" id="${id}-edit" @click=${() => openDialog({ kind: 'edit', key: k, errors: {}, busy: false })} aria-describedby="${id}-title">Edit</button>
            ${k.rolled_to
              ? nothing
              : html`<button type="button" id="${id}-roll" @click=${() => openDialog({ kind: 'roll', key: k, busy: false })} aria-describedby="${id}-title">Roll</button>`}
            <button type="button" id="${id}-revoke" class="danger" @click=${() => openDialog({ kind: 'revoke', key: k, busy: false })} aria-describedby="${id}-title">
              Revoke
            </button>`
        : k.status === 'active' ? nothing : html`<span class="muted">Refused</span>`}
    </td>
  </tr>`;
}

/** A rolled key still in its grace period: which key replaced it, and until when it works. */
function rolledNote(k: Key): string {
  const list = state.keys.state === 'ok' ? state.keys.value.keys : [];
  const next = list.find((x) => x.id === k.rolled_to);
  const by = next ? `${next.name} (${next.hint})` : k.rolled_to;
  return k.expires_at ? `Rolled: replaced by ${by}; this key works until ${whenZoned(k.expires_at)}.` : `Rolled: replaced by ${by}.`;
}

const currency = () => (state.account.state === 'ok' ? (state.account.value.currency ?? 'USD') : '');

function accountView(): TemplateResult {
  const a = state.account;
  let balance: TemplateResult;
  if (a.state === 'loading') balance = html`<p class="muted" role="status">Loading balance…</p>`;
  else if (a.state === 'error')
    balance = html`<p class="error">The balance could not be loaded: ${a.message} <button type="button" @click=${() => void loadAccount()}>Try again</button></p>`;
  else {
    const w = a.value.wallet;
    const cur = a.value.currency ?? 'USD';
    const noWallet = !w || w.exists === false;
    balance = html`<dl class="facts">
        <div>
          <dt>Balance</dt>
          <dd>
            ${noWallet
              ? html`<span class="balance">No wallet</span>
                  <span class="muted">${w?.rule === 'mixed'
                    ? 'Some of the sidecars require a wallet: requests may be refused until the account is credited.'
                    : w?.enforced
                      ? 'This deployment requires a wallet: requests are refused until the account is credited.'
                      : 'Requests are not limited by a balance.'}</span>`
              : html`<span class="balance ${w.balance_micros <= 0 ? 'low' : ''}">${money(w.balance_micros)} ${cur}</span>
                  ${w.balance_micros < 0
                    ? html`<span class="error">The balance is below zero (owed): requests are refused until it is topped up.</span>`
                    : w.balance_micros === 0
                      ? html`<span class="error">The balance is zero: requests are refused until it is topped up.</span>`
                      : nothing}`}
          </dd>
        </div>
        <div data-slot="billing">
          <dt>Billing</dt>
          <dd>${a.value.billing === 'external'
            ? html`External <span class="muted">Your router books each request; batch, realtime and other unbillable endpoints are open.</span>`
            : html`Metered <span class="muted">The gateway books what each request used; endpoints whose usage it cannot read are refused.</span>`}</dd>
        </div>
      </dl>
      ${a.value.status === 'disabled' ? html`<p class="error">This account is disabled: every key is refused.</p>` : nothing}`;
  }
  return html`<section class="account card" aria-labelledby="account-title">
    <h2 id="account-title">Account</h2>
    ${balance} ${state.session ? credentialsView(state.session.account, read, update, () => void loadAudit()) : nothing} ${ledgerView()}
  </section>`;
}

function ledgerView(): TemplateResult {
  const l = state.ledger;
  let body: TemplateResult;
  if (l.state === 'loading') body = html`<p class="muted" role="status">Loading the ledger…</p>`;
  else if (l.state === 'error')
    body = html`<p class="error">The ledger could not be loaded: ${l.message} <button type="button" @click=${() => void loadLedger()}>Try again</button></p>`;
  else if (l.value.entries.length === 0 && state.ledgerCursors.length === 1) body = html`<p class="muted">No credits or charges yet.</p>`;
  else
    body = html`<div class="table-wrap" role="region" aria-labelledby="ledger-title" tabindex="0">
        <table class="ledger">
          <thead>
            <tr><th scope="col">Time</th><th scope="col">Type</th><th scope="col">Amount (${l.value.currency})</th><th scope="col">Reference</th><th scope="col">Key</th></tr>
          </thead>
          <tbody>
            ${l.value.entries.map(
              (e) => html`<tr>
                <td class="nowrap"><time datetime=${e.time}>${when(e.time)}</time></td>
                <td>${e.type === 'credit' ? 'Credit' : 'Charge'}</td>
                <td class="num ${e.amount_micros < 0 ? 'neg' : 'pos'}">${e.amount_micros > 0 ? '+' : ''}${money(e.amount_micros)}</td>
                <td>${e.reference ?? e.request_id ?? ''}${e.model ? html`<span class="sub">${e.model}</span>` : nothing}${e.price_rule ? html`<span class="sub price-rule" title="how this charge was priced">priced as ${e.priced_by ?? 'unpriced'} (${e.price_rule})</span>` : nothing}</td>
                <td>${e.key_id ? html`<code>${e.key_id}</code>` : nothing}</td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>
      <nav class="pager" aria-label="Pages of the ledger">
        <button type="button" ?disabled=${state.ledgerCursors.length <= 1} @click=${ledgerNewer}>Newer entries</button>
        <button type="button" ?disabled=${!l.value.next_cursor} @click=${ledgerOlder}>Older entries</button>
      </nav>`;
  return html`<section class="ledger-section" aria-labelledby="ledger-title">
    <div class="section-head">
      <h3 id="ledger-title">Ledger</h3>
      <button type="button" @click=${() => void exportCsv()} ?disabled=${l.state !== 'ok' || (l.value.entries.length === 0 && state.ledgerCursors.length === 1)}>Export CSV</button>
    </div>
    <p class="muted">Credits and charges, newest first.</p>
    ${body}
    <p class="notice" role="status" aria-live="polite">${state.ledgerNote}</p>
  </section>`;
}

const ACTION_WORDS: Record<string, string> = {
  create: 'Key created',
  update: 'Key changed',
  reveal: 'Key revealed',
  roll: 'Key rolled',
  revoke: 'Key revoked',
  disable: 'Account disabled',
  enable: 'Account enabled',
  credit: 'Wallet credited',
  token_create: 'Token created',
  token_revoke: 'Token revoked',
  credential_set: 'Upstream credential set',
  credential_remove: 'Upstream credential removed',
};

function auditView(): TemplateResult {
  const a = state.audit;
  let body: TemplateResult;
  if (a.state === 'loading') body = html`<p class="muted" role="status">Loading the audit log…</p>`;
  else if (a.state === 'error') body = html`<p class="error">The audit log could not be loaded: ${a.message} <button type="button" @click=${() => void loadAudit()}>Try again</button></p>`;
  else if (a.value.length === 0) body = html`<p class="muted">No events yet.</p>`;
  else
    body = html`<ol class="audit">
      ${a.value.map(
        (e) => html`<li>
          <time datetime=${e.time}>${when(e.time)}</time>
          <strong>${ACTION_WORDS[e.action] ?? PEOPLE_ACTION_WORDS[e.action] ?? e.action}</strong>
          ${e.key_id ? html`<code>${e.key_id}</code>` : nothing}
          <span class="muted">by ${actorWords(e.actor)}</span>
          ${Object.keys(e.changes).length ? html`<span class="sub">${changesText(e.changes)}</span>` : nothing}
        </li>`,
      )}
    </ol>`;
  return html`<section class="card audit-section" aria-labelledby="audit-title">
    <h2 id="audit-title">Audit</h2>
    <p class="muted">The latest changes to this account's keys and wallet, newest first.</p>
    ${body}
  </section>`;
}

function changesText(c: Record<string, unknown>): string {
  return Object.entries(c)
    .slice(0, 6)
    .map(([k, v]) => `${k.replace(/_/g, ' ')}: ${v === null ? 'none' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' · ');
}

function dialogView(d: Dialog): TemplateResult {
  const titleId = 'dialog-title';
  let body: TemplateResult;
  switch (d.kind) {
    case 'create':
      body = keyForm(d, 'Create key', 'Create', onCreate);
      break;
    case 'edit':
      body = keyForm(d, `Edit “${d.key.name}”`, 'Save', onEdit, d.key);
      break;
    case 'roll':
      body = html`<form @submit=${onRoll} novalidate>
        <h2 id=${titleId}>Roll “${d.key.name}”?</h2>
        <p>A new key with the same restrictions replaces this one; it is named “${rolledName(d.key.name)}”. You will see the new key once.</p>
        <label for="grace">The old key stops working</label>
        <select id="grace" name="grace">
          ${GRACES.map(([s, label]) => html`<option value=${s}>${label}</option>`)}
        </select>
        ${d.error ? html`<p class="error" role="alert">${d.error}</p>` : nothing}
        <div class="actions">
          <button type="submit" class="primary" ?disabled=${d.busy}>Confirm</button>
          <button type="button" @click=${closeDialog}>Cancel</button>
        </div>
      </form>`;
      break;
    case 'revoke':
      body = html`<form @submit=${onRevoke} novalidate>
        <h2 id=${titleId}>Revoke “${d.key.name}”?</h2>
        <p>Requests with this key (<code>${d.key.hint}</code>) are refused from the next one on. This cannot be undone.</p>
        ${d.error ? html`<p class="error" role="alert">${d.error}</p>` : nothing}
        <div class="actions">
          <button type="submit" class="danger" ?disabled=${d.busy}>Confirm</button>
          <button type="button" @click=${closeDialog} autofocus>Cancel</button>
        </div>
      </form>`;
      break;
    case 'secret':
      body = html`<div>
        <h2 id=${titleId}>${d.title}: “${d.keyName}”</h2>
        <p>${d.intro}</p>
        <p class="warning"><strong>You will not see this key again unless you reveal it.</strong></p>
        <label for="secret">Key</label>
        <div class="secret-row">
          <input id="secret" type="text" readonly .value=${d.secret} spellcheck="false" autocomplete="off" @focus=${selectAll} />
          <button type="button" class="primary" @click=${onCopy}>Copy</button>
        </div>
        <p class="notice" role="status" aria-live="polite">${d.copied ?? ''}</p>
        <div class="actions">
          <button type="button" @click=${closeDialog}>Done</button>
        </div>
      </div>`;
      break;
  }
  // Escape closes a dialog natively ('close'); only the dialog on screen may close the state's dialog.
  const seq = state.dialogSeq;
  const onClose = () => seq === state.dialogSeq && closeDialog();
  return html`<dialog aria-labelledby=${titleId} @close=${onClose}>${body}</dialog>`;
}

const selectAll = (e: Event) => (e.currentTarget as HTMLInputElement).select();

const FIELD_WORDS: Record<Field, string> = { name: 'Name', models: 'Models', expires: 'Expires', limit: 'Limit', rate: 'Rate', token_rate: 'Token rate' };

function keyForm(
  d: { errors: FieldErrors; busy: boolean },
  title: string,
  submit: string,
  onSubmit: (e: SubmitEvent) => void,
  k?: Key,
): TemplateResult {
  const e = d.errors;
  const v = prefill ?? {};
  const described = (f: Field, help?: string) => [help, e[f] ? `f-${f}-error` : undefined].filter(Boolean).join(' ') || nothing;
  const err = (f: Field) => (e[f] ? html`<p class="error" id="f-${f}-error">${e[f]}</p>` : nothing);
  const invalid = (f: Field) => (e[f] ? 'true' : 'false');
  const wrong = KEY_FIELDS.filter((f) => e[f]);
  // What a plain model name counts as here, from the live sidecars (null: they differ, none said, or not loaded).
  const plainHelp = plainNameWords(state.account.state === 'ok' ? state.account.value.bare_models?.openai : undefined);
  // Typing in a field clears the error shown for it.
  const onInput = (ev: Event) => {
    const name = (ev.target as HTMLInputElement).name;
    const f: Field | undefined = name === 'period' ? 'limit' : KEY_FIELDS.find((x) => x === name);
    if (f && e[f]) {
      delete e[f];
      update();
    }
  };
  const now = localInput(Date.now() + 60_000);
  return html`<form @submit=${onSubmit} @input=${onInput} novalidate>
    <h2 id="dialog-title">${title}</h2>
    ${wrong.length
      ? html`<p class="error summary" role="alert">
          ${wrong.length === 1 ? `Check ${FIELD_WORDS[wrong[0]!]}.` : `Check ${wrong.length} fields: ${wrong.map((f) => FIELD_WORDS[f]).join(', ')}.`}
        </p>`
      : nothing}
    <div class="field">
      <label for="f-name">Name</label>
      <input id="f-name" name="name" type="text" maxlength=${KEY_LIMITS.nameMaxChars} autocomplete="off" required autofocus .value=${v.name ?? k?.name ?? ''}
        aria-invalid=${invalid('name')} aria-describedby=${described('name')} />
      ${err('name')}
    </div>
    <div class="field">
      <label for="f-models">Models</label>
      <input id="f-models" name="models" type="text" autocomplete="off" spellcheck="false" placeholder="All models"
        .value=${v.models ?? k?.models?.join(', ') ?? ''} aria-invalid=${invalid('models')} aria-describedby=${described('models', 'f-models-help')} />
      <p class="help" id="f-models-help">Empty allows every model. Separate entries with commas: <code>openai/gpt-4o-mini</code>,
        <code>anthropic/*</code>. ${plainHelp === null
          ? html`A request must name a listed model: <code>openai/gpt-4o-mini</code> matches a request for
        <code>openai/gpt-4o-mini</code>, and a plain <code>gpt-4o-mini</code> only where the gateway reads plain names as OpenAI's
        (or list the plain name too).`
          : `A request must name a listed model. ${plainHelp}`}</p>
      ${err('models')}
    </div>
    <div class="field">
      <label for="f-expires">Expires</label>
      <input id="f-expires" name="expires" type="datetime-local" min=${now} .value=${v.expires ?? localInput(k?.expires_at ?? null)}
        aria-invalid=${invalid('expires')} aria-describedby=${described('expires', 'f-expires-help')} />
      <p class="help" id="f-expires-help">Empty never expires. The key stops working at this time, in your time zone (${timeZoneName()}).</p>
      ${err('expires')}
    </div>
    <div class="field">
      <label for="f-limit">Limit</label>
      <div class="limit-row">
        <input id="f-limit" name="limit" type="text" inputmode="decimal" autocomplete="off" placeholder="No limit"
          .value=${v.limit ?? (k?.limit ? amountInput(k.limit.amount_micros) : '')} aria-invalid=${invalid('limit')}
          aria-describedby=${described('limit', 'f-limit-help')} />
        <label for="f-period" class="visually-hidden">Limit period</label>
        <select id="f-period" name="period">
          ${PERIODS.map((p) => html`<option value=${p} ?selected=${(v.period ?? k?.limit?.period ?? 'month') === p}>per ${p === 'total' ? 'lifetime' : p}</option>`)}
        </select>
      </div>
      <p class="help" id="f-limit-help">In ${currency() || 'the deployment’s currency'}. Empty has no spend limit. Requests are refused once the key's spend reaches it.</p>
      ${err('limit')}
    </div>
    <div class="field">
      <label for="f-rate">Rate</label>
      <input id="f-rate" name="rate" type="text" autocomplete="off" spellcheck="false" placeholder="No rate" .value=${v.rate ?? rateInput(k?.rate)}
        aria-invalid=${invalid('rate')} aria-describedby=${described('rate', 'f-rate-help')} />
      <p class="help" id="f-rate-help">Requests per unit, like <code>5/s</code> or <code>1000/m</code> (unit <code>s</code>, <code>m</code>, <code>h</code> or <code>d</code>). Empty has no request rate.</p>
      ${err('rate')}
    </div>
    <div class="field">
      <label for="f-token_rate">Token rate</label>
      <input id="f-token_rate" name="token_rate" type="text" autocomplete="off" spellcheck="false" placeholder="No token rate" .value=${v.token_rate ?? rateInput(k?.token_rate)}
        aria-invalid=${invalid('token_rate')} aria-describedby=${described('token_rate', 'f-token_rate-help')} />
      <p class="help" id="f-token_rate-help">Tokens (input and output) per unit, like <code>100000/h</code>. Empty has no token rate.</p>
      ${err('token_rate')}
    </div>
    ${e.form ? html`<p class="error" role="alert">${e.form}</p>` : nothing}
    <div class="actions">
      <button type="submit" class="primary" ?disabled=${d.busy}>${submit}</button>
      <button type="button" @click=${closeDialog}>Cancel</button>
      ${d.busy ? html`<span class="muted" role="status">Saving…</span>` : nothing}
    </div>
  </form>`;
}

void start();
