/**
 * The account panel's "Upstream credentials" section (docs/credentials.md): which providers the
 * account has its own credential for (provider, last four, when set), a form to set or replace one
 * and a Remove button per provider. The secret is typed into a password field, sent once and
 * cleared; the page never shows it back (the API never returns it).
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { api, type Credential } from '../api.ts';
import type { Load } from '../state.ts';
import { CREDENTIAL_MAX_CHARS, credentialProblem } from '../../../src/core/upstream-credential.ts';

/** The page's read: a 401 ends the session (null); another error is this section's. */
type Read = <T>(f: () => Promise<T>) => Promise<Load<T> | null>;

const PROVIDERS = [
  ['openai', 'OpenAI'],
  ['anthropic', 'Anthropic'],
  ['google', 'Google'],
] as const;

let list: Load<Credential[]> = { state: 'loading' };
let busy = false;
let error = '';
let note = '';
let shownFor = '';

export async function loadCredentials(account: string, read: Read, update: () => void): Promise<void> {
  if (account !== shownFor) {
    // another account signed in: nothing of the last one's stays on the page
    list = { state: 'loading' };
    error = note = '';
    shownFor = account;
  }
  const r = await read(() => api.credentials(account));
  if (r === null) return;
  list = r;
  update();
}

/** Called after a change was made (the page reloads its audit section). */
let changed: () => void = () => {};

async function change(account: string, read: Read, update: () => void, f: () => Promise<unknown>, done: string): Promise<void> {
  busy = true;
  error = '';
  note = '';
  update();
  const r = await read(f);
  busy = false;
  if (r === null) return;
  if (r.state === 'error') error = r.message;
  else {
    note = done;
    changed();
  }
  await loadCredentials(account, read, update);
}

function onSubmit(e: Event, account: string, read: Read, update: () => void): void {
  e.preventDefault();
  const form = e.target as HTMLFormElement;
  const provider = (form.elements.namedItem('provider') as HTMLSelectElement).value;
  const field = form.elements.namedItem('credential') as HTMLInputElement;
  const secret = field.value.trim();
  field.value = ''; // the secret leaves the page's memory with this request
  const problem = credentialProblem(secret);
  if (problem !== null) {
    error = `${problem[0]!.toUpperCase()}${problem.slice(1)}.`;
    note = '';
    update();
    return;
  }
  const name = PROVIDERS.find(([p]) => p === provider)?.[1] ?? provider;
  void change(account, read, update, () => api.setCredential(account, provider, secret), `The ${name} credential is set: this account's requests to ${name} use it from the next one.`);
}

export function credentialsView(account: string, read: Read, update: () => void, onChange: () => void = () => {}): TemplateResult {
  changed = onChange;
  let body: TemplateResult;
  if (list.state === 'loading') body = html`<p class="muted" role="status">Loading the credentials…</p>`;
  else if (list.state === 'error') body = html`<p class="error">The credentials could not be loaded: ${list.message}</p>`;
  else if (list.value.length === 0) body = html`<p class="muted">None: this account's requests go upstream with the gateway's own credentials.</p>`;
  else
    body = html`<ul class="credentials">
      ${list.value.map((c) => {
        const name = PROVIDERS.find(([p]) => p === c.provider)?.[1] ?? c.provider;
        return html`<li>
          <strong>${name}</strong> <code>…${c.hint}</code> <span class="muted">set <time datetime=${c.set_at}>${new Date(c.set_at).toLocaleString()}</time></span>
          <button type="button" aria-label=${`Remove the ${name} credential`} ?disabled=${busy}
            @click=${() => void change(account, read, update, () => api.removeCredential(account, c.provider), `The ${name} credential is removed: the gateway's own is used from the next request.`)}>Remove</button>
        </li>`;
      })}
    </ul>`;
  return html`<section class="credentials-section" aria-labelledby="credentials-title">
    <h3 id="credentials-title">Upstream credentials</h3>
    <p class="muted">This account's own provider keys, used in place of the gateway's. They are stored encrypted and never shown again.</p>
    ${body}
    <form class="credential-form" @submit=${(e: Event) => onSubmit(e, account, read, update)}>
      <label>Provider
        <select name="provider">${PROVIDERS.map(([p, n]) => html`<option value=${p}>${n}</option>`)}</select>
      </label>
      <label>Credential
        <input name="credential" type="password" autocomplete="off" spellcheck="false" maxlength=${CREDENTIAL_MAX_CHARS} required />
      </label>
      <button type="submit" ?disabled=${busy}>Save credential</button>
    </form>
    ${error ? html`<p class="error" role="alert">${error}</p>` : nothing}
    <p class="notice" role="status" aria-live="polite">${note}</p>
  </section>`;
}
