/**
 * Metering reads each family's usage with that family's own reader (src/metering/usage/<family>.ts),
 * and a family without one is never read as another: nothing is booked (docs/metering.md).
 */
import { describe, expect, it } from 'vitest';
import { FAMILIES, type Family } from '../../src/core/families/index.ts';
import { IN, normalise, OUT, UsageState, type EndpointKind } from '../../src/metering/usage.ts';

function state(input: number, output: number): UsageState {
  const u = new UsageState();
  u.counts[IN] = input;
  u.seen[IN] = 1;
  u.counts[OUT] = output;
  u.seen[OUT] = 1;
  return u;
}

describe('usage readers by family', () => {
  it('an unknown family is not read as OpenAI: no counts', () => {
    expect(normalise('mistral' as Family, 'chat', state(10, 5), 100)).toBeNull();
    expect(normalise('__proto__' as Family, 'chat', state(10, 5), 100)).toBeNull();
  });

  it('every family reads its counts', () => {
    const kind: Record<Family, EndpointKind> = { openai: 'chat', anthropic: 'messages', google: 'generate' };
    for (const f of FAMILIES) {
      const c = normalise(f, kind[f], state(10, 5), null);
      expect(c).toMatchObject({ input_tokens: 10, output_tokens: 5, estimated: false });
    }
  });
});
