/**
 * Polls `f` every 50 ms until it gives a truthy value and returns it; throws when `ms` pass first
 * (never returns on a timeout). `what` names the wait in the error; a function is read at the
 * timeout, so the message can say what did arrive.
 */
export async function until<T>(what: string | (() => string), f: () => T | undefined | false | Promise<T | undefined | false>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
