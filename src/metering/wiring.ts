/**
 * The sidecar's metering from its config: the booking connection (its own: a flush never queues in
 * front of a decision's lookup; connected on the first booking), the booker, the metrics, and the
 * price table read through the sidecar's cached store (invalidated like every other record).
 */
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { ACCOUNT_RECORD, PRICES_RECORD, type AccountState } from '../schema/records.ts';
import type { Schema } from '../schema/redis-schema.ts';
import { isPending, type RecordSource } from '../store/record-source.ts';
import { connectRedis } from '../store/redis.ts';
import { MeteringMetrics } from './metrics.ts';
import { meteredResponseOf, type MeteredHub } from '../telemetry/metered.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { MONEY_DEFAULTS } from '../core/money.ts';
import { Booker, redisBookingWrite } from './booker.ts';
import { Meter } from './meter.ts';
import type { PriceTable } from '../schema/prices.ts';
import { DEFAULT_METER_OPTIONS } from './session.ts';
import { priceCatalog } from '../prices/index.ts';
import { ONE_SCALED } from '../prices/decimal.ts';
import { OWNED_TTL_SECONDS } from '../schema/owned.ts';
import { RECORD_OWNED } from '../schema/owned-scripts.ts';
import type { RedisClient } from '../store/redis.ts';
import { systemClock, type Clock } from '../core/clock.ts';

type WithRecordOwned = { kgRecordOwned(key: string, account: string, createdAt: string, keyId: string, ttl: string): Promise<unknown> };

/** Records an owned provider object (an OpenAI background or stored response) on the metering connection (RECORD_OWNED by EVALSHA). */
export function ownedRecorder(redis: RedisClient, s: Schema, clock: Clock = systemClock): (o: { provider: string; id: string; account: string; keyId: string }) => Promise<void> {
  if (!('kgRecordOwned' in redis)) redis.defineCommand('kgRecordOwned', { numberOfKeys: 1, lua: RECORD_OWNED });
  const r = redis as RedisClient & WithRecordOwned;
  return async (o) => {
    await r.kgRecordOwned(s.owned(o.provider, o.id), o.account, String(clock.now()), o.keyId, String(OWNED_TTL_SECONDS));
  };
}

/**
 * The price table now: the cached record; when the store cannot answer, the last table read (a
 * price change is then applied once the store answers again); with none read yet, the lookup's
 * failure (the meter reads again until the store answers; see `Meter`).
 */
export function priceSource(store: RecordSource): () => PriceTable | Promise<PriceTable> {
  let last: PriceTable | null = null;
  return () => {
    const v = store.lookup(PRICES_RECORD, '');
    if (!isPending(v)) return (last = v);
    return v.then(
      (t) => (last = t),
      (err: unknown) => {
        if (last !== null) return last;
        throw err;
      },
    );
  };
}

/** The account's price multiplier through the cached store (the account record; absent or off the schema: 1). */
export function accountMultiplierSource(store: RecordSource): (account: string) => bigint | Promise<bigint> {
  const of = (st: AccountState) => (typeof st.priceMultiplier === 'bigint' ? st.priceMultiplier : ONE_SCALED);
  return (account) => {
    const v = store.lookup(ACCOUNT_RECORD, account);
    return isPending(v) ? v.then(of) : of(v);
  };
}

export function createMeter(config: Config, s: Schema, store: RecordSource, metrics: Metrics, log: Logger, hub?: MeteredHub): Meter {
  const redis = connectRedis(config.redisUrl, { commandTimeoutMs: Math.max(1000, config.redisTimeoutMs), connectionName: 'keygate-meter', lazyConnect: true, queueWhileOffline: true });
  redis.on('error', (err: Error) => log.debug({ err: { message: err.message } }, 'metering connection error'));
  metrics.watchRedis(redis, 'meter');
  let meter: Meter | null = null;
  let booker: Booker | null = null;
  const mm = new MeteringMetrics(metrics.registry, () => meter?.openStreams ?? 0, () => booker?.pending ?? 0);
  booker = new Booker(
    redisBookingWrite(redis, s, { idempotencySeconds: MONEY_DEFAULTS.usageIdempotencySeconds, logMaxEntries: config.usageLogMax }),
    log,
    {
      booked: (p, lag) => {
        mm.bookings.inc({ result: 'booked' });
        mm.lag.observe(lag);
        const b = p.booking;
        mm.tokens.inc({ direction: 'input' }, b.input_tokens);
        mm.tokens.inc({ direction: 'cached_input' }, b.cached_input_tokens);
        mm.tokens.inc({ direction: 'cache_write' }, b.cache_write_tokens);
        mm.tokens.inc({ direction: 'output' }, b.output_tokens);
        mm.tokens.inc({ direction: 'reasoning' }, b.reasoning_tokens);
        // Per-account metrics and OpenTelemetry, when on (nothing subscribed otherwise).
        if (hub?.observed && p.context) hub.booked(meteredResponseOf(b, { ...p.context, costMicros: p.amountMicros, endedAtMs: systemClock.now() }));
      },
      unbooked: (_p, reason) => {
        if (reason === 'duplicate') mm.bookings.inc({ result: 'duplicate' });
        else mm.unbooked.inc({ reason: reason === 'dropped' ? 'queue-full' : reason === 'lost' ? 'shutdown' : 'floor' });
      },
      flushFailed: () => mm.failures.inc({ kind: 'flush' }),
    },
    { intervalMs: config.meterFlushMs, onClosed: () => redis.disconnect() },
  );
  meter = new Meter({
    booker,
    prices: priceSource(store),
    catalog: priceCatalog(config.priceCatalog),
    accountMultiplier: accountMultiplierSource(store),
    metrics: mm,
    log,
    options: { ...DEFAULT_METER_OPTIONS, forceUsage: config.meterForceUsage, keyIdHeader: config.keyIdHeader, accountHeader: config.accountHeader, errorDomain: config.errorDomain },
    limits: { maxStreams: config.meterMaxStreams, maxStreamMs: config.meterMaxStreamMs },
    recordOwned: ownedRecorder(redis, s),
  });
  return meter;
}
