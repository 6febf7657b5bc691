/**
 * The documented commands `scripts/node bench/money.ts` and `scripts/node bench/events.ts`, minimally
 * (one round, short runs; no timing assertions: figures come from `npm run bench`): both drive their
 * sides through bench/lib/side-by-side.ts and print a row per shape and side, a TARGET line with the
 * two ratios per shape, and their second part's rows with the books checked.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const num = String.raw`[\d.]+`;
const row = (shape: string, side: string) => new RegExp(String.raw`^\| ${shape} \| ${side} \| \d+ \| ${num} \| ${num} \|$`, 'm');
const target = (goal: string, shape: string) => new RegExp(String.raw`^TARGET\| ${goal} \| ${shape} \| ${num} \| ${num} \| (yes|partly|no) \|$`, 'm');
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('bench/money.ts (the documented command, minimal)', () => {
  it('prints plain, money and before-wallets rows per shape, a TARGET line per shape, and usage records with the books exact', () => {
    // --baseline .: this tree as the "before wallets" side, so the third side runs too
    const out = execFileSync('scripts/node', ['bench/money.ts', '--quick', '--rounds', '1', '--duration', '0.5', '--baseline', '.'], { encoding: 'utf8', timeout: 90_000 });
    const goal = esc('money gate (credited wallet + spend limit) within 5% of a plain cached key (bench/money.ts)');
    for (const shape of ['4x16', '1x1']) {
      for (const side of ['plain', 'money', 'before wallets']) expect(out).toMatch(row(shape, side));
      expect(out).toMatch(target(goal, shape));
      expect(out).toMatch(new RegExp(String.raw`^- ${shape}: money / plain = \*\*${num}\*\* \(req/s\), \*\*${num}\*\* \(CPU per request\)$`, 'm'));
      expect(out).toMatch(new RegExp(String.raw`^- ${shape}: money / before wallets = \*\*${num}\*\*`, 'm'));
    }
    expect(out.match(/^TARGET\|/gm)).toHaveLength(2);
    expect(out).toMatch(/^- requests the money sidecar counted and flushed for its key: [1-9]\d*$/m);
    expect(out).toMatch(new RegExp(String.raw`^\| [1-9]\d* \| \d+ \| ${num} \| ${num} \| yes \(Σ debits = [1-9]\d* µ\) \|$`, 'm'));
  }, 90_000);
});

describe('bench/events.ts (the documented command, minimal)', () => {
  it('prints quiet and eventful rows per shape, a TARGET line per shape, and bookings with and without thresholds with the books exact', () => {
    const out = execFileSync('scripts/node', ['bench/events.ts', '--quick', '--rounds', '1', '--duration', '0.5'], { encoding: 'utf8', timeout: 60_000 });
    const goal = esc('cached Check of an account with webhooks, thresholds and undelivered events within 5% of one without (bench/events.ts)');
    for (const shape of ['4x16', '1x1']) {
      for (const side of ['quiet', 'eventful']) expect(out).toMatch(row(shape, side));
      expect(out).toMatch(target(goal, shape));
      expect(out).toMatch(new RegExp(String.raw`^- ${shape}: eventful / quiet = \*\*${num}\*\* \(req/s\), \*\*${num}\*\* \(CPU per request\)$`, 'm'));
    }
    expect(out.match(/^TARGET\|/gm)).toHaveLength(2);
    expect(out).toMatch(/1001 undelivered events in its stream .* no event stream \(checked\)/);
    for (const side of ['plain', 'thresholds']) expect(out).toMatch(new RegExp(String.raw`^\| ${side} \| \d+ \| ${num} \| ${num} \| ${num} \|$`, 'm'));
    expect(out).toMatch(/^- books exact on both sides \(Σ debits = records × 7 µ: [1-9]\d* and [1-9]\d* records\); events in the threshold accounts' streams: 20 \(the 20 set-up credits/m);
  }, 60_000);
});
