/**
 * Bidirectional streaming through the registered-handler interface (`src/transport/service.ts`),
 * on both gRPC transports over real sockets: a test-only counter service registered beside the
 * Envoy services answers each message at once with its number and the message's length. Many
 * messages, half-close, cancel, an oversize message mid-stream, a client that stops reading, the
 * per-message receive timeout of a long stream, and a long connection passing far more than the
 * per-connection byte budget in accepted messages.
 */
import * as http2 from 'node:http2';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import type { GrpcServerOptions } from '../src/transport/envoy/grpc.ts';
import { GrpcTransport } from '../src/transport/grpc-js/server.ts';
import { H2GrpcTransport } from '../src/transport/h2/server.ts';
import { responseOptions } from '../src/transport/response-options.ts';
import type { Call, ServiceMethod, ServiceSet } from '../src/transport/service.ts';
import type { Transport } from '../src/transport/transport.ts';
import { connect, frame, readFrames } from './helpers/h2-raw.ts';

const PATH = '/keygate.test.Counter/Count';
const MiB = 1024 * 1024;
const MAX = 256 * 1024;
const RECEIVE_TIMEOUT_MS = 600;

/** What the counter saw, per call, for the assertions. */
interface Seen {
  messages: number;
  halfClosed: boolean;
  cancelled: boolean;
  sendRefused: number;
}

/**
 * The test-only service: each message answered at once with 8 bytes (its number, its length).
 * A message "stop" ends the call OK; "flood" sends 64 KiB answers until `send` says stop, then
 * keeps sending (a handler ignoring back-pressure) until the transport cancels it.
 */
function counter(seen: Seen[]): ServiceMethod {
  return {
    path: PATH,
    kind: 'bidi',
    open(call: Call) {
      const s: Seen = { messages: 0, halfClosed: false, cancelled: false, sendRefused: 0 };
      seen.push(s);
      return {
        message(bytes) {
          s.messages++;
          if (bytes.toString() === 'stop') return call.end(0);
          if (bytes.toString() === 'flood') {
            const big = frame(Buffer.alloc(64 * 1024, 1));
            for (let i = 0; i < 10_000 && !call.closed; i++) if (!call.send(big)) s.sendRefused++;
            return;
          }
          const answer = Buffer.alloc(8);
          answer.writeUInt32BE(s.messages, 0);
          answer.writeUInt32BE(bytes.length, 4);
          call.send(frame(answer));
        },
        halfClose() {
          s.halfClosed = true;
          call.end(0);
        },
        cancel() {
          s.cancelled = true;
        },
      };
    },
  };
}

const SIZE_PATH = '/keygate.test.Counter/Size';

/** A test-only unary method: answers the message's length. */
const size: ServiceMethod = {
  path: SIZE_PATH,
  kind: 'unary',
  open: (call) => ({
    message(bytes) {
      const a = Buffer.alloc(4);
      a.writeUInt32BE(bytes.length, 0);
      call.send(frame(a));
      call.end(0);
    },
  }),
};

/** A service set of the test's own methods only: the transports know no service. */
const only = (methods: ServiceMethod[]): ServiceSet => ({ methods, inFlight: 0, setServing: () => {}, shutdown: () => {} });

const TRANSPORTS = {
  h2: (o: GrpcServerOptions, methods: ServiceMethod[]) => new H2GrpcTransport(only(methods), o, pino({ level: 'silent' })),
  'grpc-js': (o: GrpcServerOptions, methods: ServiceMethod[]) => new GrpcTransport(only(methods), o),
};

for (const [name, make] of Object.entries(TRANSPORTS)) {
  describe(`bidirectional streams (${name})`, () => {
    const seen: Seen[] = [];
    let transport: Transport;
    let port: number;
    beforeAll(async () => {
      const c = loadConfig({}, {});
      transport = make(
        {
          ...responseOptions(c),
          host: '127.0.0.1',
          port: 0,
          maxReceiveBytes: MAX,
          receiveTimeoutMs: RECEIVE_TIMEOUT_MS,
          maxBufferedBytes: 64 * MiB,
          maxConnectionBufferedBytes: 2 * MAX,
        },
        [counter(seen), size],
      );
      port = await transport.listen();
    });
    afterAll(async () => {
      await transport?.close(1000);
    });

    const open = async () => {
      const session = await connect(port);
      const stream = session.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => {});
      const reader = readFrames(stream);
      return { session, stream, reader };
    };

    it('answers each of many messages at once, in order; half-close ends it OK', async () => {
      const { session, stream, reader } = await open();
      try {
        for (let i = 1; i <= 500; i++) {
          stream.write(frame(Buffer.alloc(i % 97)));
          const a = await reader.next();
          expect(a.readUInt32BE(0)).toBe(i);
          expect(a.readUInt32BE(4)).toBe(i % 97);
        }
        stream.end();
        expect(await reader.status).toBe('0');
        expect(seen.at(-1)).toMatchObject({ messages: 500, halfClosed: true, cancelled: false });
      } finally {
        session.destroy();
      }
    });

    it('messages split across and packed into DATA frames arrive whole', async () => {
      const { session, stream, reader } = await open();
      try {
        const all = Buffer.concat(Array.from({ length: 50 }, (_, i) => frame(Buffer.alloc(1000 + i, i))));
        for (let o = 0; o < all.length; o += 777) stream.write(all.subarray(o, o + 777));
        for (let i = 1; i <= 50; i++) expect((await reader.next()).readUInt32BE(4)).toBe(1000 + i - 1);
        stream.end();
        expect(await reader.status).toBe('0');
      } finally {
        session.destroy();
      }
    });

    it('a burst of messages in one write, the last ending the call: every answer arrives, in order, before the status', async () => {
      // the h2 transport gathers the answers to one DATA chunk's messages into one write: the
      // call's end must not overtake them, and many answers must not be held past the gather bound
      const { session, stream, reader } = await open();
      try {
        // h2: 3000 answers of 13 bytes, more than one gather's worth (16 KiB); grpc-js holds at most
        // 1024 answers a client has not taken
        const n = name === 'h2' ? 3000 : 1000;
        stream.write(Buffer.concat([...Array.from({ length: n }, (_, i) => frame(Buffer.alloc(i % 7))), frame(Buffer.from('stop'))]));
        for (let i = 1; i <= n; i++) {
          const a = await reader.next();
          expect(a.readUInt32BE(0)).toBe(i);
          expect(a.readUInt32BE(4)).toBe((i - 1) % 7);
        }
        expect(await reader.status).toBe('0');
        expect(seen.at(-1)).toMatchObject({ messages: n + 1, cancelled: false });
      } finally {
        session.destroy();
      }
    });

    it('a message of exactly the receive limit is accepted mid-stream; one byte more ends the stream RESOURCE_EXHAUSTED', async () => {
      const { session, stream, reader } = await open();
      try {
        stream.write(frame(Buffer.alloc(10)));
        await reader.next();
        stream.write(frame(Buffer.alloc(MAX)));
        expect((await reader.next()).readUInt32BE(4)).toBe(MAX);
        stream.write(frame(Buffer.alloc(MAX + 1)));
        expect(await reader.status).toBe('8');
        await reader.closed;
        expect(seen.at(-1)).toMatchObject({ messages: 2, cancelled: true });
      } finally {
        session.destroy();
      }
    });

    it('a client cancel is told to the handler', async () => {
      const { session, stream, reader } = await open();
      try {
        stream.write(frame(Buffer.from('x')));
        await reader.next();
        const s = seen.at(-1)!;
        stream.close(http2.constants.NGHTTP2_CANCEL);
        for (let i = 0; i < 100 && !s.cancelled; i++) await new Promise((r) => setTimeout(r, 10));
        expect(s).toMatchObject({ messages: 1, cancelled: true, halfClosed: false });
      } finally {
        session.destroy();
      }
    });

    it('the handler ending the call before the client is reset with NO_ERROR', async () => {
      const { session, stream, reader } = await open();
      try {
        stream.write(frame(Buffer.from('stop')));
        expect(await reader.status).toBe('0');
        expect(await reader.closed).toBe(http2.constants.NGHTTP2_NO_ERROR);
      } finally {
        session.destroy();
      }
    });

    it('a client that stops reading: send says wait, and past the send bound the call is cancelled', { timeout: 20_000 }, async () => {
      const { session, stream } = await open();
      try {
        stream.pause(); // never reads the answers
        stream.write(frame(Buffer.from('flood')));
        const s = await waitFor(() => seen.find((x) => x.sendRefused > 0 && x.cancelled));
        expect(s.sendRefused).toBeGreaterThan(0);
      } finally {
        session.destroy();
      }
    });

    if (name === 'h2') {
      it('a long stream: each message within the receive timeout, not the stream', { timeout: 20_000 }, async () => {
        const { session, stream, reader } = await open();
        try {
          // 5 messages, each after a pause of most of the timeout: the stream lives ~4x the timeout
          for (let i = 1; i <= 5; i++) {
            await new Promise((r) => setTimeout(r, RECEIVE_TIMEOUT_MS * 0.8));
            stream.write(frame(Buffer.alloc(4)));
            expect((await reader.next()).readUInt32BE(0)).toBe(i);
          }
          // a message that stops arriving half-way is answered DEADLINE_EXCEEDED
          const t0 = Date.now();
          stream.write(frame(Buffer.alloc(100)).subarray(0, 50));
          expect(await reader.status).toBe('4');
          expect(Date.now() - t0).toBeGreaterThanOrEqual(RECEIVE_TIMEOUT_MS - 10);
        } finally {
          session.destroy();
        }
      });

      it('a message begun in the chunk of the one before gets its own timeout; a message still incomplete after more chunks is cut at the timeout of its first byte', { timeout: 20_000 }, async () => {
        const { session, stream, reader } = await open();
        try {
          // message 1 whole and the first half of message 2 in one chunk; after 0.8 x the timeout
          // the rest of 2 and half of 3; after 0.8 x again the rest of 3: each message within the
          // timeout of its own first byte, so all three are answered
          const m = (n: number) => frame(Buffer.alloc(n));
          await new Promise((r) => setTimeout(r, RECEIVE_TIMEOUT_MS * 0.8));
          stream.write(Buffer.concat([m(4), m(40).subarray(0, 20)]));
          expect((await reader.next()).readUInt32BE(0)).toBe(1);
          await new Promise((r) => setTimeout(r, RECEIVE_TIMEOUT_MS * 0.8));
          stream.write(Buffer.concat([m(40).subarray(20), m(60).subarray(0, 30)]));
          expect((await reader.next()).readUInt32BE(0)).toBe(2);
          await new Promise((r) => setTimeout(r, RECEIVE_TIMEOUT_MS * 0.8));
          stream.write(m(60).subarray(30));
          expect((await reader.next()).readUInt32BE(0)).toBe(3);
          // a message arriving in pieces, none completing it: the timeout runs from its first byte
          const t0 = Date.now();
          const big = m(100);
          stream.write(big.subarray(0, 10));
          await new Promise((r) => setTimeout(r, RECEIVE_TIMEOUT_MS * 0.5));
          stream.write(big.subarray(10, 20));
          await new Promise((r) => setTimeout(r, RECEIVE_TIMEOUT_MS * 0.3));
          stream.write(big.subarray(20, 30));
          expect(await reader.status).toBe('4');
          const took = Date.now() - t0;
          expect(took).toBeGreaterThanOrEqual(RECEIVE_TIMEOUT_MS - 10);
          // not restarted by the later pieces (restarted at the last one, it could not end before 1.8x)
          expect(took).toBeLessThan(RECEIVE_TIMEOUT_MS * 1.8);
        } finally {
          session.destroy();
        }
      });
    }

    it('unary: a message of exactly the receive limit is accepted, one byte more refused RESOURCE_EXHAUSTED', async () => {
      const session = await connect(port);
      try {
        const unary = (n: number) => {
          const st = session.request({ ':method': 'POST', ':path': SIZE_PATH, 'content-type': 'application/grpc', te: 'trailers' });
          st.on('error', () => {});
          const r = readFrames(st);
          st.end(frame(Buffer.alloc(n)));
          return r;
        };
        const ok = unary(MAX);
        expect((await ok.next()).readUInt32BE(0)).toBe(MAX);
        expect(await ok.status).toBe('0');
        expect(await unary(MAX + 1).status).toBe('8');
        // and the connection goes on: 200 more at the limit (50 MiB through a 512 KiB budget)
        for (let i = 0; i < 200; i++) expect(await unary(MAX).status).toBe('0');
      } finally {
        session.destroy();
      }
    }, 60_000);

    it('one connection passes far more than its byte budget in accepted messages', { timeout: 60_000 }, async () => {
      // budget 2×MAX per connection: 400 messages of MAX/2 (50 MiB) over one stream and many unary-sized streams
      const { session, stream, reader } = await open();
      try {
        const m = frame(Buffer.alloc(MAX / 2));
        for (let i = 1; i <= 400; i++) {
          stream.write(m);
          expect((await reader.next()).readUInt32BE(4)).toBe(MAX / 2);
        }
        stream.end();
        expect(await reader.status).toBe('0');
      } finally {
        session.destroy();
      }
    });
  });
}

async function waitFor<T>(f: () => T | undefined, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}
