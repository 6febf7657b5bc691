/**
 * Cached Checks of two or more sides in one run (bench/money.ts, bench/events.ts): each side a
 * target and a Check body; h2load at 4x16 and 1x1, every measured run of one side followed by the
 * others' (order alternating by round, so that drift in the machine's load favours none). Every
 * answer must be a 2xx; the target's CPU µs per request is taken around each run. Gives the table
 * rows (medians over the rounds), a `TARGET|` line per shape for each comparison with a goal (the
 * compared side within 5% of its base: req/s ≥ 0.95 and CPU ≤ 1.05 of the base's), and the ratios.
 */
import { join } from 'node:path';
import { ENVOY_HEADERS, median } from './common.ts';
import { runH2load, type H2loadResult } from './h2load.ts';
import type { Target } from './procs.ts';

export const SHAPES = [[4, 16], [1, 1]] as const;

export interface CheckSide {
  readonly name: string;
  /** In the table and the ratios; `name` unless given. */
  readonly label?: string;
  readonly target: Target;
  readonly bodyFile: string;
}

export interface Comparison {
  readonly side: string;
  readonly base: string;
  /** The `TARGET|` line's text, when this comparison is a goal. */
  readonly goal?: string;
}

export interface SideBySide {
  /** `| shape | label | req/s | p99 ms | CPU µs/req |`, per shape, the sides in the order given. */
  readonly rows: string[];
  /** `TARGET| goal | shape | req/s ratio | CPU ratio | yes/partly/no |`, per shape and goal. */
  readonly targets: string[];
  /** `shape: side / base = **r** (req/s), **c** (CPU per request)`, per shape and comparison. */
  readonly ratios: string[];
}

export async function sideBySideChecks(o: {
  sides: readonly CheckSide[];
  compare: readonly Comparison[];
  rounds: number;
  durationSec: number;
  warmupSec: number;
  /** The scratch directory (h2load's log). */
  tmp: string;
  log: (m: string) => void;
}): Promise<SideBySide> {
  const runs = new Map<string, { r: H2loadResult; cpu: number }[]>();
  const drive = async (side: CheckSide, c: number, m: number) => {
    const t = side.target;
    const c0 = t.cpuMs();
    const r = await runH2load({ port: t.port, bodyFile: side.bodyFile, connections: c, streams: m, durationSec: o.durationSec, warmupSec: o.warmupSec, logFile: join(o.tmp, 'h2load.log'), headers: ENVOY_HEADERS });
    if (r.non2xx > 0 || r.succeeded < r.done) throw new Error(`${side.label ?? side.name}: ${r.non2xx} non-2xx, ${r.done - r.succeeded} failed`);
    const key = `${c}x${m}|${side.name}`;
    runs.set(key, [...(runs.get(key) ?? []), { r, cpu: ((t.cpuMs() - c0) * 1000) / Math.max(1, r.allRequests) }]);
  };
  for (let round = 0; round < o.rounds; round++) {
    o.log(`round ${round + 1}/${o.rounds}`);
    const order = round % 2 ? [...o.sides].reverse() : o.sides;
    for (const [c, m] of SHAPES) for (const side of order) await drive(side, c, m);
  }

  const label = (name: string) => o.sides.find((s) => s.name === name)?.label ?? name;
  const rows: string[] = [];
  const targets: string[] = [];
  const ratios: string[] = [];
  for (const [c, m] of SHAPES) {
    const cm = `${c}x${m}`;
    const v = (name: string) => {
      const rs = runs.get(`${cm}|${name}`)!;
      return { rps: median(rs.map((x) => x.r.rps)), p99: median(rs.map((x) => x.r.p99us)), cpu: median(rs.map((x) => x.cpu)) };
    };
    for (const side of o.sides) {
      const f = v(side.name);
      rows.push(`| ${cm} | ${label(side.name)} | ${f.rps.toFixed(0)} | ${(f.p99 / 1000).toFixed(2)} | ${f.cpu.toFixed(1)} |`);
    }
    for (const { side, base, goal } of o.compare) {
      const [s, b] = [v(side), v(base)];
      const [rr, rc] = [s.rps / b.rps, s.cpu / b.cpu];
      if (goal) targets.push(`TARGET| ${goal} | ${cm} | ${rr.toFixed(3)} | ${rc.toFixed(3)} | ${rr >= 0.95 && rc <= 1.05 ? 'yes' : rr >= 0.95 || rc <= 1.05 ? 'partly' : 'no'} |`);
      ratios.push(`${cm}: ${label(side)} / ${label(base)} = **${rr.toFixed(3)}** (req/s), **${rc.toFixed(3)}** (CPU per request)`);
    }
  }
  return { rows, targets, ratios };
}
