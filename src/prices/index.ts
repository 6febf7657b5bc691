/**
 * The price catalog as the sidecar and the console load it: once per process, or not at all when
 * `KEYGATE_PRICE_CATALOG=false`.
 */
import { PriceCatalog } from './catalog.ts';

let loaded: PriceCatalog | null = null;

/** The catalog (loaded on first use), or null when turned off. */
export function priceCatalog(enabled: boolean): PriceCatalog | null {
  if (!enabled) return null;
  return (loaded ??= PriceCatalog.load());
}

/** `KEYGATE_PRICE_CATALOG` read from an environment: unset or `true` (1, yes, on) → on, `false` (0, no, off) → off, as the sidecar's settings read it; anything else is refused. */
export function catalogEnabled(env: Record<string, string | undefined> = process.env): boolean {
  const v = env.KEYGATE_PRICE_CATALOG;
  if (v === undefined || v === '' || ['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off'].includes(v)) return false;
  throw new Error(`KEYGATE_PRICE_CATALOG must be true or false, not ${JSON.stringify(v.slice(0, 20))}`);
}
