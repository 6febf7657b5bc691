/**
 * The keys section: search, status filter and sort, the table of one page of keys (its rows are
 * key-row.ts), the count and the pager. The list is paged with the API's cursor.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import type { KeySort, StatusFilter } from '../api.ts';
import { loadKeys } from '../session.ts';
import { state, type ListQuery } from '../state.ts';
import { keyRow, usageRow } from './key-row.ts';

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

export function keysView(): TemplateResult {
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
