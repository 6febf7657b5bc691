/**
 * Store-driven invalidation: Redis server-assisted client-side caching in broadcast mode.
 *
 * A *link* is a pair of connections to one Redis server: the data connection that the sidecar reads
 * through, and a subscriber on `__redis__:invalidate`. Tracking is enabled on the data connection
 * with `CLIENT TRACKING on REDIRECT <subscriber id> BCAST PREFIX <key:> PREFIX <acct:>`, so the
 * server pushes the name of every changed key under those prefixes (written by any client) to the
 * subscriber, before it replies to the writer. A link is *tracked* only once that command has
 * succeeded for the current pair of connections; any close, reconnect or failed heartbeat of
 * either connection makes it untracked at once (tracking is per connection and is lost with it).
 *
 * Standalone and Sentinel use one link (both connections resolve the master the same way; the
 * subscriber's unique connection name is checked on the data connection's server, so a pair split
 * across two servers during a failover is never trusted). Cluster uses one link per master, with
 * the subscriber on the same node, since each master only reports writes to its own slots; any
 * change of the master set counts as losing tracking.
 *
 * The subscriber speaks RESP2: ioredis drops RESP3 `invalidate` pushes, while in RESP2 the server
 * delivers invalidations as ordinary pub/sub messages (payload: an array of key names, or null for
 * "everything", e.g. FLUSHALL).
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';

export const INVALIDATE_CHANNEL = '__redis__:invalidate';

export interface TrackerEvents {
  /** Keys changed in the store; `null` means everything (FLUSHALL, FLUSHDB). */
  invalidate: [keys: string[] | null];
  /** Tracking is no longer confirmed: a link broke, reconnected, or the topology changed. */
  down: [reason: string];
  /** Tracking is confirmed on every link. */
  up: [];
}

/** The invalidation source the cache listens to. */
export interface Tracker extends EventEmitter<TrackerEvents> {
  /** `true` only while tracking is confirmed on every link (caching is safe). */
  readonly tracked: boolean;
  /** Connection re-establishments seen (data or subscriber, any node). */
  readonly reconnects: number;
  close(): void;
}

export interface TrackingOptions {
  readonly prefixes: readonly string[];
  /** Interval of the liveness check of both connections of a tracked link. */
  readonly heartbeatMs: number;
  /** Delay before retrying a failed attempt to enable tracking. */
  readonly retryMs: number;
  readonly log: Logger;
}

/** Creates the subscriber connection of a link, with the given unique connection name. */
export type SubscriberFactory = (connectionName: string) => Redis;

interface LinkHandlers {
  invalidate(keys: string[] | null): void;
  state(tracked: boolean, reason: string): void;
}

const noop = () => {};

/** One data connection and its redirect subscriber on the same server. */
export class TrackingLink {
  tracked = false;
  reconnects = 0;
  readonly #data: Redis;
  readonly #sub: Redis;
  readonly #subName: string;
  readonly #opts: TrackingOptions;
  readonly #h: LinkHandlers;
  readonly #label: string;
  /** Bumped by every connection event; an attempt only counts if it is unchanged. */
  #gen = 0;
  /** CLIENT ID + SUBSCRIBE for the current subscriber connection. */
  #subSetup: Promise<number> | null = null;
  #attempting = false;
  #closed = false;
  #retry: NodeJS.Timeout | undefined;
  readonly #beat: NodeJS.Timeout;
  #seenReady = { data: false, sub: false };
  readonly #detach: () => void;
  readonly #watched = new WeakSet<object>();

  constructor(data: Redis, makeSub: SubscriberFactory, opts: TrackingOptions, handlers: LinkHandlers, label: string) {
    this.#data = data;
    this.#subName = `keygate-inval-${randomBytes(6).toString('hex')}`;
    this.#sub = makeSub(this.#subName);
    this.#opts = opts;
    this.#h = handlers;
    this.#label = label;

    const onDataReady = () => this.#connected('data');
    const onDataClose = () => this.#lost('data connection closed');
    const onDataConnect = () => this.#watchStream(data, 'data');
    data.on('ready', onDataReady);
    data.on('close', onDataClose);
    data.on('connect', onDataConnect);
    this.#watchStream(data, 'data');
    this.#detach = () => {
      data.off('ready', onDataReady);
      data.off('close', onDataClose);
      data.off('connect', onDataConnect);
    };
    this.#sub.on('connect', () => this.#watchStream(this.#sub, 'invalidation'));
    this.#sub.on('error', (err: Error) => opts.log.debug({ link: label, err: { message: err.message } }, 'invalidation subscriber error'));
    this.#sub.on('ready', () => {
      this.#subSetup = this.#setupSubscriber();
      this.#subSetup.catch(noop);
      this.#connected('sub');
    });
    this.#sub.on('close', () => {
      this.#subSetup = null;
      this.#lost('invalidation connection closed');
    });
    this.#sub.on('messageBuffer', (channel: Buffer, message: unknown) => {
      if (channel.toString() !== INVALIDATE_CHANNEL) return;
      this.#h.invalidate(Array.isArray(message) ? message.map((k) => String(k)) : null);
    });
    this.#beat = setInterval(() => this.#heartbeat(), opts.heartbeatMs);
    this.#beat.unref();
    if (data.status === 'wait') data.connect().catch(noop);
    if (data.status === 'ready') this.#seenReady.data = true;
    this.#kick();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#beat);
    clearTimeout(this.#retry);
    this.#detach();
    this.#gen++;
    this.tracked = false;
    this.#sub.disconnect();
  }

  /**
   * ioredis reports 'close' in the loop's close phase, after requests read in the same iteration;
   * the socket's 'end' (peer closed) and 'error' come earlier, so tracking is dropped before any
   * request that arrived after the connection broke is answered.
   */
  #watchStream(conn: Redis, which: string): void {
    const stream = (conn as unknown as { stream?: NodeJS.EventEmitter }).stream;
    if (!stream || this.#watched.has(stream)) return;
    this.#watched.add(stream);
    const lost = () => {
      if (!this.#closed) this.#lost(`${which} connection broken`);
    };
    stream.once('end', lost);
    stream.once('error', lost);
  }

  async #setupSubscriber(): Promise<number> {
    const id = Number(await this.#sub.client('ID'));
    await this.#sub.subscribe(INVALIDATE_CHANNEL);
    return id;
  }

  #connected(which: 'data' | 'sub'): void {
    if (this.#seenReady[which]) this.reconnects++;
    this.#seenReady[which] = true;
    this.#lost(`${which} connection re-established`);
    this.#kick();
  }

  #lost(reason: string): void {
    this.#gen++;
    if (this.tracked) {
      this.tracked = false;
      this.#opts.log.warn({ link: this.#label, reason }, 'cache invalidation link lost; cache dropped');
      this.#h.state(false, reason);
    }
  }

  #kick(): void {
    if (this.#closed) return;
    setImmediate(() => void this.#attempt());
  }

  #scheduleRetry(): void {
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => void this.#attempt(), this.#opts.retryMs);
    this.#retry.unref();
  }

  async #attempt(): Promise<void> {
    if (this.#closed || this.#attempting || this.tracked) return;
    if (this.#data.status === 'wait') this.#data.connect().catch(noop);
    if (this.#data.status !== 'ready' || this.#sub.status !== 'ready' || !this.#subSetup) return; // a ready event kicks again
    this.#attempting = true;
    const g = this.#gen;
    try {
      const id = await this.#subSetup;
      // The subscriber must be on the data connection's server: check its unique name there.
      const who = String(await this.#data.client('LIST', 'ID', String(id)));
      if (!who.includes(` name=${this.#subName} `)) throw new Error('invalidation subscriber is not on the data connection server');
      if (g !== this.#gen) return;
      await this.#data.client('TRACKING', 'off');
      await this.#data.client('TRACKING', 'on', 'REDIRECT', String(id), 'BCAST', ...this.#opts.prefixes.flatMap((p) => ['PREFIX', p]));
      if (g !== this.#gen || this.#closed) return;
      this.tracked = true;
      this.#opts.log.info({ link: this.#label }, 'cache invalidation tracking on');
      this.#h.state(true, 'tracking on');
    } catch (err) {
      if (g === this.#gen && !this.#closed) {
        this.#opts.log.warn({ link: this.#label, err: { message: (err as Error).message } }, 'enabling cache invalidation failed; retrying');
        this.#scheduleRetry();
      }
    } finally {
      this.#attempting = false;
      if (!this.tracked && g !== this.#gen) this.#kick();
    }
  }

  /** Both connections answer and the server still redirects our tracking to our subscriber. */
  #heartbeat(): void {
    if (!this.tracked || this.#closed) return;
    const g = this.#gen;
    const subSetup = this.#subSetup;
    Promise.all([this.#sub.ping(), this.#data.call('CLIENT', 'TRACKINGINFO') as Promise<unknown>, subSetup])
      .then(([, info, id]) => {
        if (g !== this.#gen) return;
        const redirect = Array.isArray(info) ? info[info.indexOf('redirect') + 1] : undefined;
        if (Number(redirect) !== id) {
          this.#lost('tracking no longer redirected to the subscriber');
          this.#kick();
        }
      })
      .catch((err: Error) => {
        if (g !== this.#gen) return;
        this.#lost(`heartbeat failed: ${err.message}`);
        // Re-establish from scratch: a new subscriber connection, then tracking again.
        this.#sub.disconnect(true);
      });
  }
}

/** Standalone and Sentinel: one link. */
export class SingleTracker extends EventEmitter<TrackerEvents> implements Tracker {
  readonly #link: TrackingLink;

  constructor(data: Redis, makeSub: SubscriberFactory, opts: TrackingOptions) {
    super();
    this.#link = new TrackingLink(
      data,
      makeSub,
      opts,
      {
        invalidate: (keys) => this.emit('invalidate', keys),
        state: (up, reason) => (up ? this.emit('up') : this.emit('down', reason)),
      },
      'primary',
    );
  }

  get tracked(): boolean {
    return this.#link.tracked;
  }

  get reconnects(): number {
    return this.#link.reconnects;
  }

  close(): void {
    this.#link.close();
  }
}

/**
 * Cluster: one link per master (invalidations are per node). Tracked only while every current
 * master's link is tracked; a change of the master set (failover, node added or removed) drops
 * tracking until every new master has confirmed it.
 */
export class ClusterTracker extends EventEmitter<TrackerEvents> implements Tracker {
  readonly #cluster: Cluster;
  readonly #makeSub: (host: string, port: number, name: string) => Redis;
  readonly #opts: TrackingOptions;
  readonly #links = new Map<string, { node: Redis; link: TrackingLink }>();
  #tracked = false;
  #closed = false;
  #reconnectsOfClosed = 0;
  readonly #onTopology = () => this.#sync();
  readonly #onClusterLost = () => this.#recompute('cluster connection lost');

  constructor(cluster: Cluster, makeSub: (host: string, port: number, name: string) => Redis, opts: TrackingOptions) {
    super();
    this.#cluster = cluster;
    this.#makeSub = makeSub;
    this.#opts = opts;
    for (const ev of ['+node', '-node', 'refresh', 'ready'] as const) cluster.on(ev, this.#onTopology);
    for (const ev of ['close', 'end', 'reconnecting'] as const) cluster.on(ev, this.#onClusterLost);
    this.#sync();
  }

  get tracked(): boolean {
    return this.#tracked;
  }

  get reconnects(): number {
    let n = this.#reconnectsOfClosed;
    for (const { link } of this.#links.values()) n += link.reconnects;
    return n;
  }

  close(): void {
    this.#closed = true;
    for (const ev of ['+node', '-node', 'refresh', 'ready'] as const) this.#cluster.off(ev, this.#onTopology);
    for (const ev of ['close', 'end', 'reconnecting'] as const) this.#cluster.off(ev, this.#onClusterLost);
    for (const { link } of this.#links.values()) link.close();
    this.#links.clear();
    this.#tracked = false;
  }

  #sync(): void {
    if (this.#closed) return;
    const masters = new Map<string, Redis>();
    for (const node of this.#cluster.nodes('master')) masters.set(`${node.options.host}:${node.options.port}`, node);
    let changed = false;
    for (const [key, entry] of this.#links) {
      if (masters.get(key) !== entry.node) {
        this.#reconnectsOfClosed += entry.link.reconnects;
        entry.link.close();
        this.#links.delete(key);
        changed = true;
      }
    }
    for (const [key, node] of masters) {
      if (this.#links.has(key)) continue;
      const [host, port] = [node.options.host!, node.options.port!];
      const link = new TrackingLink(
        node,
        (name) => this.#makeSub(host, port, name),
        this.#opts,
        {
          invalidate: (keys) => this.emit('invalidate', keys),
          state: (_up, reason) => this.#recompute(`${key}: ${reason}`),
        },
        key,
      );
      this.#links.set(key, { node, link });
      changed = true;
    }
    if (changed && this.#tracked) {
      this.#tracked = false;
      this.#opts.log.warn({ masters: [...masters.keys()] }, 'cluster topology changed; cache dropped');
      this.emit('down', 'cluster topology changed');
    }
    this.#recompute('cluster topology');
  }

  #recompute(reason: string): void {
    const all =
      !this.#closed &&
      this.#cluster.status === 'ready' &&
      this.#links.size > 0 &&
      [...this.#links.values()].every(({ link }) => link.tracked);
    if (all === this.#tracked) return;
    this.#tracked = all;
    if (all) this.emit('up');
    else this.emit('down', reason);
  }
}
