/**
 * Conflicting options, refused in every command before anything runs (exit 2, one line, nothing
 * changed). Commander's `Option.conflicts()` covers pairs with different attribute names
 * (`--models` with `--all-models`, `--expires` with `--no-expiry`), but not an option and its own
 * negation: `--rate 5/s` and `--no-rate` both set `rate`, and commander silently keeps the last one.
 * So for every command of the program:
 *   - an option and its negation given together (`--rate` with `--no-rate`, `--token-rate` with
 *     `--no-token-rate`, `--limit` with `--no-limit`, `--wallet-low` with `--no-wallet-low`) are refused;
 *   - an option taking a value given twice with different values is refused (which one was meant?).
 * Commands added later get the same rule: `refuseConflictingOptions(program)` walks them all.
 */
import type { Command, Option } from 'commander';

const CODE = 'commander.conflictingOption';

function flagOf(o: Option): string {
  return o.flags;
}

function guard(cmd: Command): void {
  const byAttribute = new Map<string, Option[]>();
  for (const o of cmd.options as readonly Option[]) byAttribute.set(o.attributeName(), [...(byAttribute.get(o.attributeName()) ?? []), o]);
  /** Options seen in this parse, by name, with the values given. */
  const seen = new Map<string, { option: Option; values: unknown[] }>();
  for (const o of cmd.options as readonly Option[]) {
    const paired = (byAttribute.get(o.attributeName())?.length ?? 0) > 1;
    const takesValue = o.required || o.optional;
    if (!paired && !takesValue) continue;
    cmd.on(`option:${o.name()}`, (value: unknown) => {
      const s = seen.get(o.name()) ?? { option: o, values: [] };
      s.values.push(value);
      seen.set(o.name(), s);
    });
  }
  cmd.hook('preAction', (thisCommand) => {
    if (thisCommand !== cmd) return;
    const given = [...seen.values()];
    seen.clear();
    for (const g of given) {
      const twin = given.find((h) => h !== g && h.option.attributeName() === g.option.attributeName());
      if (twin && g.option.negate !== true) cmd.error(`error: option '${flagOf(g.option)}' cannot be used with option '${flagOf(twin.option)}'`, { code: CODE, exitCode: 1 });
      if (new Set(g.values.map((v) => String(v))).size > 1) {
        cmd.error(`error: option '${flagOf(g.option)}' given more than once with different values (${g.values.map((v) => JSON.stringify(String(v))).join(', ')}): give it once`, { code: CODE, exitCode: 1 });
      }
    }
  });
}

/** Installs the rule on `program` and every command under it (call once the commands are registered). */
export function refuseConflictingOptions(program: Command): Command {
  const walk = (c: Command) => {
    guard(c);
    for (const sub of c.commands) walk(sub);
  };
  walk(program);
  return program;
}
