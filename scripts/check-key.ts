/**
 * Reads candidate keys (one per line) on stdin and prints those whose checksum is valid, masked —
 * a filter for secret-scanner findings. Usage: scripts/node scripts/check-key.ts [prefix] < findings.txt
 */
import { createInterface } from 'node:readline';
import { DEFAULT_KEY_PREFIX, isWellFormedKey, maskKey } from '../src/core/key-format.ts';

const prefix = process.argv[2] ?? DEFAULT_KEY_PREFIX;
let found = 0;
for await (const line of createInterface({ input: process.stdin })) {
  for (const m of line.matchAll(/[A-Za-z0-9_-]+/g)) {
    if (isWellFormedKey(m[0], prefix)) {
      found++;
      console.log(`valid keygate key: ${maskKey(m[0], prefix)}`);
    }
  }
}
process.exitCode = found > 0 ? 1 : 0;
