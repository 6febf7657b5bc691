/**
 * One "sidecar" in its own process for the rate tests: connects to Redis, prints `ready`, waits for
 * a line on stdin, hammers one key and prints its tally as JSON.
 * argv: redis URL, JSON {req, attempts, concurrency}.
 */
import { createInterface } from 'node:readline';
import { RateLimiter } from '../../src/store/rate-limiter.ts';
import { connectRedis } from '../../src/store/redis.ts';
import { hammer } from './rate-hammer.ts';

const [url, spec] = process.argv.slice(2);
const { req, attempts, concurrency } = JSON.parse(spec!);
const redis = connectRedis(url!, { commandTimeoutMs: 2000, connectionName: 'rate-child' });
redis.on('error', () => {});
if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
const limiter = new RateLimiter(redis);
process.stdout.write('ready\n');
const rl = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => rl.once('line', () => resolve()));
const t = await hammer(limiter, req, attempts, concurrency);
await limiter.close();
process.stdout.write(`${JSON.stringify(t)}\n`);
redis.disconnect();
rl.close();
