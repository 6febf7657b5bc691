/**
 * Reads a V8 `.cpuprofile` (node --cpu-prof) and lists where the time went: self time by function,
 * and total (inclusive) time by package or source area, as markdown.
 */
interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The package or source area a script URL belongs to. */
export function areaOf(url: string): string {
  if (!url) return '(native/gc)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return url;
  const src = url.indexOf('/src/');
  if (src !== -1) return url.slice(src + 1);
  return url.replace(/^file:\/\//, '');
}

export function summarizeProfile(json: string, top = 30): string {
  const p = JSON.parse(json) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
    total += dt;
  }
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const fnSelf = new Map<string, number>();
  const areaIncl = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id)!;
    const f = n.callFrame;
    const name = `${f.functionName || '(anonymous)'} ${areaOf(f.url)}:${f.lineNumber + 1}`;
    fnSelf.set(name, (fnSelf.get(name) ?? 0) + t);
    // inclusive per area: count each area once per sample stack
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const a = areaOf(byId.get(cur)!.callFrame.url);
      if (!seen.has(a)) {
        seen.add(a);
        areaIncl.set(a, (areaIncl.get(a) ?? 0) + t);
      }
    }
  }
  const pct = (t: number) => ((100 * t) / total).toFixed(1);
  const lines = ['| self % | function |', '|---:|---|'];
  for (const [k, v] of [...fnSelf].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`| ${pct(v)} | \`${k}\` |`);
  lines.push('', '| inclusive % | area |', '|---:|---|');
  for (const [k, v] of [...areaIncl].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`| ${pct(v)} | \`${k}\` |`);
  return lines.join('\n');
}
