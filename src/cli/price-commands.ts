/**
 * The price table from the CLI (docs/metering.md, "Prices"):
 *   prices set MODEL --input AMOUNT --output AMOUNT [--cached-input AMOUNT] [--cache-write AMOUNT] [--json]
 *   prices list [--json]          prices remove MODEL
 * AMOUNT is per million tokens, in currency units with at most 6 decimals (0 allowed: a free model).
 * Changes are audited (actor `cli`).
 */
import type { Command } from 'commander';
import { CLI_ACTOR } from '../console/management.ts';
import { ConsoleError } from '../console/errors.ts';
import { priceJson } from '../console/prices.ts';
import { formatAmount } from '../schema/money.ts';
import { MAX_PRICE_MICROS } from '../schema/prices.ts';
import { amountArg, common, json, out, table, withConsole, type Common } from './console-commands.ts';

/** A price AMOUNT (per million tokens) → micro-units: the CLI's AMOUNT rule, but 0 is allowed. */
export function priceArg(text: string, what: string): number {
  const micros = /^0{1,10}(\.0{1,6})?$/.test(text) ? 0 : amountArg(text, what);
  if (micros > MAX_PRICE_MICROS) throw new ConsoleError('INVALID_INPUT', `${what} is above the largest price, ${formatAmount(MAX_PRICE_MICROS)} per million tokens`);
  return micros;
}

const perMillion = (m: number | null) => (m === null ? '(input)' : formatAmount(m));

export function registerPriceCommands(program: Command): void {
  const prices = program.command('prices').description('the price table metering books by: per-million-token prices of models').showSuggestionAfterError(false);

  common(
    prices
      .command('set')
      .description('set a model\'s price per million tokens (model: gpt-4o-mini, openai/gpt-4o, openai/* or *)')
      .argument('<model>', 'model name (case-insensitive)')
      .requiredOption('--input <amount>', 'price of a million input tokens, e.g. 0.15')
      .requiredOption('--output <amount>', 'price of a million output (and reasoning) tokens, e.g. 0.60')
      .option('--cached-input <amount>', 'price of a million cached input tokens (default: the input price)')
      .option('--cache-write <amount>', 'price of a million cache-write tokens (default: the input price)'),
  ).action(async (model: string, o: Common & { input: string; output: string; cachedInput?: string; cacheWrite?: string }) => {
    const price = {
      input: priceArg(o.input, '--input'),
      output: priceArg(o.output, '--output'),
      cachedInput: o.cachedInput === undefined ? null : priceArg(o.cachedInput, '--cached-input'),
      cacheWrite: o.cacheWrite === undefined ? null : priceArg(o.cacheWrite, '--cache-write'),
    };
    await withConsole(o, async (mc) => {
      const e = await mc.setPrice(model, price, CLI_ACTOR);
      if (o.json) return json(priceJson(e));
      out(`Set the price of ${e.model}: input ${formatAmount(e.input)}, output ${formatAmount(e.output)}, cached input ${perMillion(e.cachedInput ?? null)}, cache write ${perMillion(e.cacheWrite ?? null)} per million tokens.`);
    });
  });

  common(prices.command('list').description('list the price table')).action(async (o: Common) => {
    await withConsole(o, async (mc) => {
      const list = (await mc.listPrices()).map(priceJson);
      if (o.json) return json({ prices: list });
      if (list.length === 0) return out('No prices: metering books tokens at cost 0 (unpriced).');
      out(
        table(
          ['MODEL', 'INPUT', 'OUTPUT', 'CACHED INPUT', 'CACHE WRITE', 'UPDATED'],
          list.map((p) => [p.model, formatAmount(p.input_micros), formatAmount(p.output_micros), perMillion(p.cached_input_micros), perMillion(p.cache_write_micros), p.updated_at ?? '']),
        ),
      );
      out('(per million tokens)');
    });
  });

  common(prices.command('remove').description("remove a model's price").argument('<model>', 'model name')).action(async (model: string, o: Common) => {
    await withConsole(o, async (mc) => {
      await mc.removePrice(model, CLI_ACTOR);
      if (o.json) return json({ model: model.toLowerCase(), removed: true });
      out(`Removed the price of ${model.toLowerCase()}.`);
    });
  });
}
