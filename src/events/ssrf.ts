/**
 * The webhook destination rule (no SSRF through a webhook URL). A URL must be http(s), without
 * userinfo, with a host; its addresses — the literal, or every address its name resolves to — must
 * be public: loopback, private (RFC 1918, CGNAT), link-local (incl. 169.254.169.254 metadata),
 * unique-local v6, multicast, reserved, 0.0.0.0/8, IPv4-mapped/-translated v6 of any of those,
 * 6to4 and NAT64 of them, and well-known metadata names are refused unless private destinations are
 * allowed (`KEYGATE_WEBHOOK_ALLOW_PRIVATE=true`).
 *
 * The WHATWG URL parser normalises decimal, octal and hex IPv4 forms (`http://2130706433/`,
 * `http://0x7f.1/`) to dotted quads, so the check sees the address the connection would use. At
 * delivery the connection goes to the address that was checked (a `lookup` that checks), so a name
 * that changes its answer between check and connect (DNS rebinding) gains nothing.
 */
import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup } from 'node:dns/promises';

export class DestinationError extends Error {}

/**
 * Every entry of the IANA IPv4 Special-Purpose Address Registry (also those marked globally
 * reachable: an anycast relay or AS112 sink is no webhook receiver), plus multicast.
 */
const V4_SPECIAL: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this network" (RFC 791)
  ['10.0.0.0', 8], // private-use (RFC 1918)
  ['100.64.0.0', 10], // shared address space, CGNAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata 169.254.169.254
  ['172.16.0.0', 12], // private-use
  ['192.0.0.0', 24], // IETF protocol assignments (DS-Lite, PCP/TURN anycast, NAT64 discovery .170/.171)
  ['192.0.2.0', 24], // documentation TEST-NET-1
  ['192.31.196.0', 24], // AS112-v4
  ['192.52.193.0', 24], // AMT
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast
  ['192.168.0.0', 16], // private-use
  ['192.175.48.0', 24], // direct delegation AS112
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation TEST-NET-2
  ['203.0.113.0', 24], // documentation TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the limited broadcast 255.255.255.255
];
/**
 * The IANA IPv6 Special-Purpose Address Registry's ranges that carry no IPv4 address the check can
 * read (those that do — IPv4-mapped, -compatible, -translated, NAT64 64:ff9b::/96, 6to4 — are decided
 * by the v4 inside). Anything outside global unicast 2000::/3 is refused besides (see below), so the
 * entries outside it are listed for the record.
 */
const V6_SPECIAL: readonly (readonly [string, number])[] = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b:1::', 48], // local-use IPv4/IPv6 translation (RFC 8215): a site NAT64, whatever it embeds
  ['100::', 64], // discard-only
  ['100:0:0:1::', 64], // dummy IPv6 prefix (RFC 9780)
  ['2001::', 23], // IETF protocol assignments: Teredo 2001::/32 (whatever client it embeds), ORCHID, AMT, AS112, …
  ['2001:db8::', 32], // documentation
  ['2620:4f:8000::', 48], // direct delegation AS112
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // segment routing SIDs (RFC 9602)
  ['fc00::', 7], // unique-local (incl. the EC2 metadata fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];
const blocked = new BlockList();
for (const [net, bits] of V4_SPECIAL) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of V6_SPECIAL) blocked.addSubnet(net, bits, 'ipv6');

const METADATA_NAMES = new Set(['metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);

function v4FromHextets(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** Expands an IPv6 text to 8 hextets (accepts an embedded dotted quad). */
function hextets(addr: string): number[] | null {
  let a = addr.toLowerCase().split('%')[0]!;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) {
    const p = dotted[1]!.split('.').map(Number);
    a = a.slice(0, -dotted[1]!.length) + `${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const [head, tail] = a.includes('::') ? a.split('::') : [a, null];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const fill = tail === null ? 0 : 8 - h.length - t.length;
  if (fill < 0) return null;
  const all = [...h, ...Array(fill).fill('0'), ...t].map((x) => parseInt(x, 16));
  return all.length === 8 && all.every((n) => Number.isInteger(n) && n >= 0 && n <= 0xffff) ? all : null;
}

/** The IPv4 address an IPv6 address carries where the v4 decides the destination, else null. */
function embeddedV4(h: readonly number[]): string | null {
  const zero = (from: number, to: number) => h.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && (h[5] === 0xffff || h[5] === 0)) return v4FromHextets(h[6]!, h[7]!); // ::ffff:a.b.c.d mapped, ::a.b.c.d compatible
  if (zero(0, 4) && h[4] === 0xffff && h[5] === 0) return v4FromHextets(h[6]!, h[7]!); // ::ffff:0:a.b.c.d translated (SIIT, RFC 2765)
  if (h[0] === 0x64 && h[1] === 0xff9b && zero(2, 6)) return v4FromHextets(h[6]!, h[7]!); // NAT64 well-known 64:ff9b::/96 (RFC 6052)
  if (h[0] === 0x2002) return v4FromHextets(h[1]!, h[2]!); // 6to4 2002:V4HI:V4LO::/48 (RFC 3056)
  return null;
}

/** True when the address (v4 or v6 text) is not a public destination. */
export function isPrivateAddress(address: string): boolean {
  const fam = isIP(address);
  if (fam === 4) return blocked.check(address, 'ipv4');
  if (fam !== 6) return true; // not an address: refuse
  const h = hextets(address);
  if (!h) return true;
  if (h.slice(0, 7).every((x) => x === 0) && h[7]! <= 1) return true; // :: and ::1
  const v4 = embeddedV4(h);
  if (v4 !== null) return isPrivateAddress(v4);
  if ((h[0]! & 0xe000) !== 0x2000) return true; // outside global unicast 2000::/3: reserved by the IETF, or one of the ranges above
  return blocked.check(h.map((x) => x.toString(16)).join(':'), 'ipv6');
}

export interface CheckedUrl {
  readonly url: URL;
  /** The host without brackets (a name or an address). */
  readonly host: string;
}

/** The syntactic rule (creation and delivery): scheme, no userinfo, a literal address must be public. */
export function checkUrl(text: string, allowPrivate: boolean): CheckedUrl {
  if (typeof text !== 'string' || text.length > 2048) throw new DestinationError('the URL must be at most 2048 characters');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new DestinationError('not a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new DestinationError('the URL must be http:// or https://');
  if (url.username !== '' || url.password !== '') throw new DestinationError('the URL must not carry a user name or password');
  if (url.hash !== '') throw new DestinationError('the URL must not have a #fragment');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (host === '') throw new DestinationError('the URL has no host');
  if (!allowPrivate) {
    const name = host.toLowerCase().replace(/\.$/, '');
    if (isIP(host) !== 0 ? isPrivateAddress(host) : name === 'localhost' || name.endsWith('.localhost') || METADATA_NAMES.has(name)) {
      throw new DestinationError('the URL points at a loopback, private, link-local or metadata address (allowed only with KEYGATE_WEBHOOK_ALLOW_PRIVATE=true)');
    }
  }
  return { url, host };
}

export interface ResolvedAddress {
  readonly address: string;
  readonly family: number;
}
/** Resolves a name to its addresses (the test seam: a fake resolver stands in for DNS). */
export type Resolver = (host: string) => Promise<readonly ResolvedAddress[]>;

export const systemResolver: Resolver = async (host) => dnsLookup(host, { all: true, verbatim: true });

/** How long a name may take to resolve (at creation and at each delivery attempt). */
export const RESOLVE_TIMEOUT_MS = 5000;

/** The name's addresses within `timeoutMs`; a name that does not resolve is refused in its own words. */
async function resolveBounded(host: string, resolve: Resolver, timeoutMs: number): Promise<readonly ResolvedAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DestinationError(`the host name ${host} did not resolve within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    const all = await Promise.race([resolve(host), late]);
    if (all.length === 0) throw new DestinationError(`the host name ${host} does not resolve (no address)`);
    return all;
  } catch (err) {
    if (err instanceof DestinationError) throw err;
    const code = (err as { code?: unknown }).code;
    throw new DestinationError(
      code === 'EAI_AGAIN' ? `the host name ${host} could not be resolved now (temporary DNS failure): try again` : `the host name ${host} does not resolve${typeof code === 'string' ? ` (${code})` : ''}`,
    );
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The address to connect to: the literal, or the first address of the name — every address the name
 * resolves to must be public (one private answer refuses the URL).
 */
export async function resolveDestination(host: string, allowPrivate: boolean, resolve: Resolver, timeoutMs = RESOLVE_TIMEOUT_MS): Promise<ResolvedAddress> {
  const fam = isIP(host);
  if (fam !== 0) {
    if (!allowPrivate && isPrivateAddress(host)) throw new DestinationError('the destination address is not public');
    return { address: host, family: fam };
  }
  const all = await resolveBounded(host, resolve, timeoutMs);
  if (!allowPrivate && all.some((a) => isPrivateAddress(a.address))) throw new DestinationError(`the host name ${host} resolves to a loopback, private, link-local or otherwise special-purpose address (allowed only with KEYGATE_WEBHOOK_ALLOW_PRIVATE=true)`);
  return all[0]!;
}

/**
 * The rule at creation: the URL's form (`checkUrl`), then its name resolved (bounded in time), every
 * address it resolves to checked. A name that does not resolve is refused (also with private
 * destinations allowed: a receiver nobody can reach is a typo, not an endpoint).
 */
export async function checkDestination(text: string, allowPrivate: boolean, resolve: Resolver = systemResolver, timeoutMs = RESOLVE_TIMEOUT_MS): Promise<CheckedUrl> {
  const checked = checkUrl(text, allowPrivate);
  await resolveDestination(checked.host, allowPrivate, resolve, timeoutMs);
  return checked;
}
