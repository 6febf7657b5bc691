/**
 * The price table from the CLI (docs/metering.md, "Prices"):
 *   prices set MODEL --input AMOUNT --output AMOUNT [--cached-input AMOUNT] [--cache-write AMOUNT] [--json]
 *   prices list [--source table|catalog|all] [--json]          prices remove MODEL
 *   prices show MODEL [--provider P] [--json]   (how the name resolves, and its price)
 *   prices catalog [--json]                     (the catalog version in use)
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
const collect = (v: string, all: string[]) => [...all, v];

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
      .option('--cache-write <amount>', 'price of a million cache-write tokens (default: the input price)')
      .option('--cache-write-1h <amount>', 'price of a million one-hour cache-write tokens (default: the cache-write price)')
      .option('--input-audio <amount>', 'price of a million audio input tokens (default: the input price)')
      .option('--output-audio <amount>', 'price of a million audio output tokens (default: the output price)')
      .option('--input-image <amount>', 'price of a million image input tokens (default: the input price)')
      .option('--output-image <amount>', 'price of a million image output tokens (default: the output price)')
      .option('--web-search <amount>', 'price of a thousand web-search calls (default: 0)')
      .option('--tier <tier>', 'a whole-request tier, ABOVE:CLASS=AMOUNT[,CLASS=AMOUNT…] (e.g. 200000:input=2.5,output=15); repeatable', collect, [])
      .option('--service-tier <tier>', 'a service tier\'s multiplier, NAME=MULTIPLIER (e.g. flex=0.5); repeatable', collect, []),
  ).action(async (model: string, o: Common & { input: string; output: string; cachedInput?: string; cacheWrite?: string; cacheWrite1h?: string; inputAudio?: string; outputAudio?: string; inputImage?: string; outputImage?: string; webSearch?: string; tier: string[]; serviceTier: string[] }) => {
    const opt = (v: string | undefined, what: string) => (v === undefined ? undefined : priceArg(v, what));
    const extra = Object.fromEntries(
      Object.entries({
        cache_write_1h: opt(o.cacheWrite1h, '--cache-write-1h'),
        input_audio: opt(o.inputAudio, '--input-audio'),
        output_audio: opt(o.outputAudio, '--output-audio'),
        input_image: opt(o.inputImage, '--input-image'),
        output_image: opt(o.outputImage, '--output-image'),
        web_search: opt(o.webSearch, '--web-search'),
      }).filter(([, v]) => v !== undefined),
    );
    const tiers = o.tier.map((t) => {
      const m = /^(\d{1,15}):(.+)$/.exec(t);
      if (m === null) throw new ConsoleError('INVALID_INPUT', `--tier ${JSON.stringify(t.slice(0, 60))}: ABOVE:CLASS=AMOUNT[,CLASS=AMOUNT…]`);
      const rec: Record<string, number> = { above: Number(m[1]) };
      for (const kv of m[2]!.split(',')) {
        const [k = '', v] = kv.split('=');
        if (v === undefined) throw new ConsoleError('INVALID_INPUT', `--tier ${JSON.stringify(t.slice(0, 60))}: each class as CLASS=AMOUNT`);
        rec[k.replaceAll('-', '_')] = priceArg(v, `--tier ${k}`);
      }
      return rec;
    });
    const serviceTiers = Object.fromEntries(
      o.serviceTier.map((t) => {
        const [k = '', v] = t.split('=');
        if (v === undefined) throw new ConsoleError('INVALID_INPUT', `--service-tier ${JSON.stringify(t.slice(0, 40))}: NAME=MULTIPLIER`);
        return [k, v];
      }),
    );
    const price = {
      input: priceArg(o.input, '--input'),
      output: priceArg(o.output, '--output'),
      cachedInput: o.cachedInput === undefined ? null : priceArg(o.cachedInput, '--cached-input'),
      cacheWrite: o.cacheWrite === undefined ? null : priceArg(o.cacheWrite, '--cache-write'),
      extra,
      tiers,
      serviceTiers,
    };
    await withConsole(o, async (mc) => {
      const e = await mc.setPrice(model, price, CLI_ACTOR);
      if (o.json) return json(priceJson(e));
      out(`Set the price of ${e.model}: input ${formatAmount(e.input)}, output ${formatAmount(e.output)}, cached input ${perMillion(e.cachedInput ?? null)}, cache write ${perMillion(e.cacheWrite ?? null)} per million tokens.`);
    });
  });

  common(
    prices
      .command('list')
      .description('list the price table (--source table, the default), the catalog (--source catalog) or both')
      .option('--source <source>', 'table | catalog | all', 'table'),
  ).action(async (o: Common & { source: string }) => {
    if (!['table', 'catalog', 'all'].includes(o.source)) throw new ConsoleError('INVALID_INPUT', '--source must be table, catalog or all');
    await withConsole(o, async (mc) => {
      const list = o.source === 'catalog' ? [] : (await mc.listPrices()).map((p) => ({ ...priceJson(p), source: 'table' as const }));
      const cat = o.source === 'table' ? [] : mc.listCatalogPrices();
      if (o.json) return json({ prices: [...list, ...cat], ...(o.source !== 'table' ? { catalog: mc.priceCatalog() } : {}) });
      if (o.source !== 'catalog' && list.length === 0 && o.source === 'table') {
        const c = mc.priceCatalog();
        return out(c.enabled ? `No prices in the table: metering prices from the catalog (${c.version}); \`keygate prices list --source catalog\` lists it.` : 'No prices: metering books tokens at cost 0 (unpriced).');
      }
      const rows = [
        ...list.map((p) => [p.model, formatAmount(p.input_micros), formatAmount(p.output_micros), perMillion(p.cached_input_micros), perMillion(p.cache_write_micros), p.updated_at ?? '', 'table', p.tiers ? `${p.tiers.length}` : '']),
        ...cat.map((p) => [p.model, formatAmount(p.prices.input!), formatAmount(p.prices.output!), formatAmount(p.prices.cached_input!), formatAmount(p.prices.cache_write!), '', 'catalog', p.tiers.length > 0 ? `${p.tiers.length}` : '']),
      ];
      // the table alone keeps its columns; with the catalog, each row says its source and tier count
      const head = ['MODEL', 'INPUT', 'OUTPUT', 'CACHED INPUT', 'CACHE WRITE', 'UPDATED'];
      out(o.source === 'table' ? table(head, rows.map((r) => r.slice(0, 6))) : table([...head, 'SOURCE', 'TIERS'], rows));
      out('(per million tokens; `keygate prices show MODEL` gives every class, tier and service tier)');
    });
  });

  common(
    prices
      .command('show')
      .description('how a model name resolves (the table, then the catalog) and its price now')
      .argument('<model>', 'model name as a client sends it or a provider answers it (gpt-4o-2024-08-06)')
      .option('--provider <provider>', 'the provider whose entry serves it: openai, anthropic or google (default: from the name)'),
  ).action(async (model: string, o: Common & { provider?: string }) => {
    await withConsole(o, async (mc) => {
      const e = await mc.explainPrice(model, o.provider);
      if (o.json) return json(e);
      out(`${e.model} (provider ${e.provider})`);
      out(`  catalog model  ${e.catalog_model ?? '(none)'}${e.catalog_version ? `   catalog ${e.catalog_version}` : '   catalog off'}`);
      if (e.rule === null || e.price === null) return out('  unpriced: books tokens at cost 0');
      out(`  priced by      ${e.priced_by} (rule ${e.rule}, source ${e.source})`);
      const line = (p: Record<string, number>) =>
        Object.entries(p)
          .map(([c, v]) => `${c} ${formatAmount(v)}`)
          .join(', ');
      out(`  per million tokens (web_search: per thousand calls): ${line(e.price.prices)}`);
      for (const t of e.price.tiers) out(`  above ${t.above} input tokens, the whole request: ${line(t.prices)}`);
      const st = Object.entries(e.price.service_tiers);
      if (st.length > 0) out(`  service tiers: ${st.map(([k, v]) => `${k} ×${v}`).join(', ')}`);
    });
  });

  common(prices.command('catalog').description('the price catalog in use (the @pydantic/genai-prices version pinned; KEYGATE_PRICE_CATALOG=false turns it off)')).action(async (o: Common) => {
    await withConsole(o, async (mc) => {
      const c = mc.priceCatalog();
      if (o.json) return json(c);
      out(c.enabled ? `${c.version}: ${c.models} models of ${c.providers.join(', ')} (under the price table; update the package for new prices)` : 'The price catalog is off (KEYGATE_PRICE_CATALOG=false): only the price table prices.');
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
