/**
 * Input validation for console operations. Everything is checked here, before any write, so that
 * bad input changes nothing in Redis. Errors say what is wrong and never echo a secret.
 *
 * Model patterns follow the sidecar's own rules (`src/core/model/patterns.ts`:
 * `*`, `provider/*`, `provider/model`, or a bare name), compared case-insensitively; the console
 * stores them trimmed and lower-case.
 */
import { NAME_FORBIDDEN } from '../core/key-rules.ts';
import { allowsEveryModel, modelPatternError } from '../core/model/patterns.ts';
import { ACCOUNT_ID_PATTERN, ACCOUNT_ID_RULE, KEY_ID_PATTERN, KEY_ID_RULE, LIMITS } from '../schema/redis-schema.ts';
import { ConsoleError } from './errors.ts';

/** The one error of bad input: INVALID_INPUT with what is wrong. */
export function bad(message: string): ConsoleError {
  return new ConsoleError('INVALID_INPUT', message);
}

/** Shown in errors: at most 40 printable characters of user input. */
export function shown(v: string): string {
  const s = v.replace(/[^\x20-\x7e]/g, '?');
  return JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);
}

export function validateAccountId(account: unknown): string {
  if (typeof account !== 'string' || !ACCOUNT_ID_PATTERN.test(account)) {
    throw bad(`account id ${typeof account === 'string' ? shown(account) : ''} is invalid: ${ACCOUNT_ID_RULE}`.replace('  ', ' '));
  }
  return account;
}

export function validateKeyId(keyId: unknown): string {
  if (typeof keyId !== 'string' || !KEY_ID_PATTERN.test(keyId)) {
    throw bad(`key id ${typeof keyId === 'string' ? shown(keyId) : ''} is invalid: key ids look like ${KEY_ID_RULE}`.replace('  ', ' '));
  }
  return keyId;
}

/** A name is trimmed; 1-128 characters; no control or bidi-override characters. */
export function validateName(name: unknown): string {
  if (typeof name !== 'string') throw bad('name must be a string');
  const n = name.trim().normalize('NFC');
  if (n === '') throw bad('name must not be empty');
  // Counted as given and as stored: the API's schema (maxLength, in characters) refuses the same names.
  if ([...name].length > LIMITS.nameMaxChars || [...n].length > LIMITS.nameMaxChars) throw bad(`name is longer than ${LIMITS.nameMaxChars} characters`);
  if (NAME_FORBIDDEN.test(n)) throw bad('name must not contain control or bidirectional-override characters');
  return n;
}

export function validateModelPattern(pattern: string): string {
  const p = pattern.trim().toLowerCase();
  if (p === '') throw bad('model pattern must not be empty');
  if (p.length > LIMITS.modelPatternMaxChars) throw bad(`model pattern ${shown(p)} is longer than ${LIMITS.modelPatternMaxChars} characters`);
  const err = modelPatternError(p);
  if (err !== null) throw bad(`model pattern ${shown(p)} ${err}`);
  return p;
}

/**
 * A model list: `null` (every model) or 1-100 valid patterns, deduplicated (order kept). A list
 * containing `*` is stored as `null`: the sidecar requires a restricted key's request to name a
 * model with certainty, which `*` does not intend.
 */
export function validateModels(models: unknown): string[] | null {
  if (models === null) return null;
  if (!Array.isArray(models)) throw bad('models must be a list of model patterns, or null for every model');
  if (models.length === 0) throw bad('models must list at least one model pattern (leave it out to allow every model)');
  const out: string[] = [];
  for (const m of models) {
    if (typeof m !== 'string') throw bad('each model pattern must be a string');
    const p = validateModelPattern(m);
    if (!out.includes(p)) out.push(p);
  }
  if (out.length > LIMITS.modelsPerKey) throw bad(`a key may list at most ${LIMITS.modelsPerKey} model patterns`);
  return allowsEveryModel(out) ? null : out;
}

/** `a,b` from the command line; an empty item is an error, not a silent skip. */
export function parseModelList(csv: string): string[] {
  return csv.split(',').map((m) => {
    if (m.trim() === '') throw bad('--models has an empty entry; use provider/model, provider/* or *, comma-separated');
    return m;
  });
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:\d{2})$/;
/** The shape of an ISO-8601 instant the console takes (a date, or a date-time with a zone): written once, stated by the API's schema (and so its OpenAPI document), applied by parseIsoInstant. */
export const ISO_INSTANT_PATTERN = new RegExp(`^(?:${ISO_DATE.source.slice(1, -1)}|${ISO_DATE_TIME.source.slice(1, -1)})$`);
const MAX_EXPIRY = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * An expiry instant from an ISO-8601 string (`2026-01-31` = midnight UTC, or a date-time with `Z` or
 * an offset; a date-time without a zone is refused as ambiguous), a Date, or epoch milliseconds.
 * Must be in the future relative to `now`.
 */
export function validateExpiry(value: unknown, now: number): number {
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'number') ms = value;
  else if (typeof value === 'string') ms = parseIsoInstant(value);
  else throw bad('expiry must be an ISO-8601 string, a Date or epoch milliseconds');
  if (!Number.isSafeInteger(ms) || ms < 0 || ms > MAX_EXPIRY) throw bad('expiry is not a valid instant');
  if (ms <= now) throw bad(`expiry ${new Date(ms).toISOString()} is not in the future`);
  return ms;
}

export function parseIsoInstant(s: string): number {
  const v = s.trim();
  const d = ISO_DATE.exec(v);
  const dt = d ? null : ISO_DATE_TIME.exec(v);
  const m = d ?? dt;
  if (!m) {
    throw bad(`${shown(v)} is not an ISO-8601 date (YYYY-MM-DD) or date-time with a zone (e.g. 2026-01-31T12:00:00Z)`);
  }
  const [y, mo, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [h, mi, sec] = dt ? [Number(dt[4]), Number(dt[5]), Number(dt[6] ?? 0)] : [0, 0, 0];
  const probe = new Date(Date.UTC(y, mo - 1, day, h, mi, sec));
  if (
    probe.getUTCFullYear() !== y ||
    probe.getUTCMonth() !== mo - 1 ||
    probe.getUTCDate() !== day ||
    probe.getUTCHours() !== h ||
    probe.getUTCMinutes() !== mi ||
    probe.getUTCSeconds() !== sec
  ) {
    throw bad(`${shown(v)} is not a real calendar date and time`);
  }
  const ms = Date.parse(dt ? v.replace(' ', 'T') : `${v}T00:00:00Z`);
  if (Number.isNaN(ms)) throw bad(`${shown(v)} is not a valid ISO-8601 instant`);
  return ms;
}
