/**
 * API key format: `<prefix><32 base62 random chars><6 base62 CRC-32 checksum chars>`.
 * 32 base62 characters carry 190.5 bits; the checksum (the scheme GitHub uses for its tokens) lets
 * a malformed key be refused without a store lookup and lets secret scanners find leaked keys.
 * Shared by the sidecar (validate, digest) and the console side (generate).
 */
import { hash, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const RANDOM_CHARS = 32;
export const CHECKSUM_CHARS = 6;
export const DEFAULT_KEY_PREFIX = 'kg_';
/** A prefix is 2-16 chars of [a-z0-9], optionally followed by `_`/`-`-joined parts, ending in `_` or `-`. */
const KEY_PREFIX_PATTERN = /^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*[_-]$/;
export const KEY_PREFIX_RULE = 'must be 2-16 lower-case letters/digits ending in "_" or "-", e.g. kg_';

/** The key-prefix rule (sidecar setting and console option alike): true when `prefix` follows it. */
export function isValidKeyPrefix(prefix: string): boolean {
  return prefix.length >= 2 && prefix.length <= 16 && KEY_PREFIX_PATTERN.test(prefix);
}

const IS_BASE62 = new Uint8Array(128);
for (let i = 0; i < BASE62.length; i++) IS_BASE62[BASE62.charCodeAt(i)] = 1;

/** Fixed-width base62 of a 32-bit unsigned integer (6 chars: 62^6 > 2^32). */
export function base62Fixed(n: number, width: number): string {
  let out = '';
  for (let i = 0; i < width; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62Fixed(crc32(body) >>> 0, CHECKSUM_CHARS);
}

export function keyLength(prefix: string): number {
  return prefix.length + RANDOM_CHARS + CHECKSUM_CHARS;
}

/** A new key: uniform base62 from the CSPRNG (rejection-free via randomInt), with its checksum. */
export function generateKey(prefix: string = DEFAULT_KEY_PREFIX): string {
  let random = '';
  for (let i = 0; i < RANDOM_CHARS; i++) random += BASE62[randomInt(62)];
  const body = prefix + random;
  return body + checksum(body);
}

/** True when `key` has the deployment's prefix, the exact length, the base62 alphabet and a valid checksum. */
export function isWellFormedKey(key: string, prefix: string): boolean {
  if (key.length !== prefix.length + RANDOM_CHARS + CHECKSUM_CHARS) return false;
  if (!key.startsWith(prefix)) return false;
  for (let i = prefix.length; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c >= 128 || IS_BASE62[c] === 0) return false;
  }
  const cut = key.length - CHECKSUM_CHARS;
  return checksum(key.slice(0, cut)) === key.slice(cut);
}

/** Hex SHA-256 of the key: the only form in which the store knows a key. */
export function keyDigest(key: string): string {
  return hash('sha256', key, 'hex');
}

/**
 * The most of a key that may ever be shown or logged: its prefix (or first 3 chars) and last four.
 * Short or odd values are not echoed at all.
 */
export function maskKey(key: string, prefix: string = DEFAULT_KEY_PREFIX): string {
  if (key.length < 20) return '[redacted]';
  const head = key.startsWith(prefix) && prefix.length <= 12 ? prefix : key.slice(0, 3);
  const safe = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '?');
  return `${safe(head)}…${safe(key.slice(-4))}`;
}
