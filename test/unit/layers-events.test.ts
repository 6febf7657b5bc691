/**
 * Events are a library below the console (docs/events.md): event types, the stream publish, the Lua
 * fragments, signing, the SSRF rule and the delivery worker import only the floor (src/core,
 * src/keys, src/schema, src/store) and packages. Webhook endpoints and alert settings are console
 * resources on ConsoleService; their routes and GET /v1/key are the API's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** `folder/file: module` for every import and re-export (type-only included) of the .ts files under `folder`. */
function importsOf(folder: string): string[] {
  const abs = join(ROOT, folder);
  return readdirSync(abs, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => [...readFileSync(join(abs, f), 'utf8').matchAll(/^(?:import|export) (?:type )?[^;]*?from '([^']+)'/gms)].map((m) => `${folder}/${f}: ${m[1]}`));
}

/** The folders above the events library. */
const ABOVE_EVENTS = ['console', 'console-api', 'console-web', 'cli', 'dev'];

describe('layers: events', () => {
  it('src/events imports nothing above it', () => {
    const imports = importsOf('src/events');
    expect(imports.length).toBeGreaterThan(20); // the control: the reader finds the imports
    const above = new RegExp(`: \\.\\./(${ABOVE_EVENTS.join('|')})/`);
    expect(imports.filter((l) => above.test(l))).toEqual([]);
    // Relative imports stay in the library or on the floor (the one top-level file: the ConfigError of src/config.ts).
    const floor = /: (\.\/|\.\.\/(core|keys|schema|store)\/|\.\.\/config\.ts$)/;
    expect(imports.filter((l) => /: \./.test(l) && !floor.test(l))).toEqual([]);
  });

  it('the HTTP routes of webhooks, alerts and GET /v1/key are the API\'s, and call the console service', () => {
    const files = readdirSync(join(ROOT, 'src/events'));
    expect(files.filter((f) => /routes/.test(f))).toEqual([]);
    const routes = readFileSync(join(ROOT, 'src/console-api/event-routes.ts'), 'utf8');
    for (const path of ["'/v1/webhooks'", "'/v1/webhooks/:id'", "'/v1/accounts/:account/alerts'", "'/v1/key'"]) expect(routes).toContain(path);
    // no Redis of its own: the console's reads and writes
    expect(routes).not.toMatch(/\.redis\b|\.eval\(|hmget|WebhookStore/);
  });

  it('webhook and alert changes go through ConsoleService, audited in their own write', () => {
    const src = (f: string) => readFileSync(join(ROOT, f), 'utf8');
    const service = src('src/console/service.ts');
    for (const m of ['createWebhook', 'listWebhooks', 'getWebhook', 'removeWebhook', 'listDeadLetters', 'replayDeadLetter', 'setWalletLow', 'setKeyAlertThresholds', 'activeKeyIdOf']) expect(service).toMatch(new RegExp(`^  ${m}\\(`, 'm'));
    // the CLI's and the API's event code appends no audit entry of its own
    for (const f of ['src/cli/event-commands.ts', 'src/console-api/event-routes.ts']) expect(src(f)).not.toMatch(/\.audit\(|WebhookStore/);
    for (const f of ['src/console/webhooks.ts', 'src/console/alerts.ts']) {
      const ops = [...src(f).matchAll(/^export async function (\w+)\((\w+)/gm)];
      expect(ops.length, f).toBeGreaterThan(1);
      expect(ops.filter((m) => m[2] !== 'ctx').map((m) => m[1]), f).toEqual([]);
      expect(src(f)).toContain('AUDIT_WRITE(');
    }
  });
});
