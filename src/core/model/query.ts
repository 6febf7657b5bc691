/**
 * The query string of a restricted key's request (docs/models.md, "Known endpoints"): some routers
 * take a `model` query parameter and let it override the body or the path. So every parameter a
 * lenient framework could read as `model` — any letter case, percent- or plus-encoded names,
 * `model[]`, `model.x`, a look-alike — must name exactly the model the request is checked for.
 */
import { couldBeReadAsModel } from './names.ts';

const ESCAPE = /%([0-9A-Fa-f]{2})/g;

/** A parameter name as the most lenient framework could read it (`+` as space, escapes decoded repeatedly). */
function looseName(raw: string): string {
  let n = raw.replace(/\+/g, ' ');
  for (let k = 0; k < 3 && n.includes('%'); k++) n = n.replace(ESCAPE, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
  const cut = n.search(/[[.]/);
  return cut === -1 ? n : n.slice(0, cut);
}

function decodedValue(raw: string): string | null {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/** True when the query (`?…`, fragment allowed after it) has a model parameter other than `model`. */
export function queryNamesOtherModel(suffix: string, model: string): boolean {
  if (!suffix.startsWith('?')) return false;
  const hash = suffix.indexOf('#');
  const query = suffix.slice(1, hash === -1 ? undefined : hash);
  if (!/m|%/i.test(query)) return false;
  for (const piece of query.split(/[&;]/)) {
    const eq = piece.indexOf('=');
    const name = looseName(eq === -1 ? piece : piece.slice(0, eq));
    if (name !== 'model' && !couldBeReadAsModel(name)) continue;
    if (eq === -1 || decodedValue(piece.slice(eq + 1)) !== model) return true;
  }
  return false;
}
