/**
 * The page's frame: the header (who is signed in, the account, Sign out), the offline bar, the
 * sign-in form, the keys page's head (Create key) with its sections, and the dialog on screen.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { keyed } from 'lit-html/directives/keyed.js';
import { onPickAccount, onSignIn, onSignOut } from '../session.ts';
import { openDialog, setLastOpener, state } from '../state.ts';
import { accountView } from './account.ts';
import { auditView } from './audit.ts';
import { dialogView } from './dialogs.ts';
import { keysView } from './keys.ts';
import { can, membersView, personBar, ssoView } from './people.ts';

export function view(): TemplateResult {
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
          setLastOpener('create-key');
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
