/**
 * Unknown fields in Kubernetes objects. kubernetes-models' validate() checks types, required fields
 * and enums but accepts any field it does not know (a misspelt `readinesProbe` passes). Its
 * TypeScript interfaces are closed, though (only real maps such as labels or resource lists take any
 * key), so each object is written as a typed object literal (`const o: IDeployment = {…}`) and the
 * TypeScript compiler's excess-property check reports every field the Kubernetes schema does not
 * have, at any depth, as the API server's strict field validation does.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

type Obj = Record<string, any>;
const NODE_MODULES = fileURLToPath(new URL('../../node_modules', import.meta.url));
const TSC = join(NODE_MODULES, 'typescript', 'bin', 'tsc');

/** Every field no Kubernetes schema knows (and any value its types refuse), one message each: `Kind/name: …`. Empty when none. */
export function k8sStrictErrors(objs: Obj[]): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-k8s-strict-'));
  try {
    symlinkSync(NODE_MODULES, join(dir, 'node_modules'), 'dir');
    const lines: string[] = [];
    const names: string[] = [];
    objs.forEach((o, i) => {
      // kubernetes-models/<apiVersion>/<Kind> exports I<Kind> (core kinds under v1/).
      lines.push(`import type { I${o.kind} as T${i} } from 'kubernetes-models/${o.apiVersion}/${o.kind}';`);
    });
    const header = lines.length;
    objs.forEach((o, i) => {
      lines.push(`export const o${i}: T${i} = ${JSON.stringify(o)};`);
      names.push(`${o.kind}/${o.metadata?.name}`);
    });
    writeFileSync(join(dir, 'objects.ts'), `${lines.join('\n')}\n`);
    const args = ['--ignoreConfig', '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--skipLibCheck', '--types', '', '--pretty', 'false', 'objects.ts'];
    let out = '';
    try {
      execFileSync(process.execPath, [TSC, ...args], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      out = `${(e as { stdout?: string }).stdout ?? ''}${(e as { stderr?: string }).stderr ?? ''}`;
      if (!out.trim()) throw e;
    }
    return out
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => {
        const m = /^objects\.ts\((\d+),\d+\): (.*)$/.exec(l);
        if (!m) return l;
        const line = Number(m[1]) - 1;
        return line < header ? `import of ${objs[line]!.apiVersion}/${objs[line]!.kind}: ${m[2]}` : `${names[line - header]}: ${m[2]}`;
      });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
