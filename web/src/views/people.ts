/**
 * People on the "API keys" page (sign-in with SSO, docs/web-console.md): the "Sign in with SSO"
 * button, who is signed in and the "Account" select, what the person's role lets them use (the page
 * leaves out the controls the API would refuse; the API decides), the "Members" section for owners,
 * and the audit log's words for people and member changes.
 */
import { html, nothing, type TemplateResult } from 'lit-html';
import { api, call, ssoOffered, type AuditEvent, type Key, type Session } from '../api.ts';
import { message } from '../state.ts';

type Role = 'owner' | 'developer' | 'viewer';

interface Member {
  id: string;
  account: string;
  email: string | null;
  subject: string | null;
  role: Role;
  source: 'manual' | 'claim';
  created_at: string;
  updated_at: string;
}

const people = {
  /** The signed-in person's role (null: a token's session, which may use everything of its account). */
  role: null as Role | null,
  createdKeys: new Set<string>(),
  members: null as Member[] | null,
  membersError: '',
  addError: '',
  addBusy: false,
  rowError: new Map<string, string>(),
};

let redraw: () => void = () => {};
let account = '';
const enc = encodeURIComponent;
const ROLE_WORDS: Record<Role, string> = { owner: 'Owner', developer: 'Developer', viewer: 'Viewer' };
const who = (m: Member) => m.email ?? m.subject ?? m.id;

/** After sign-in (or a change of account): what this person may do here, and the members for an owner. */
export async function loadPeople(s: Session, update: () => void): Promise<void> {
  redraw = update;
  account = s.account;
  people.role = s.role ?? null;
  people.createdKeys = new Set();
  people.members = null;
  people.rowError.clear();
  if (!s.user) return;
  try {
    const me = await call<{ type: 'token' | 'user'; name: string; role: Role | null; created_keys: string[] }>('GET', `/v1/accounts/${enc(account)}/me`);
    people.role = me.role;
    people.createdKeys = new Set(me.created_keys);
  } catch {
    // a failed read leaves the controls of the session's role; the API decides anyway
  }
  if (people.role === 'owner') await loadMembers();
  redraw();
}

/** After the person created or rolled a key: it is theirs. */
export function createdByMe(keyId: string): void {
  if (people.role !== null) people.createdKeys.add(keyId);
}

async function loadMembers(): Promise<void> {
  try {
    people.members = (await call<{ members: Member[] }>('GET', `/v1/accounts/${enc(account)}/members`)).members;
    people.membersError = '';
  } catch (err) {
    people.membersError = message(err);
  }
  redraw();
}

/** Whether the page offers a control: creating keys, or changing (reveal, edit, roll, revoke) this key. */
export function can(what: 'create' | 'change', key?: Key): boolean {
  const r = people.role;
  if (r === null || r === 'owner') return true;
  if (r === 'viewer') return false;
  return what === 'create' || (key !== undefined && people.createdKeys.has(key.id));
}

/** "Sign in with SSO" beside the token sign-in, when the console offers it. */
export function ssoView(): TemplateResult | typeof nothing {
  if (!ssoOffered) return nothing;
  // A link, not a form: the redirect to the identity provider is a navigation (the CSP's form-action stays 'self').
  return html`<section class="card signin sso" aria-labelledby="sso-title">
    <h2 id="sso-title">Single sign-on</h2>
    <p class="muted">Sign in with your organisation's identity provider, if an owner added you to an account.</p>
    <div class="actions"><a class="button primary" href="/auth/login">Sign in with SSO</a></div>
  </section>`;
}

/** The header's person: their name and role, and the "Account" select when they are in several accounts. */
export function personBar(s: Session, onPick: (account: string) => void): TemplateResult | typeof nothing {
  if (!s.user) return nothing;
  const many = (s.accounts ?? []).length > 1;
  return html`<span class="who person">${s.user.name} · ${ROLE_WORDS[people.role ?? s.role ?? 'viewer']}</span>
    ${many
      ? html`<label class="who" for="account-select">Account</label>
          <select id="account-select" @change=${(e: Event) => onPick((e.currentTarget as HTMLSelectElement).value)}>
            ${s.accounts!.map((a) => html`<option value=${a.account} ?selected=${a.account === s.account}>${a.account} (${ROLE_WORDS[a.role]})</option>`)}
          </select>`
      : nothing}`;
}

/** Moves the session to another of the person's accounts. */
export async function pickAccount(next: string): Promise<Session> {
  return api.pickAccount(next);
}

/** The "Members" section: owners add people by email or subject, change roles, remove them. */
export function membersView(): TemplateResult | typeof nothing {
  if (people.role !== 'owner') return nothing;
  const list = people.members;
  return html`<section class="card members-section" aria-labelledby="members-title">
    <h2 id="members-title">Members</h2>
    <p class="muted">People who sign in with SSO and their role here. Owners manage keys, members and webhooks; developers create keys and change the keys they created; viewers read only.</p>
    ${people.membersError ? html`<p class="error" role="alert">${people.membersError}</p>` : nothing}
    ${list === null
      ? html`<p class="muted" role="status">Loading members…</p>`
      : html`<ul class="members">
          ${list.map(
            (m) => html`<li id="member-${m.id}">
              <span class="member-name">${who(m)}</span>${m.source === 'claim' ? html` <span class="muted">(from the identity provider)</span>` : nothing}
              <label class="visually-hidden" for="member-${m.id}-role">Role of ${who(m)}</label>
              <select id="member-${m.id}-role" @change=${(e: Event) => void onRole(m, (e.currentTarget as HTMLSelectElement).value as Role)}>
                ${(['owner', 'developer', 'viewer'] as const).map((r) => html`<option value=${r} ?selected=${m.role === r}>${ROLE_WORDS[r]}</option>`)}
              </select>
              <button type="button" class="danger" aria-label="Remove ${who(m)}" @click=${() => void onRemove(m)}>Remove</button>
              ${people.rowError.get(m.id) ? html`<span class="error" role="alert">${people.rowError.get(m.id)}</span>` : nothing}
            </li>`,
          )}
        </ul>`}
    <form class="member-add" novalidate @submit=${onAdd} aria-labelledby="member-add-title">
      <h3 id="member-add-title">Add a member</h3>
      <div class="field">
        <label for="member-email">Email</label>
        <input id="member-email" name="email" type="email" autocomplete="off" spellcheck="false" aria-describedby="member-email-help" />
        <p class="help" id="member-email-help">Matched only when the identity provider has verified it. Or leave it empty and give the subject.</p>
      </div>
      <div class="field">
        <label for="member-subject">Subject</label>
        <input id="member-subject" name="subject" type="text" autocomplete="off" spellcheck="false" />
      </div>
      <div class="field">
        <label for="member-role">Role</label>
        <select id="member-role" name="role">
          <option value="viewer">Viewer</option>
          <option value="developer">Developer</option>
          <option value="owner">Owner</option>
        </select>
      </div>
      ${people.addError ? html`<p class="error" role="alert">${people.addError}</p>` : nothing}
      <div class="actions"><button type="submit" class="primary" ?disabled=${people.addBusy}>Add member</button></div>
    </form>
  </section>`;
}

async function onAdd(e: SubmitEvent): Promise<void> {
  e.preventDefault();
  const form = e.currentTarget as HTMLFormElement;
  const value = (n: string) => ((form.elements.namedItem(n) as HTMLInputElement | HTMLSelectElement).value ?? '').trim();
  const [email, subject, role] = [value('email'), value('subject'), value('role')];
  if ((email === '') === (subject === '')) {
    people.addError = 'Give the member’s email or their subject (one of them).';
    return redraw();
  }
  people.addBusy = true;
  people.addError = '';
  redraw();
  try {
    await call('POST', `/v1/accounts/${enc(account)}/members`, { ...(email ? { email } : { subject }), role });
    form.reset();
    await loadMembers();
  } catch (err) {
    people.addError = message(err);
  }
  people.addBusy = false;
  redraw();
}

async function onRole(m: Member, role: Role): Promise<void> {
  people.rowError.delete(m.id);
  try {
    await call('PATCH', `/v1/accounts/${enc(account)}/members/${enc(m.id)}`, { role });
  } catch (err) {
    people.rowError.set(m.id, message(err));
  }
  await loadMembers();
}

async function onRemove(m: Member): Promise<void> {
  people.rowError.delete(m.id);
  try {
    await call('DELETE', `/v1/accounts/${enc(account)}/members/${enc(m.id)}`);
  } catch (err) {
    people.rowError.set(m.id, message(err));
  }
  await loadMembers();
}

/** Who made an audited change, in words. */
export function actorWords(a: AuditEvent['actor']): string {
  if (a.type === 'cli') return 'the command line';
  if (a.type === 'user') return `${a.name ?? a.id ?? '?'}`;
  return `token “${a.name ?? a.id ?? '?'}”`;
}

export const PEOPLE_ACTION_WORDS: Record<string, string> = {
  member_add: 'Member added',
  member_update: 'Member’s role changed',
  member_remove: 'Member removed',
};
