/**
 * deploy/k8s/console, without a cluster: every resource validated against the Kubernetes OpenAPI
 * schema (kubernetes-models), then checked for what the management API needs: settings it
 * accepts, probes on its own port, its secrets from a Secret (never inline), a locked-down
 * container, and a grace period longer than its drain and shutdown.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';
import { CONSOLE_ENV, loadConsoleApiConfig } from '../src/console-api/config.ts';
import { ENV } from '../src/config.ts';

const dir = new URL('../deploy/k8s/console/', import.meta.url);
const read = (name: string) => readFileSync(new URL(name, dir), 'utf8');
type Obj = Record<string, any>;

const kustomization: Obj = parse(read('kustomization.yaml'));
const resources: Obj[] = (kustomization.resources as string[]).flatMap((f) => parseAllDocuments(read(f)).map((d) => d.toJS() as Obj));
const deployment = resources.find((r) => r.kind === 'Deployment')!;
const service = resources.find((r) => r.kind === 'Service')!;
const container: Obj = deployment.spec.template.spec.containers[0];
const plainEnv = Object.fromEntries((container.env as Obj[]).filter((e) => e.value !== undefined).map((e) => [e.name, e.value as string]));

describe('deploy/k8s/console', () => {
  it('every resource exists and validates against the Kubernetes schema', () => {
    for (const f of kustomization.resources) expect(existsSync(new URL(f, dir)), f).toBe(true);
    expect(() => new Deployment(deployment as any).validate()).not.toThrow();
    expect(() => new Service(service as any).validate()).not.toThrow();
    const bad = structuredClone(deployment);
    bad.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => new Deployment(bad).validate()).toThrow();
  });

  it('runs `keygate console` with settings it accepts; secrets come from a Secret, never inline', () => {
    expect(container.args).toEqual(['console']);
    for (const e of container.env as Obj[]) expect([...Object.values(ENV), ...Object.values(CONSOLE_ENV), 'KEYGATE_REVEAL_KEY', 'KEYGATE_LEDGER_URL'], e.name).toContain(e.name);
    const secret = (container.env as Obj[]).filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name);
    expect(secret.sort()).toEqual(['KEYGATE_CREDENTIAL_KEY', 'KEYGATE_LEDGER_URL', 'KEYGATE_REVEAL_KEY', 'REDIS_URL']);
    // the usage ledger is optional: a Secret without `ledger-url` leaves the console Redis-only
    expect((container.env as Obj[]).find((e) => e.name === 'KEYGATE_LEDGER_URL')!.valueFrom.secretKeyRef).toEqual({ name: 'keygate-console', key: 'ledger-url', optional: true });
    const config = loadConsoleApiConfig({}, plainEnv);
    expect(container.ports[0].containerPort).toBe(config.port);
    expect(config.trustProxy).toBe(1);
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(config.drainDelayMs + config.shutdownTimeoutMs);
  });

  it('probes /readyz and /healthz on the API port; the Service targets it', () => {
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
    expect(service.spec.ports[0].targetPort).toBe(container.ports[0].name);
  });

  it('is locked down: non-root, read-only root, no escalation, no capabilities', () => {
    expect(container.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(container.resources.limits.memory).toBeDefined();
  });
});
