/**
 * `envoy.service.ext_proc.v3.ExternalProcessor/Process` (bidirectional): each ProcessingRequest
 * is handed to a metered stream (`src/metering/meter.ts`) and answered at once with what it says
 * (nothing in `observability_mode`); when the stream has nothing more to meter it is ended with
 * gRPC OK, which Envoy takes as "continue without processing". The answers never change a
 * response (only an OpenAI streamed request body, to ask for usage). A stream refused at the
 * stream bound, or any failure while metering, is ended with OK too: metering never fails a
 * request (with `failure_mode_allow: true` in envoy.yaml, not even an error status would).
 */
import { ANSWER_PHASES, continueResponse } from '../../../metering/ext-proc-codec.ts';
import { frameBytes } from '../../grpc/codec.ts';
import type { Meter } from '../../../metering/meter.ts';
import { GrpcStatus as Status } from '../grpc.ts';
import type { Call, CallListener, ServiceMethod } from '../../service.ts';

const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const PROCESS_PATH = `/${EXT_PROC_SERVICE}/Process`;

/**
 * The "continue" answers (the session's shared constant bytes) framed once: almost every message of
 * a stream is answered with one of them, so none is copied into a new frame per message.
 */
const FRAMED = new Map<Buffer, Buffer>(ANSWER_PHASES.map((p) => [continueResponse(p), frameBytes(continueResponse(p))]));

/** An answer with the 5-byte gRPC prefix (not compressed): a prebuilt one, else a new frame. */
function framed(reply: Buffer): Buffer {
  return FRAMED.get(reply) ?? frameBytes(reply);
}

export class ExtProcMethod implements ServiceMethod {
  readonly path = PROCESS_PATH;
  readonly kind = 'bidi' as const;
  readonly #meter: Meter;

  constructor(meter: Meter) {
    this.#meter = meter;
  }

  open(call: Call): CallListener {
    const stream = this.#meter.open();
    if (stream === null) {
      call.end(Status.OK);
      return { message: () => {} };
    }
    stream.onExpire = () => call.end(Status.OK);
    return {
      message: (bytes) => {
        if (call.closed) return;
        // the session reads what it needs during the call (the bytes may be a pooled buffer)
        const step = stream.message(bytes);
        if (step.reply !== null) call.send(framed(step.reply));
        if (step.close) {
          stream.end();
          call.end(Status.OK);
        }
      },
      halfClose: () => {
        stream.end();
        call.end(Status.OK);
      },
      cancel: () => stream.end(),
    };
  }
}
