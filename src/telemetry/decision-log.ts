/**
 * Decision logs: one JSON line per deny at info (code, status, family, key id or masked key,
 * request id, duration); allows only at debug. The key itself never reaches a line: a deny before
 * the key is known carries `maskedKey` (`kg_…WXYZ`), after it the key id.
 */
import type { Logger } from 'pino';
import type { Authorizer, DecisionObserver } from '../authorizer.ts';

export function decisionLogger(authorizer: Authorizer, log: Logger): DecisionObserver {
  return (outcome, input, startedAt) => {
    const d = outcome.decision;
    if (d.allow) {
      if (!log.isLevelEnabled('debug')) return;
      log.debug(
        {
          decision: 'allow',
          requestId: outcome.requestId,
          family: outcome.family,
          keyId: d.keyId,
          accountId: d.accountId,
          model: d.model ?? undefined,
          ms: elapsedMs(startedAt),
        },
        'allow',
      );
      return;
    }
    if (!log.isLevelEnabled('info')) return;
    log.info(
      {
        decision: 'deny',
        requestId: outcome.requestId,
        code: d.code,
        status: d.status,
        family: outcome.family,
        ...(d.keyId !== undefined ? { keyId: d.keyId } : { maskedKey: authorizer.maskedKeyOf(input) }),
        ms: elapsedMs(startedAt),
      },
      'deny',
    );
  };
}

function elapsedMs(startedAt: bigint): number {
  return Math.round(Number(process.hrtime.bigint() - startedAt) / 1e3) / 1e3;
}
