/**
 * The account panel: the balance (or no wallet) and billing, the upstream credentials
 * (credentials.ts), and the ledger with its pages and the CSV export.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { api, type LedgerPage } from '../api.ts';
import { csvLine, decimal, money, when } from '../format.ts';
import { loadAccount, loadAudit, loadLedger, read, sessionEnded } from '../session.ts';
import { authEndNotice, isAuthEnd, message, state, update } from '../state.ts';
import { credentialsView } from './credentials.ts';

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

export function accountView(): TemplateResult {
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
