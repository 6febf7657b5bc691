/**
 * 8. The endpoint rule (docs/endpoints.md): the request's endpoint must be open to this key. One
 * lookup in the compiled catalog; `metered` and `free` pass (after the body's references are
 * checked, for the rows that carry them), `stateful` needs the account's own credential,
 * `unbillable` an account billed `external`, `owned` the account in the object's owned record.
 * Runs for every key, before the model rule.
 *
 * Usage cannot be switched off (docs/metering.md, "Asking for usage"): an OpenAI chat or
 * completions request whose whole body the Check holds, and which metering could not make ask for
 * its usage (`stream` or `stream_options` twice, not JSON, not an object), is refused here, 400
 * `USAGE_NOT_GUARANTEED` with metering's own reason (`usageRefusal`, the rule of
 * `forceIncludeUsage`), before anything goes upstream. A request without a body does no new work; a
 * body cut short at the Check is left to metering (Envoy may send it whole there).
 */
import { DENY_STATUS } from '../../core/codes.ts';
import { endpointDeny, unreadableDeny } from '../../core/endpoints/decision.ts';
import { bodyBytes, type TopLevelObject } from '../../core/model/json-scan.ts';
import { refusedMessage, usageScan } from '../../core/include-usage.ts';
import type { EndpointCatalog } from '../../core/endpoints/catalog.ts';
import { mayNameReferences, REFERENCE_KEYS, scanReferences } from '../../core/endpoints/references.ts';
import type { EndpointRow } from '../../core/families/endpoint-rows.ts';
import type { Deny } from '../../core/decision.ts';
import { isOwnedId, OWNED_RECORD, ownedRecordId, type OwnedState } from '../../schema/records.ts';
import { isPending } from '../../store/record-source.ts';
import type { DecisionState, Phase, PhaseAnswer } from '../phase.ts';
import { familyModule } from '../../core/families/index.ts';

/**
 * Whether the account has its own upstream credential for `provider` (SPEC 18): set by the
 * `own-credential` phase for the request's provider (the entry's family), whose allow carries it upstream.
 */
export function ownCredentialFor(d: DecisionState, provider: string): boolean {
  return d.upstream !== null && d.family === provider;
}

/** The OpenAI provider's owned records hold responses; references to them are looked up there. */
const RESPONSES_PROVIDER = 'openai';

export interface EndpointRuleOptions {
  /** Refuse OpenAI chat and completions bodies metering could not make ask for usage (KEYGATE_METER_FORCE_USAGE; default on). */
  readonly usageGuarantee?: boolean;
}

export function endpointRule(catalog: EndpointCatalog, opts: EndpointRuleOptions = {}): Phase {
  const guarantee = opts.usageGuarantee ?? true;
  return {
    name: 'endpoint',
    run: (d) => {
      const keyId = d.grant!.id;
      const c = catalog.classify(d.family, d.input.method, d.input.path);
      if (c === null) return endpointDeny('unknown', keyId);
      const row = c.entry.row;
      const provider = c.entry.family;
      switch (row.class) {
        case 'metered':
        case 'free': {
          if (guarantee && familyModule(provider).streamUsageOption && (row.usage === 'chat' || row.usage === 'completions')) {
            const g = usageGuaranteed(d);
            if (g !== null) {
              if (g.kind !== 'object') return g;
              // the scan that validated the body also looked for every key a reference hangs on
              if (!mayNameReferences(g)) return null;
            }
          }
          return row.refs === undefined ? null : references(d, provider);
        }
        case 'unbillable':
          if (d.billing !== 'external') return endpointDeny('unbillable', keyId);
          return row.refs === undefined ? null : references(d, provider);
        case 'stateful':
          return ownCredentialFor(d, provider) ? null : endpointDeny('stateful', keyId);
        case 'owned':
          if (ownCredentialFor(d, provider)) return null;
          return owned(d, row, c.id ?? '');
      }
    },
  };
}

function owned(d: DecisionState, row: EndpointRow, id: string): PhaseAnswer | Promise<PhaseAnswer> {
  const keyId = d.grant!.id;
  // An id that cannot be a record is refused like an absent one; it costs no read, and no real id looks like it.
  if (!isOwnedId(id)) return endpointDeny('owned', keyId);
  const v = d.env.records.lookup(OWNED_RECORD, ownedRecordId(row.owner ?? d.family, id));
  if (isPending(v)) return v.then((s) => ownedAnswer(d, s));
  return ownedAnswer(d, v);
}

function ownedAnswer(d: DecisionState, s: OwnedState): Deny | null {
  // A corrupt record is refused like an absent one (fail closed; the store logs it once).
  return typeof s === 'object' && s.account === d.grant!.account ? null : endpointDeny('owned', d.grant!.id);
}

/**
 * A whole chat or completions body metering could not make ask for usage: the refusal (SPEC 15);
 * else the JSON object its scan read (with whether a reference key is in it), or null when there is
 * no whole body.
 */
function usageGuaranteed(d: DecisionState): (Deny & { kind?: undefined }) | TopLevelObject | null {
  const { body, bodyTruncated } = d.input;
  if (body === undefined || body.length === 0 || bodyTruncated) return null;
  const bytes = bodyBytes(body);
  // a restricted key's model rule reads the model from the same pass (`bodyModel`)
  const r = bytes === null ? ({ kind: 'refused', reason: 'invalid-json' } as const) : usageScan(bytes, REFERENCE_KEYS, d.grant!.models !== null);
  if (r.kind === 'object') {
    d.bodyModel = r.model ?? null;
    return r;
  }
  return { allow: false, code: 'USAGE_NOT_GUARANTEED', status: DENY_STATUS.USAGE_NOT_GUARANTEED, keyId: d.grant!.id, detail: refusedMessage(r), refusal: 'unreadable' };
}

/** The request body's references (every key): each must be the account's, and the body readable whole. */
function references(d: DecisionState, provider: string): PhaseAnswer | Promise<PhaseAnswer> {
  const keyId = d.grant!.id;
  const { input } = d;
  if (input.bodyTruncated) return unreadableDeny('the body reached it cut short (larger than the proxy sends)', keyId);
  const body = input.body;
  if (body === undefined || body.length === 0) {
    // No body: fine when the request has none; a body the proxy did not pass on cannot be checked.
    const len = first(input.header('content-length'));
    const chunked = input.header('transfer-encoding') !== undefined;
    if (chunked || (len !== undefined && len.trim() !== '0')) return unreadableDeny('the proxy did not send it (send the body to the authorization check)', keyId);
    return null;
  }
  const r = scanReferences(body);
  if (r.kind === 'unreadable') return unreadableDeny(r.reason, keyId);
  if (r.stateful !== null && !ownCredentialFor(d, provider)) return endpointDeny('owned', keyId);
  if (r.responses.length === 0 || ownCredentialFor(d, RESPONSES_PROVIDER)) return null;
  const answers: (OwnedState | Promise<OwnedState>)[] = [];
  for (const id of r.responses) {
    if (!isOwnedId(id)) return endpointDeny('owned', keyId);
    answers.push(d.env.records.lookup(OWNED_RECORD, ownedRecordId(RESPONSES_PROVIDER, id)));
  }
  if (answers.some(isPending)) {
    return Promise.all(answers).then((all) => all.reduce<Deny | null>((acc, s) => acc ?? ownedAnswer(d, s), null));
  }
  for (const s of answers as OwnedState[]) {
    const a = ownedAnswer(d, s);
    if (a !== null) return a;
  }
  return null;
}

function first(v: string | readonly string[] | undefined): string | undefined {
  return v === undefined ? undefined : typeof v === 'string' ? v : v[0];
}
