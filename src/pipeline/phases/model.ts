/** 8. The model, only for a restricted key: read from the request (pure; the body is read only here). Sets `model`. */
import type { HeaderValue } from '../../core/credentials.ts';
import { modelDeny } from '../../core/decision.ts';
import { readModel } from '../../core/model/index.ts';
import type { Phase } from '../phase.ts';

export const model: Phase = {
  name: 'model',
  run: (d) => {
    const grant = d.grant!;
    if (grant.models === null) return null;
    const { input } = d;
    const r = readModel({
      family: d.family,
      method: input.method,
      path: input.path,
      contentType: firstValue(input.header('content-type')),
      body: input.body,
      bodyTruncated: input.bodyTruncated,
      bodyJsonModel: d.bodyModel ?? undefined,
      endpoints: d.env.modelEndpoints,
    });
    const m = modelDeny(grant.id, grant.models, r, d.family);
    if ('allow' in m) return m;
    d.model = m.model;
    return null;
  },
};

function firstValue(v: HeaderValue): string | undefined {
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v[0];
}
