/** A raw `node:http2` gRPC client for wire tests: connect, frame a message, read answer frames and the status. */
import * as http2 from 'node:http2';

export function connect(port: number, options: http2.ClientSessionOptions = {}): Promise<http2.ClientHttp2Session> {
  const s = http2.connect(`http://127.0.0.1:${port}`, options);
  s.on('error', () => {});
  return new Promise((resolve, reject) => {
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** The 5-byte gRPC prefix (uncompressed) and the message. */
export function frame(message: Buffer, compressed = 0): Buffer {
  const f: Buffer = Buffer.allocUnsafe(5 + message.length);
  f[0] = compressed;
  f.writeUInt32BE(message.length, 1);
  message.copy(f, 5);
  return f;
}

export interface FrameReader {
  /** The next answer message (rejects when the stream ends first). */
  next(): Promise<Buffer>;
  /** `grpc-status` from the trailers or a trailers-only answer. */
  readonly status: Promise<string | undefined>;
  /** The stream's RST code when it closed. */
  readonly closed: Promise<number>;
}

export function readFrames(stream: http2.ClientHttp2Stream): FrameReader {
  const ready: Buffer[] = [];
  const waiting: { resolve: (b: Buffer) => void; reject: (e: Error) => void }[] = [];
  let buf: Buffer = Buffer.alloc(0);
  let done = false;
  let status: string | undefined;
  stream.on('response', (h) => {
    if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
  });
  stream.on('trailers', (t) => (status = String(t['grpc-status'])));
  stream.on('data', (c: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, c]) : c;
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      const m = buf.subarray(5, 5 + buf.readUInt32BE(1));
      buf = buf.subarray(5 + m.length);
      const w = waiting.shift();
      if (w) w.resolve(m);
      else ready.push(m);
    }
  });
  const closed = new Promise<number>((resolve) =>
    stream.once('close', () => {
      done = true;
      for (const w of waiting.splice(0)) w.reject(new Error(`stream closed (grpc-status ${status})`));
      resolve(stream.rstCode ?? -1);
    }),
  );
  return {
    next: () => {
      const m = ready.shift();
      if (m) return Promise.resolve(m);
      if (done) return Promise.reject(new Error(`stream closed (grpc-status ${status})`));
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
    status: closed.then(() => status),
    closed,
  };
}
