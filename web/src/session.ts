/**
 * The page's session and reads: starting, signing in and out, a session that ends (keeping the form
 * being typed), and loading what the page shows (keys, account, ledger, audit, credentials).
 */
import { api, type Session } from './api.ts';
import { loadCredentials } from './views/credentials.ts';
import { loadPeople, pickAccount } from './views/people.ts';
import { authEndNotice, isAuthEnd, message, openDialog, root, state, update, type Load } from './state.ts';

export async function start(): Promise<void> {
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
export function sessionEnded(notice: string, keep = true): void {
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

export async function onSignIn(e: SubmitEvent): Promise<void> {
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

export async function onSignOut(): Promise<void> {
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
export async function reload(): Promise<void> {
  await Promise.all([loadKeys(), loadAccount(), loadLedger(), loadAudit(), state.session ? loadCredentials(state.session.account, read, update) : undefined]);
}

/** Runs a read; a 401 ends the session (with the server's reason); else the error is the section's. */
export async function read<T>(f: () => Promise<T>): Promise<Load<T> | null> {
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
export async function loadKeys(): Promise<void> {
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

export async function loadAccount(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const r = await read(() => api.account(account));
  if (r === null) return;
  state.account = r;
  update();
}

export async function loadLedger(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const r = await read(() => api.ledger(account, state.ledgerCursors[state.ledgerCursors.length - 1] ?? null));
  if (r === null) return;
  state.ledger = r;
  update();
}

export async function loadAudit(): Promise<void> {
  const account = state.session?.account;
  if (!account) return;
  const r = await read(() => api.audit(account));
  if (r === null) return;
  state.audit = r;
  update();
}

/** A person in several accounts picks another ("Account" select). */
export async function onPickAccount(account: string): Promise<void> {
  try {
    signedIn(await pickAccount(account));
  } catch (err) {
    if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
    state.notice = message(err);
    update();
  }
}
