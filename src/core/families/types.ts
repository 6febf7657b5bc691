/**
 * What a protocol family is (docs/architecture.md, "where a new family goes"): everything keygate
 * knows about one provider protocol, in one module per family (`openai.ts`, `anthropic.ts`,
 * `google.ts`), listed by the registry (`index.ts`). The rest of the code asks the registry
 * (`familyModule(name)`) instead of comparing family names. Pure data and pure functions.
 */
import type { FamilyCatalog } from './endpoint-rows.ts';

/**
 * Where a known endpoint carries the model: `body` (JSON or multipart), `path` (a `{model}`
 * segment, the body absent or the same), or `google`/`resource` (read by src/core/model/path.ts).
 */
export type ModelPlace = 'body' | 'path' | 'google' | 'resource';

/** One known endpoint of restricted keys (docs/models.md, "Known endpoints"): its methods, path template and where the model is. */
export interface ModelEndpointRow {
  readonly methods: readonly string[];
  readonly template: string;
  readonly place: ModelPlace;
}

export interface ProtocolFamily<N extends string = string> {
  readonly name: N;
  /**
   * Path rules: the bare request paths (query and fragment removed) that are this family's when
   * neither the route nor the operator's prefix table says. Families are tried in the registry's
   * order, each rule of one family before the next family's; a path none claims is the default
   * family's. Data, compiled by the registry into one table (no call per family on the hot path).
   */
  readonly paths: {
    readonly exact: readonly string[];
    readonly prefixes: readonly string[];
    /** A Google custom method on a model: `…/models/{model}:{method}` (the last `/models/`, then a `:`). */
    readonly modelMethod: boolean;
  };
  /** The deny shape the family's SDKs read (src/core/deny-response.ts adds the common headers). */
  readonly deny: {
    /**
     * The error body of a deny: `msg` and `code` are JSON string literals already, `requestId` is raw
     * (hostile input: quoted with `q`).
     */
    body(status: number, msg: string, code: string, requestId: string, errorDomain: string, q: (s: string) => string): string;
    /** Also send the request id as `request-id` (the family's SDKs read it there). */
    readonly requestIdHeader: boolean;
  };
  /** Where the model is (src/core/model/). */
  readonly model: {
    /** The known endpoints of a restricted key at this entry, in match order (path forms before body forms); compiled by src/core/model/endpoints.ts. */
    readonly endpoints: readonly ModelEndpointRow[];
    /** The provider a bare model name read at this family's entry belongs to (`anthropic/x`), or null: it stays bare. */
    readonly bareProvider: string | null;
    /** A resource prefix of model names dropped before qualifying (Google's `models/`), or null. */
    readonly resourcePrefix: string | null;
    /**
     * How request paths name models: `gemini` (`…/models/{model}:method`, Vertex
     * `publishers/{p}/models/…`), or `resource` (only a read of `/v1/models/{model}`).
     */
    readonly pathForm: 'gemini' | 'resource';
    /** Vertex: the publisher whose models are named without it (`publishers/google/models/x` is `x`). */
    readonly ownPublisher: string | null;
  };
  /** The family's endpoint catalog (src/core/endpoints/<family>.ts): every path's class, model place and usage reader. */
  readonly catalog: FamilyCatalog;
  /**
   * Metering: the request can ask a stream for its usage (`stream_options.include_usage`), so the
   * usage guarantee rewrites or refuses chat and completions bodies (src/core/include-usage.ts).
   * The usage readers themselves are metering's (src/metering/usage/<family>.ts).
   */
  readonly streamUsageOption: boolean;
  /** Telemetry: `gen_ai.provider.name` (the GenAI conventions' well-known value). */
  readonly providerName: string;
}
