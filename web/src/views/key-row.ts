/**
 * One key's row of the table: name, id (Copy), hint, status, models, expiry, last use, requests,
 * spend against the limit, the tokens and rates slots, and its actions (30 days, Reveal, Edit,
 * Roll, Revoke); and the row under it with the key's 30-day usage.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { api, type Key, type KeyState } from '../api.ts';
import { money, periodWord, rateWords, useWords, when, whenZoned } from '../format.ts';
import { sessionEnded } from '../session.ts';
import { authEndNotice, currency, isAuthEnd, message, openDialog, setLastOpener, state, update } from '../state.ts';
import { usageChart } from '../usage-chart.ts';
import { can } from './people.ts';

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
export function usageRow(k: Key, columns: number): TemplateResult {
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
    setLastOpener(`key-${k.id}-reveal`);
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

export function keyRow(k: Key, showTokens: boolean, showRates: boolean): TemplateResult {
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
