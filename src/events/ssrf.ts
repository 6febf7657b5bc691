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

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['100::', 64], ['2001:db8::', 32], ['2001::', 23],
  ['fd00:ec2::254', 128],
] as const) blocked.addSubnet(net, bits, 'ipv6');

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

/** True when the address (v4 or v6 text) is not a public destination. */
export function isPrivateAddress(address: string): boolean {
  const fam = isIP(address);
  if (fam === 4) return blocked.check(address, 'ipv4');
  if (fam !== 6) return true; // not an address: refuse
  const h = hextets(address);
  if (!h) return true;
  // IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96: the v4 inside decides
  const zero5 = h.slice(0, 5).every((x) => x === 0);
  if ((zero5 && (h[5] === 0xffff || h[5] === 0)) || (h[0] === 0 && h[1] === 0 && h[2] === 0 && h[3] === 0 && h[4] === 0xffff && h[5] === 0) || (h[0] === 0x64 && h[1] === 0xff9b && h.slice(2, 6).every((x) => x === 0))) {
    if (zero5 && h[5] === 0 && h[6] === 0 && h[7]! <= 1) return true; // :: and ::1
    return isPrivateAddress(v4FromHextets(h[6]!, h[7]!));
  }
  if (h[0] === 0x2002) return isPrivateAddress(v4FromHextets(h[1]!, h[2]!)); // 6to4
  return blocked.check(address, 'ipv6');
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

/**
 * The address to connect to: the literal, or the first address of the name — every address the name
 * resolves to must be public (one private answer refuses the URL).
 */
export async function resolveDestination(host: string, allowPrivate: boolean, resolve: Resolver): Promise<ResolvedAddress> {
  const fam = isIP(host);
  if (fam !== 0) {
    if (!allowPrivate && isPrivateAddress(host)) throw new DestinationError('the destination address is not public');
    return { address: host, family: fam };
  }
  const all = await resolve(host);
  if (all.length === 0) throw new DestinationError('the host name has no address');
  if (!allowPrivate && all.some((a) => isPrivateAddress(a.address))) throw new DestinationError('the host name resolves to a loopback, private or link-local address');
  return all[0]!;
}
