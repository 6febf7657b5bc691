/** The audit section: the account's latest 20 events, who made them and what changed. */
import { html, nothing, type TemplateResult } from 'lit-html';
import { when } from '../format.ts';
import { loadAudit } from '../session.ts';
import { state } from '../state.ts';
import { actorWords, PEOPLE_ACTION_WORDS } from './people.ts';

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

export function auditView(): TemplateResult {
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
