/**
 * Decimal text ↔ integers, by string arithmetic (never a float in money).
 *
 * - `decimalToScaled("2.5", 6)` → 2500000n: a non-negative decimal with at most `scale` fractional
 *   digits, as an integer of 10^-scale units; more digits, a sign, an exponent or other text → null.
 * - `numberText(2.5)` → "2.5": a catalog number as the decimal text its literal was written with
 *   (JavaScript's shortest round-trip form, the exponent form `1e-7` expanded by moving the point).
 * - `scaledToDecimal(2500000n, 6)` → "2.5": the exact decimal text of a scaled integer.
 */

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/** A non-negative decimal text as an integer of 10^-scale units, or null when it is not one exactly. */
export function decimalToScaled(text: string, scale: number): bigint | null {
  const m = DECIMAL.exec(text);
  if (m === null || m[1]!.length > 30) return null;
  const frac = (m[2] ?? '').replace(/0+$/, '');
  if (frac.length > scale) return null;
  return BigInt(m[1]! + frac.padEnd(scale, '0'));
}

/** A finite non-negative number as plain decimal text (no exponent), exactly its shortest round-trip form. */
export function numberText(n: number): string {
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`not a finite non-negative number: ${n}`);
  const s = String(n);
  const e = /^(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (e === null) return s;
  const digits = e[1]! + (e[2] ?? '');
  const point = e[1]!.length + Number(e[3]);
  if (point <= 0) return `0.${'0'.repeat(-point)}${digits}`.replace(/\.?0+$/, '') || '0';
  if (point >= digits.length) return digits + '0'.repeat(point - digits.length);
  return `${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** The exact decimal text of `v` × 10^-scale (trailing zeros dropped). */
export function scaledToDecimal(v: bigint, scale: number): string {
  const neg = v < 0n;
  const a = (neg ? -v : v).toString().padStart(scale + 1, '0');
  const point = a.length - scale;
  let end = a.length; // the trailing zeros of the fraction dropped (a loop: this runs per booking)
  while (end > point && a.charCodeAt(end - 1) === 48) end--;
  const int = a.slice(0, point);
  return `${neg ? '-' : ''}${int}${end > point ? `.${a.slice(point, end)}` : ''}`;
}

/** Six decimals: micro-units of a currency unit, and the scale of multipliers. */
export const MICRO = 6;
export const ONE_SCALED = 1_000_000n;
