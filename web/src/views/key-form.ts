/**
 * The create and edit form of a key: its fields (name, models, expiry, limit, rates), the checks
 * made before any request (the API's rules, src/core/), the API's refusals put next to the field
 * they name, and the create and edit requests.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { amountProblem, expiryProblem, KEY_LIMITS, modelsProblem, nameProblem, parseAmountText, splitModels } from '../../../src/core/key-rules.ts';
import { formatRate, parseRateText, RATE_UNITS, rateProblem, type Rate, type RateUnit } from '../../../src/core/rate-text.ts';
import { api, ApiError, type ApiRate, type ApiTokenRate, type Key, type KeyPatch, type Limit, type NewKeyInput } from '../api.ts';
import { PERIODS, amountInput, fieldOf, fromLocalInput, localInput, plainNameWords, rateRefusalWords, timeZoneName, type Field } from '../format.ts';
import { reload, sessionEnded } from '../session.ts';
import { authEndNotice, closeDialog, currency, isAuthEnd, message, openDialog, prefilled, state, update, type Dialog, type FieldErrors } from '../state.ts';
import { createdByMe } from './people.ts';

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
export function dialogFailed(d: Exclude<Dialog, { kind: 'secret' }>, err: unknown): void {
  if (isAuthEnd(err)) return sessionEnded(authEndNotice(err));
  d.busy = false;
  if (d.kind === 'create' || d.kind === 'edit') return showFormErrors(d, apiErrors(err));
  d.error = message(err);
  update();
}

let createIdem: { body: string; key: string } | null = null;

export async function onCreate(e: SubmitEvent): Promise<void> {
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

export async function onEdit(e: SubmitEvent): Promise<void> {
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
const FIELD_WORDS: Record<Field, string> = { name: 'Name', models: 'Models', expires: 'Expires', limit: 'Limit', rate: 'Rate', token_rate: 'Token rate' };

export function keyForm(
  d: { errors: FieldErrors; busy: boolean },
  title: string,
  submit: string,
  onSubmit: (e: SubmitEvent) => void,
  k?: Key,
): TemplateResult {
  const e = d.errors;
  const v = prefilled() ?? {};
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
