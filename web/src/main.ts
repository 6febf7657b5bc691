/**
 * The "API keys" page: sign in with an account's management token (exchanged for a session
 * cookie), list the account's keys and wallet balance, create, reveal, edit, roll and revoke keys.
 * Rendered with lit-html (escaped templates, no innerHTML); one state object, one render function.
 */
import { html, nothing, render, type TemplateResult } from 'lit-html';
import { keyed } from 'lit-html/directives/keyed.js';
import { api, ApiError, type Account, type Key, type KeyPatch, type Limit, type NewKeyInput, type Session } from './api.ts';
import {
  PERIODS,
  amountInput,
  dateInput,
  expiryFromDate,
  expiryLabel,
  fieldOf,
  isExpired,
  money,
  parseAmount,
  parseModels,
  periodWord,
  when,
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

interface State {
  phase: 'checking' | 'signed-out' | 'signed-in';
  session: Session | null;
  signIn: { busy: boolean; error?: string; notice?: string };
  account: Load<Account>;
  keys: Load<Key[]>;
  dialog: Dialog | null;
  dialogSeq: number;
  rowError: Map<string, string>;
  rowBusy: Set<string>;
  notice: string;
  focusId: string | null;
}

const state: State = {
  phase: 'checking',
  session: null,
  signIn: { busy: false },
  account: { state: 'loading' },
  keys: { state: 'loading' },
  dialog: null,
  dialogSeq: 0,
  rowError: new Map(),
  rowBusy: new Set(),
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
  void reload();
}

/** The session ended (expired, signed out elsewhere, or its token was revoked). */
function sessionEnded(notice: string): void {
  api.forget();
  state.session = null;
  state.phase = 'signed-out';
  state.dialog = null;
  state.keys = { state: 'loading' };
  state.account = { state: 'loading' };
  state.rowError.clear();
  state.signIn = { busy: false, notice };
  state.focusId = 'token';
  update();
}

async function onSignIn(e: SubmitEvent): Promise<void> {
  e.preventDefault();
  const input = (e.currentTarget as HTMLFormElement).elements.namedItem('token') as HTMLInputElement;
  const token = input.value.trim();
  if (!token) {
    state.signIn = { busy: false, error: 'Enter the management token of your account.' };
    state.focusId = 'token';
    return update();
  }
  state.signIn = { busy: true };
  update();
  try {
    const s = await api.signIn(token);
    input.value = ''; // the token does not stay in the page
    signedIn(s);
  } catch (err) {
    state.signIn = { busy: false, error: message(err) };
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
  sessionEnded('You are signed out.');
}

// ---------------------------------------------------------------- data

async function reload(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  if (state.keys.state !== 'ok') state.keys = { state: 'loading' };
  if (state.account.state !== 'ok') state.account = { state: 'loading' };
  update();
  const [keys, acct] = await Promise.allSettled([api.keys(account), api.account(account)]);
  for (const r of [keys, acct]) {
    if (r.status === 'rejected' && isAuthEnd(r.reason)) return sessionEnded(authEndNotice(r.reason));
  }
  state.keys = keys.status === 'fulfilled' ? { state: 'ok', value: sortKeys(keys.value) } : { state: 'error', message: message(keys.reason) };
  state.account = acct.status === 'fulfilled' ? { state: 'ok', value: acct.value } : { state: 'error', message: message(acct.reason) };
  update();
}

const sortKeys = (keys: Key[]) =>
  [...keys].sort((a, b) => (a.status === b.status ? b.created_at.localeCompare(a.created_at) : a.status === 'active' ? -1 : 1));

const isAuthEnd = (err: unknown) => err instanceof ApiError && err.status === 401;
const authEndNotice = (_err: unknown) => 'Your session has ended. Sign in again.';

function message(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  return 'Something went wrong. Try again.';
}

// ---------------------------------------------------------------- dialogs

function openDialog(d: Dialog): void {
  state.dialog = d;
  state.dialogSeq++;
  update();
}

function closeDialog(): void {
  if (!state.dialog) return;
  const d = state.dialog;
  state.dialog = null;
  // Give focus back to where the user was: the row's control, or the row itself after a revoke.
  if (d.kind === 'create' || d.kind === 'secret') state.focusId = lastOpener ?? 'create-key';
  else state.focusId = d.kind === 'revoke' ? `key-${d.key.id}-title` : `key-${d.key.id}-${d.kind}`;
  lastOpener = null;
  update();
}
let lastOpener: string | null = null;

/** Reads the key form; returns the input or the errors found before any request. */
function readKeyForm(form: HTMLFormElement): { values: KeyFormValues; errors: FieldErrors } {
  const get = (n: string) => ((form.elements.namedItem(n) as HTMLInputElement | HTMLSelectElement | null)?.value ?? '').trim();
  const values: KeyFormValues = {
    name: get('name'),
    models: parseModels(get('models')),
    expires: get('expires'),
    limit: get('limit'),
    period: (get('period') || 'month') as Limit['period'],
  };
  const errors: FieldErrors = {};
  if (!values.name) errors.name = 'Give the key a name, so you can recognise it later.';
  if (values.limit && parseAmount(values.limit) === null)
    errors.limit = 'Enter a positive amount with at most 6 decimals, like 25 or 12.50.';
  if (values.expires && !/^\d{4}-\d{2}-\d{2}$/.test(values.expires)) errors.expires = 'Enter a date, like 2030-01-31.';
  return { values, errors };
}

interface KeyFormValues {
  name: string;
  models: string[];
  expires: string;
  limit: string;
  period: Limit['period'];
}

const limitOf = (v: KeyFormValues): Limit | null => (v.limit ? { amount_micros: parseAmount(v.limit)!, period: v.period } : null);

/** Puts an API error next to the field it names, or at the form's foot. */
function apiErrors(err: unknown): FieldErrors {
  const msg = message(err);
  const field = err instanceof ApiError && (err.status === 400 || err.status === 422) ? fieldOf(msg) : null;
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
  if (values.expires) input.expires_at = expiryFromDate(values.expires);
  const limit = limitOf(values);
  if (limit) input.limit = limit;
  // A retried submit of the same form (say after a lost answer) makes one key, not two.
  const body = JSON.stringify(input);
  if (createIdem?.body !== body) createIdem = { body, key: crypto.randomUUID() };
  d.busy = true;
  d.errors = {};
  update();
  try {
    const created = await api.create(state.session!.account, input, createIdem.key);
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
  const first = (['name', 'models', 'expires', 'limit'] as const).find((f) => errors[f]);
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
  if (values.expires !== dateInput(k.expires_at)) patch.expires_at = values.expires ? expiryFromDate(values.expires) : null;
  const limit = limitOf(values);
  if (JSON.stringify(limit) !== JSON.stringify(k.limit ?? null)) patch.limit = limit;
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
    const rolled = await api.roll(d.key.id, grace);
    openDialog({
      kind: 'secret',
      title: 'Key rolled',
      intro:
        grace > 0
          ? `This new key replaces “${d.key.name}”, whose old value keeps working for ${graceWords(grace)}.`
          : `This new key replaces “${d.key.name}”; the old value no longer works.`,
      keyName: rolled.name,
      secret: rolled.key,
    });
    lastOpener = `key-${d.key.id}-title`;
    state.notice = `Key “${d.key.name}” rolled.`;
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
    state.notice = `Key “${d.key.name}” revoked.`;
    closeDialog();
    void reload();
  } catch (err) {
    dialogFailed(d, err);
  }
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
        ? html`<span class="who">Account <strong>${state.session.account}</strong></span>
            <button type="button" class="link" @click=${onSignOut}>Sign out</button>`
        : nothing}
    </header>
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
      ${s.notice ? html`<p class="notice" role="status">${s.notice}</p>` : nothing}
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
  `;
}

function keysPage(): TemplateResult {
  return html`
    <div class="page-head">
      <h1 id="page-title" tabindex="-1">API keys</h1>
      <button
        type="button"
        class="primary"
        id="create-key"
        @click=${() => {
          lastOpener = 'create-key';
          openDialog({ kind: 'create', errors: {}, busy: false });
        }}
      >
        Create key
      </button>
    </div>
    ${walletView()}
    <p class="muted intro">
      Send a key in the <code>Authorization: Bearer</code>, <code>x-api-key</code> or <code>x-goog-api-key</code> header.
      Keep keys on your server: never in client-side code or a repository.
    </p>
    <p class="notice live" role="status" aria-live="polite">${state.notice}</p>
    ${keysView()}
  `;
}

function walletView(): TemplateResult {
  const a = state.account;
  let body: TemplateResult;
  if (a.state === 'loading') body = html`<span class="muted">Loading balance…</span>`;
  else if (a.state === 'error') body = html`<span class="error">Balance unavailable: ${a.message}</span>`;
  else {
    const w = a.value.wallet;
    body = html`<span class="balance ${w && w.balance_micros <= 0 && w.enforced ? 'low' : ''}">${w ? money(w.balance_micros) : '—'}</span>
      ${w && !w.enforced ? html`<span class="muted">(no prepaid wallet yet: requests are not limited by balance)</span>` : nothing}
      ${w && w.enforced && w.balance_micros <= 0
        ? html`<span class="error">The wallet is empty: requests are refused until it is topped up.</span>`
        : nothing}
      ${a.value.status === 'disabled' ? html`<span class="error">This account is disabled: every key is refused.</span>` : nothing}`;
  }
  return html`<section class="wallet card" aria-labelledby="wallet-title">
    <h2 id="wallet-title">Wallet balance</h2>
    <p>${body}</p>
  </section>`;
}

function keysView(): TemplateResult {
  const k = state.keys;
  if (k.state === 'loading')
    return html`<section aria-labelledby="keys-title" aria-busy="true">
      <h2 id="keys-title" class="visually-hidden">Keys</h2>
      <p class="muted placeholder" role="status">Loading keys…</p>
    </section>`;
  if (k.state === 'error')
    return html`<section aria-labelledby="keys-title">
      <h2 id="keys-title" class="visually-hidden">Keys</h2>
      <div class="card failure" role="alert">
        <p><strong>The keys could not be loaded.</strong> ${k.message}</p>
        <button type="button" @click=${() => void reload()}>Try again</button>
      </div>
    </section>`;
  if (k.value.length === 0)
    return html`<section aria-labelledby="keys-title">
      <h2 id="keys-title" class="visually-hidden">Keys</h2>
      <div class="card empty">
        <p><strong>No keys yet.</strong></p>
        <p class="muted">Create a key to send requests to the gateway. You can restrict it to some models, give it an expiry
        date and a spend limit.</p>
      </div>
    </section>`;
  return html`<section aria-labelledby="keys-title">
    <h2 id="keys-title" class="visually-hidden">Keys</h2>
    <ul class="keys" role="list">
      ${k.value.map(keyRow)}
    </ul>
  </section>`;
}

function keyRow(k: Key): TemplateResult {
  const id = `key-${k.id}`;
  const expired = k.status === 'active' && isExpired(k.expires_at);
  const status = k.status === 'revoked' ? 'revoked' : expired ? 'expired' : 'active';
  const busy = state.rowBusy.has(k.id);
  const err = state.rowError.get(k.id);
  const spent = k.spend?.period_micros ?? 0;
  return html`<li class="key ${status}">
    <article aria-labelledby="${id}-title" aria-describedby="${id}-hint">
      <div class="key-head">
        <h3 id="${id}-title" tabindex="-1">${k.name}</h3>
        <span class="badge ${status}">${status}</span>
      </div>
      <p class="hint"><span class="visually-hidden">Key </span><code id="${id}-hint">${k.hint}</code></p>
      <dl class="facts">
        <div><dt>Models</dt><dd>${k.models?.length ? k.models.join(', ') : html`<span class="muted">All models</span>`}</dd></div>
        <div>
          <dt>Expires</dt>
          <dd>${k.expires_at ? html`<time datetime=${k.expires_at}>${expiryLabel(k.expires_at)}</time>` : html`<span class="muted">Never</span>`}</dd>
        </div>
        <div>
          <dt>Last used</dt>
          <dd>${k.last_used_at ? html`<time datetime=${k.last_used_at}>${when(k.last_used_at)}</time>` : html`<span class="muted">Not yet</span>`}</dd>
        </div>
        <div>
          <dt>Requests</dt>
          <dd>${k.requests ? html`${k.requests.today.toLocaleString()} today · ${k.requests.month.toLocaleString()} this month` : html`<span class="muted">—</span>`}</dd>
        </div>
        <div>
          <dt>Spend</dt>
          <dd>
            ${k.limit
              ? html`${money(spent)} of ${money(k.limit.amount_micros)} ${periodWord(k.limit.period)}
                  <meter min="0" max=${k.limit.amount_micros} high=${Math.round(k.limit.amount_micros * 0.8)} value=${Math.min(spent, k.limit.amount_micros)}
                    aria-label="Spend against limit"></meter>`
              : html`${money(spent)} <span class="muted">(no limit)</span>`}
            ${k.spend && k.spend.total_micros !== spent ? html`<span class="muted">· ${money(k.spend.total_micros)} in total</span>` : nothing}
          </dd>
        </div>
        <div><dt>Created</dt><dd><time datetime=${k.created_at}>${when(k.created_at)}</time></dd></div>
      </dl>
      ${k.status === 'active'
        ? html`<div class="actions row-actions">
            <button type="button" id="${id}-reveal" ?disabled=${busy} @click=${() => void onReveal(k)}>Reveal</button>
            <button type="button" id="${id}-edit" @click=${() => openDialog({ kind: 'edit', key: k, errors: {}, busy: false })}>Edit</button>
            ${k.rolled_to
              ? nothing
              : html`<button type="button" id="${id}-roll" @click=${() => openDialog({ kind: 'roll', key: k, busy: false })}>Roll</button>`}
            <button type="button" id="${id}-revoke" class="danger" @click=${() => openDialog({ kind: 'revoke', key: k, busy: false })}>
              Revoke
            </button>
            ${busy ? html`<span class="muted" role="status">Working…</span>` : nothing}
          </div>`
        : html`<p class="muted">Revoked ${when(k.revoked_at)}. Requests with this key are refused.</p>`}
      ${k.rolled_to && k.status === 'active' ? html`<p class="muted">${rolledNote(k)}</p>` : nothing}
      ${err ? html`<p class="error" role="alert">${err}</p>` : nothing}
    </article>
  </li>`;
}

/** A rolled key still in its grace period: which key replaced it, and until when it works. */
function rolledNote(k: Key): string {
  const list = state.keys.state === 'ok' ? state.keys.value : [];
  const next = list.find((x) => x.id === k.rolled_to);
  const by = next ? `${next.name} (${next.hint})` : 'a new key';
  return k.expires_at ? `Rolled: replaced by ${by}; this key works until ${when(k.expires_at)}.` : `Rolled: replaced by ${by}.`;
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
        <p>A new key with the same name and restrictions replaces this one. You will see the new key once.</p>
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

function keyForm(
  d: { errors: FieldErrors; busy: boolean },
  title: string,
  submit: string,
  onSubmit: (e: SubmitEvent) => void,
  k?: Key,
): TemplateResult {
  const e = d.errors;
  const described = (f: Field, help?: string) => [help, e[f] ? `f-${f}-error` : undefined].filter(Boolean).join(' ') || nothing;
  const err = (f: Field) => (e[f] ? html`<p class="error" id="f-${f}-error">${e[f]}</p>` : nothing);
  const invalid = (f: Field) => (e[f] ? 'true' : 'false');
  // Typing in a field clears the error shown for it.
  const onInput = (ev: Event) => {
    const name = (ev.target as HTMLInputElement).name;
    const f: Field | undefined = name === 'period' ? 'limit' : (['name', 'models', 'expires', 'limit'] as const).find((x) => x === name);
    if (f && e[f]) {
      delete e[f];
      update();
    }
  };
  return html`<form @submit=${onSubmit} @input=${onInput} novalidate>
    <h2 id="dialog-title">${title}</h2>
    <div class="field">
      <label for="f-name">Name</label>
      <input id="f-name" name="name" type="text" maxlength="128" autocomplete="off" required autofocus value=${k?.name ?? ''}
        aria-invalid=${invalid('name')} aria-describedby=${described('name')} />
      ${err('name')}
    </div>
    <div class="field">
      <label for="f-models">Models</label>
      <input id="f-models" name="models" type="text" autocomplete="off" spellcheck="false" placeholder="All models"
        value=${k?.models?.join(', ') ?? ''} aria-invalid=${invalid('models')} aria-describedby=${described('models', 'f-models-help')} />
      <p class="help" id="f-models-help">Empty allows every model. Separate entries with commas: <code>openai/gpt-4o</code>,
        <code>anthropic/*</code>.</p>
      ${err('models')}
    </div>
    <div class="field">
      <label for="f-expires">Expires</label>
      <input id="f-expires" name="expires" type="date" value=${dateInput(k?.expires_at ?? null)}
        aria-invalid=${invalid('expires')} aria-describedby=${described('expires', 'f-expires-help')} />
      <p class="help" id="f-expires-help">Empty never expires. The key stops working at 00:00 UTC on this date.</p>
      ${err('expires')}
    </div>
    <div class="field">
      <label for="f-limit">Limit</label>
      <div class="limit-row">
        <input id="f-limit" name="limit" type="text" inputmode="decimal" autocomplete="off" placeholder="No limit"
          value=${k?.limit ? amountInput(k.limit.amount_micros) : ''} aria-invalid=${invalid('limit')}
          aria-describedby=${described('limit', 'f-limit-help')} />
        <label for="f-period" class="visually-hidden">Limit period</label>
        <select id="f-period" name="period">
          ${PERIODS.map((p) => html`<option value=${p} ?selected=${(k?.limit?.period ?? 'month') === p}>per ${p === 'total' ? 'lifetime' : p}</option>`)}
        </select>
      </div>
      <p class="help" id="f-limit-help">Empty has no spend limit. Requests are refused once the key's spend reaches it.</p>
      ${err('limit')}
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
