/**
 * `envoy.service.ext_proc.v3.ExternalProcessor/Process` (bidirectional): each ProcessingRequest
 * is decoded (`../ext-proc.ts`), handed typed to a metered stream (`src/metering/meter.ts`) and
 * answered at once with what it says
 * (nothing in `observability_mode`); when the stream has nothing more to meter it is ended with
 * gRPC OK, which Envoy takes as "continue without processing". The answers never change a
 * response (only an OpenAI streamed request body, to ask for usage). A stream refused at the
 * stream bound, or any failure while metering, is ended with OK too: metering never fails a
 * request (with `failure_mode_allow: true` in envoy.yaml, not even an error status would).
 */
import { ANSWER_PHASES, continueResponse, decodeProcessingRequest, encodeAnswer, WireError } from '../ext-proc.ts';
import { frameBytes } from '../../grpc/codec.ts';
import type { Meter, MeterStream } from '../../../metering/meter.ts';
import type { MeterAnswer, Phase } from '../../../metering/messages.ts';
import type { MeterStep } from '../../../metering/session.ts';
import { GrpcStatus as Status } from '../grpc.ts';
import type { Call, CallListener, ServiceMethod } from '../../service.ts';

const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const PROCESS_PATH = `/${EXT_PROC_SERVICE}/Process`;

/**
 * The "continue" answers framed once: almost every message of a stream is answered with one of
 * them, so none is encoded or copied into a new frame per message.
 */
const FRAMED = Object.fromEntries(ANSWER_PHASES.map((p) => [p, frameBytes(continueResponse(p))])) as Record<Phase, Buffer>;

/** An answer with the 5-byte gRPC prefix (not compressed): a prebuilt one, else a new frame. */
function framed(reply: MeterAnswer): Buffer {
  return reply.kind === 'continue' ? FRAMED[reply.phase] : frameBytes(encodeAnswer(reply));
}

/** One message's bytes, decoded (its metadata only while the stream has none) and metered. */
function meter(stream: MeterStream, bytes: Buffer): MeterStep {
  let req;
  try {
    req = decodeProcessingRequest(bytes, { metadata: stream.wantsMetadata });
  } catch (e) {
    if (!(e instanceof WireError)) throw e;
    return stream.undecodable();
  }
  return stream.message(req);
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
        const step = meter(stream, bytes);
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
