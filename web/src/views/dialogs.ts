/**
 * The dialog on screen: create and edit (the key form, key-form.ts), roll, revoke, and the secret
 * shown once (Copy); the roll's and revoke's requests.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { api } from '../api.ts';
import { rolledName } from '../format.ts';
import { reload } from '../session.ts';
import { closeDialog, openDialog, setLastOpener, state, update, type Dialog } from '../state.ts';
import { dialogFailed, keyForm, onCreate, onEdit } from './key-form.ts';
import { createdByMe } from './people.ts';

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
    setLastOpener('keys-title');
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

export function dialogView(d: Dialog): TemplateResult {
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
