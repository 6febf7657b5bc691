/**
 * Checks a YAML/JSON document against a protobuf message type the way Envoy loads its bootstrap,
 * but stricter: protobufjs' `fromObject` ignores unknown fields, so this walks the object against
 * the reflected types itself. At every level it rejects unknown fields, deprecated fields and enum
 * values, wrong JSON types, two members of one oneof, and the simplest protoc-gen-validate rules
 * (required oneofs and messages, string min_len, repeated min_items, numeric bounds). Every
 * `google.protobuf.Any` (`typed_config`) is resolved by its `@type`, loading that package's protos
 * on demand from Envoy's API tree.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';

const TYPE_URL = 'type.googleapis.com/';
const WRAPPERS: Record<string, string> = {
  'google.protobuf.DoubleValue': 'double',
  'google.protobuf.FloatValue': 'float',
  'google.protobuf.Int64Value': 'int64',
  'google.protobuf.UInt64Value': 'uint64',
  'google.protobuf.Int32Value': 'int32',
  'google.protobuf.UInt32Value': 'uint32',
  'google.protobuf.BoolValue': 'bool',
  'google.protobuf.StringValue': 'string',
  'google.protobuf.BytesValue': 'bytes',
};
const INT_RANGE: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
  int64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sint64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sfixed64: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
  fixed64: [0, Number.MAX_SAFE_INTEGER],
};
const DURATION = /^-?\d+(\.\d{1,9})?s$/;
const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const kindOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
const isObject = (v: unknown): v is Record<string, unknown> => kindOf(v) === 'object';

export class StrictProto {
  readonly #root = new protobuf.Root();
  readonly #dirs: readonly string[];
  readonly #loadedDirs = new Set<string>();

  constructor(includeDirs: readonly string[], files: readonly string[]) {
    this.#dirs = includeDirs;
    this.#root.resolvePath = (_origin, target) => this.#find(target) ?? target;
    this.#root.loadSync(files as string[], { keepCase: true });
    this.#root.resolveAll();
  }

  /** Every problem found, as `path: message`; empty when the document is valid. */
  validate(typeName: string, doc: unknown): string[] {
    const errors: string[] = [];
    const type = this.#type(typeName);
    if (!type) return [`unknown message type ${typeName}`];
    this.#message(type, doc, '$', errors);
    return errors;
  }

  #find(file: string): string | undefined {
    for (const d of this.#dirs) if (existsSync(join(d, file))) return join(d, file);
    return undefined;
  }

  /** A type by full name, loading its package directory (`a.b.v3.T` → `a/b/v3/*.proto`) if needed. */
  #type(name: string): protobuf.Type | undefined {
    const found = this.#lookup(name);
    if (found) return found;
    const parts = name.split('.');
    for (let cut = parts.length - 1; cut > 0; cut--) {
      const dir = parts.slice(0, cut).join('/');
      const files = this.#dirs.flatMap((d) =>
        existsSync(join(d, dir)) ? readdirSync(join(d, dir)).filter((f) => f.endsWith('.proto')).map((f) => `${dir}/${f}`) : [],
      );
      if (files.length === 0 || this.#loadedDirs.has(dir)) continue;
      this.#loadedDirs.add(dir);
      this.#root.loadSync(files, { keepCase: true });
      this.#root.resolveAll();
      return this.#lookup(name);
    }
    return undefined;
  }

  #lookup(name: string): protobuf.Type | undefined {
    const t = this.#root.lookup(name);
    return t instanceof protobuf.Type ? t : undefined;
  }

  #message(type: protobuf.Type, v: unknown, path: string, errors: string[]): void {
    const full = type.fullName.slice(1);
    if (this.#wellKnown(full, v, path, errors)) return;
    if (!isObject(v)) {
      errors.push(`${path}: expected an object for ${full}, got ${kindOf(v)}`);
      return;
    }
    const byName = new Map<string, protobuf.Field>();
    for (const f of type.fieldsArray) {
      byName.set(f.name, f);
      byName.set(camel(f.name), f);
    }
    const oneofSeen = new Map<string, string>();
    for (const [key, value] of Object.entries(v)) {
      const p = `${path}.${key}`;
      const field = byName.get(key);
      if (!field) {
        errors.push(`${p}: unknown field of ${full}`);
        continue;
      }
      if (field.options?.deprecated) errors.push(`${p}: deprecated field of ${full}`);
      if (field.partOf) {
        const other = oneofSeen.get(field.partOf.name);
        if (other) errors.push(`${p}: oneof ${field.partOf.name} already set by ${other}`);
        oneofSeen.set(field.partOf.name, key);
      }
      this.#field(field, value, p, errors);
    }
    for (const oneof of type.oneofsArray) {
      if (oneof.options?.['(validate.required)'] && !oneofSeen.has(oneof.name)) {
        errors.push(`${path}: ${full} needs one of ${oneof.oneof.join(', ')}`);
      }
    }
    for (const f of type.fieldsArray) {
      // (In a oneof, "required" only means the chosen member may not be empty.)
      if (f.options?.['(validate.rules).message.required'] && !f.partOf && !(f.name in v) && !(camel(f.name) in v)) {
        errors.push(`${path}: ${full}.${f.name} is required`);
      }
    }
  }

  #field(field: protobuf.Field, v: unknown, path: string, errors: string[]): void {
    const rules = field.options ?? {};
    if (field instanceof protobuf.MapField) {
      if (!isObject(v)) return void errors.push(`${path}: expected a map, got ${kindOf(v)}`);
      for (const [k, item] of Object.entries(v)) this.#value(field, item, `${path}.${k}`, errors);
      return;
    }
    if (field.repeated) {
      if (!Array.isArray(v)) return void errors.push(`${path}: expected a list, got ${kindOf(v)}`);
      const min = rules['(validate.rules).repeated.min_items'];
      if (typeof min === 'number' && v.length < min) errors.push(`${path}: needs at least ${min} items`);
      v.forEach((item, i) => this.#value(field, item, `${path}[${i}]`, errors));
      return;
    }
    this.#value(field, v, path, errors);
  }

  #value(field: protobuf.Field, v: unknown, path: string, errors: string[]): void {
    const t = field.resolvedType;
    if (t instanceof protobuf.Type) return this.#message(t, v, path, errors);
    if (t instanceof protobuf.Enum) {
      const known = typeof v === 'string' ? v in t.values : Number.isInteger(v) && Object.values(t.values).includes(v as number);
      if (!known) errors.push(`${path}: ${JSON.stringify(v)} is not a value of ${t.fullName.slice(1)}`);
      else if (typeof v === 'string' && t.valuesOptions?.[v]?.deprecated) errors.push(`${path}: enum value ${v} is deprecated`);
      return;
    }
    const problem = scalarProblem(field.type, v);
    if (problem) return void errors.push(`${path}: ${problem}`);
    const opts = field.options ?? {};
    for (const [k, bound] of Object.entries(opts)) {
      const m = /^\(validate\.rules\)\.\w+\.(min_len|gt|gte|lt|lte)$/.exec(k);
      if (!m || typeof bound !== 'number') continue;
      const n = m[1] === 'min_len' ? String(v).length : Number(v);
      const ok = { min_len: n >= bound, gt: n > bound, gte: n >= bound, lt: n < bound, lte: n <= bound }[m[1] as 'gt'];
      if (!ok) errors.push(`${path}: ${JSON.stringify(v)} breaks ${m[1]} ${bound}`);
    }
  }

  /** JSON forms of the well-known types; true when `full` is one (and was checked). */
  #wellKnown(full: string, v: unknown, path: string, errors: string[]): boolean {
    const wrapped = WRAPPERS[full];
    if (wrapped) {
      const problem = scalarProblem(wrapped, v);
      if (problem) errors.push(`${path}: ${problem}`);
      return true;
    }
    switch (full) {
      case 'google.protobuf.Duration':
        if (typeof v !== 'string' || !DURATION.test(v)) errors.push(`${path}: expected a duration like "0.25s", got ${JSON.stringify(v)}`);
        return true;
      case 'google.protobuf.Struct':
        if (!isObject(v)) errors.push(`${path}: expected an object (Struct), got ${kindOf(v)}`);
        return true;
      case 'google.protobuf.Value':
        return true;
      case 'google.protobuf.ListValue':
        if (!Array.isArray(v)) errors.push(`${path}: expected a list (ListValue), got ${kindOf(v)}`);
        return true;
      case 'google.protobuf.Empty':
        if (!isObject(v) || Object.keys(v).length > 0) errors.push(`${path}: expected {} (Empty)`);
        return true;
      case 'google.protobuf.Any': {
        if (!isObject(v)) {
          errors.push(`${path}: expected an object with "@type", got ${kindOf(v)}`);
          return true;
        }
        const url = v['@type'];
        if (typeof url !== 'string' || !url.startsWith(TYPE_URL)) {
          errors.push(`${path}: "@type" must be ${TYPE_URL}<message>, got ${JSON.stringify(url)}`);
          return true;
        }
        const inner = this.#type(url.slice(TYPE_URL.length));
        if (!inner) {
          errors.push(`${path}: "@type" ${url} names no known message`);
          return true;
        }
        const { '@type': _drop, ...rest } = v;
        const innerFull = inner.fullName.slice(1);
        const special = innerFull.startsWith('google.protobuf.') && innerFull !== 'google.protobuf.Any';
        this.#message(inner, special ? rest.value : rest, special ? `${path}.value` : path, errors);
        return true;
      }
      default:
        return false;
    }
  }
}

/** Why `v` is not a valid proto3 JSON value of scalar type `type`, or undefined when it is. */
function scalarProblem(type: string, v: unknown): string | undefined {
  const range = INT_RANGE[type];
  if (range) {
    const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n)) return `expected an integer (${type}), got ${JSON.stringify(v)}`;
    if (n < range[0] || n > range[1]) return `${n} is out of range for ${type}`;
    return undefined;
  }
  switch (type) {
    case 'string':
      return typeof v === 'string' ? undefined : `expected a string, got ${kindOf(v)}`;
    case 'bool':
      return typeof v === 'boolean' ? undefined : `expected true or false, got ${JSON.stringify(v)}`;
    case 'double':
    case 'float':
      return typeof v === 'number' || v === 'NaN' || v === 'Infinity' || v === '-Infinity'
        ? undefined
        : `expected a number, got ${JSON.stringify(v)}`;
    case 'bytes':
      return typeof v === 'string' && /^[A-Za-z0-9+/_-]*={0,2}$/.test(v) ? undefined : 'expected base64 bytes';
    default:
      return `unsupported scalar type ${type}`;
  }
}
