// A stand-in for the gateway's upstream in docker-compose.yml: plain Node, no dependencies.
// It answers every request with what reached it, so that a `curl` through Envoy shows keygate's
// work: the identity headers it added, and that the key headers were removed.
//
//   PORT (default 8000)  HOST (default 0.0.0.0)
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

const KEY_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key'];
const IDENTITY = { account: 'x-keygate-account-id', keyId: 'x-keygate-key-id' };
const MAX_BODY = 16 * 1024 * 1024;

export function createStub() {
  return createServer((req, res) => {
    let size = 0;
    let model;
    const chunks = [];
    req.on('data', (c) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => {
      try {
        const m = JSON.parse(Buffer.concat(chunks).toString('utf8')).model;
        if (typeof m === 'string') model = m;
      } catch {
        // not JSON: no model
      }
      const out = JSON.stringify({
        stub: 'keygate llm-upstream',
        method: req.method,
        path: req.url,
        account_id: req.headers[IDENTITY.account] ?? null,
        key_id: req.headers[IDENTITY.keyId] ?? null,
        model: model ?? null,
        body_bytes: size,
        // Only the names: a stub must not echo a key back either.
        key_headers_received: KEY_HEADERS.filter((h) => h in req.headers),
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
      res.end(`${out}`);
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = Number(process.env.PORT ?? 8000);
  const server = createStub().listen(port, process.env.HOST ?? '0.0.0.0', () => {
    console.log(JSON.stringify({ msg: 'stub upstream listening', port }));
  });
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
