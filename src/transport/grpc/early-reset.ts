/**
 * HTTP/2's rule for a response complete before its request ended: reset the stream with
 * RST_STREAM(NO_ERROR) ("stop sending, the answer is complete"), so what the client still sends is
 * neither read nor granted flow-control window. One rule for every gRPC transport on `node:http2`:
 * the h2 server and the grpc-js fallback arm it on every stream they accept.
 */
import * as http2 from 'node:http2';

type Stream = http2.ServerHttp2Stream;

/** Resets `stream` with NO_ERROR once its response has been written, if the request has not ended by then. */
export function resetWhenAnsweredEarly(stream: Stream): void {
  stream.once('finish', onFinish);
}

function onFinish(this: Stream): void {
  if (this.destroyed || this.readableEnded) return;
  // After the answer has gone out: a reset submitted before it is written can overtake it.
  setImmediate(resetNoError, this, 0);
}

/** Turns of the event loop to wait for the answer's end (END_STREAM written) before resetting anyway. */
const WAIT_TURNS = 64;

function resetNoError(stream: Stream, turns: number): void {
  if (stream.destroyed || stream.readableEnded || stream.closed) return;
  // An answer with trailers (sent on `wantTrailers`): reset once they are written (the stream
  // half-closed on our side), else the RST_STREAM goes out before them.
  if (stream.state?.localClose !== 1 && turns < WAIT_TURNS) {
    setImmediate(resetNoError, stream, turns + 1);
    return;
  }
  stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

/**
 * Arms the rule on every stream of the `node:http2` servers behind a server that does not expose
 * its streams (grpc-js keeps them in `http2Servers`; checked at run time, and a test fails if it goes).
 */
export function armHttp2Servers(servers: Iterable<unknown>): number {
  let n = 0;
  for (const s of servers) {
    if (s !== null && typeof s === 'object' && typeof (s as { on?: unknown }).on === 'function') {
      (s as http2.Http2Server).on('stream', resetWhenAnsweredEarly);
      n++;
    }
  }
  return n;
}
