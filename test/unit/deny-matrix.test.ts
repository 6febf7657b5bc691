/**
 * Every family × every deny code × every header, as each transport renders a deny: Envoy's
 * CheckResponse (both gRPC servers) and the HTTP transport in each of its modes.
 */
import { describe, expect, it } from 'vitest';
import type { CheckOutcome } from '../../src/authorizer.ts';
import { DENY_CODES, DENY_STATUS } from '../../src/core/codes.ts';
import { deny } from '../../src/core/decision.ts';
import { FAMILIES } from '../../src/core/families/index.ts';
import { checkResponse } from '../../src/transport/envoy/check.ts';
import { GrpcStatus } from '../../src/transport/envoy/grpc.ts';
import { authzResponse } from '../../src/transport/http/authz-response.ts';
import type { ResponseOptions } from '../../src/transport/response-options.ts';

const OPTS: ResponseOptions = { accountHeader: 'x-account', keyIdHeader: 'x-key-id', stripKeyHeaders: true, errorDomain: 'example.test' };
const RID = 'rid-42';

/** The headers a deny of `status` carries at a `family` entry (the README's error shapes, written out). */
function expectedHeaders(family: string, status: number): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': RID };
  if (family === 'anthropic') h['request-id'] = RID;
  if (status < 500) h['x-should-retry'] = 'false';
  else h['retry-after'] = '1';
  return h;
}

const RPC = { 400: GrpcStatus.PERMISSION_DENIED, 401: GrpcStatus.UNAUTHENTICATED, 402: GrpcStatus.PERMISSION_DENIED, 403: GrpcStatus.PERMISSION_DENIED, 429: GrpcStatus.RESOURCE_EXHAUSTED, 503: GrpcStatus.UNAVAILABLE } as Record<number, number>;

describe('deny headers and status, every family × every code', () => {
  for (const family of FAMILIES) {
    for (const code of DENY_CODES) {
      const status = DENY_STATUS[code];
      const outcome: CheckOutcome = { decision: deny(code), family, requestId: RID };
      const want = expectedHeaders(family, status);

      it(`${family} ${code}: Envoy CheckResponse`, () => {
        const r = checkResponse(outcome, OPTS);
        expect(r.status).toEqual({ code: RPC[status], message: code });
        expect(r.ok_response).toBeUndefined();
        const d = r.denied_response!;
        expect(d.status.code).toBe(status);
        expect(Object.fromEntries(d.headers.map((h) => [h.header.key, h.header.value]))).toEqual(want);
        expect(d.headers.every((h) => h.append.value === false)).toBe(true);
        expect(d.body).toContain(`"${code}"`);
      });

      for (const mode of ['envoy', 'forward', 'nginx'] as const) {
        it(`${family} ${code}: HTTP (${mode})`, () => {
          const r = authzResponse(outcome, mode, OPTS);
          const got = Object.fromEntries(r.headers);
          for (const [k, v] of Object.entries(want)) expect(got[k], k).toBe(v);
          expect(got['cache-control']).toBe('no-store');
          if (status < 500) expect(got['retry-after']).toBeUndefined();
          else expect(got['x-should-retry']).toBeUndefined();
          if (family !== 'anthropic') expect(got['request-id']).toBeUndefined();
          if (mode === 'nginx') {
            expect(r.status).toBe(status === 401 ? 401 : 403);
            expect(got['x-keygate-status']).toBe(String(status));
          } else expect(r.status).toBe(status);
          expect(r.body).toContain(`"${code}"`);
        });
      }
    }
  }
});
