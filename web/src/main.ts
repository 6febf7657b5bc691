/**
 * The "API keys" page: sign in with an account's management token (exchanged for a session
 * cookie), list the account's keys and wallet balance, create, reveal, edit, roll and revoke keys.
 * Rendered with lit-html (escaped templates, no innerHTML); one state object, one render function.
 */
import { render } from 'lit-html';
import { start } from './session.ts';
import { drawWith, root, state } from './state.ts';
import { view } from './views/page.ts';

root.replaceChildren(); // drop the static "Loading…" placeholder: lit-html renders into an empty container

drawWith(() => {
  render(view(), root);
  const dialog = root.querySelector('dialog');
  if (dialog && !dialog.open) dialog.showModal();
  if (state.focusId) {
    const el = document.getElementById(state.focusId);
    state.focusId = null;
    el?.focus();
  }
});

void start();
