/**
 * The `model` field of multipart/form-data bodies (src/core/model/multipart.ts): bodies as real
 * clients serialise them (the platform's FormData), and hand-written adversarial ones.
 */
import { describe, expect, it } from 'vitest';
import { parseContentType } from '../../src/core/model/header-params.ts';
import { isValidBoundary, scanMultipartModel } from '../../src/core/model/multipart.ts';

/** Serialises a FormData exactly as fetch would send it. */
async function encode(fd: FormData): Promise<{ body: Buffer; boundary: string }> {
  const res = new Response(fd);
  const ct = parseContentType(res.headers.get('content-type')!);
  return { body: Buffer.from(await res.arrayBuffer()), boundary: ct!.params.get('boundary')! };
}

function audio(bytes = 4096): Blob {
  const b = Buffer.alloc(bytes);
  for (let k = 0; k < bytes; k++) b[k] = (k * 131) & 0xff;
  return new Blob([b], { type: 'audio/mpeg' });
}

const B = 'XyZ-boundary-123';
/** A hand-written body: parts joined with CRLF delimiters, as RFC 7578 says. */
function body(parts: string[], opts: { preamble?: string; epilogue?: string } = {}): Buffer {
  return Buffer.from(`${opts.preamble ?? ''}--${B}\r\n${parts.join(`\r\n--${B}\r\n`)}\r\n--${B}--${opts.epilogue ?? '\r\n'}`, 'latin1');
}
const field = (name: string, value: string, extra = '') => `Content-Disposition: form-data; name="${name}"${extra}\r\n\r\n${value}`;
const file = (name: string, content: string) => `Content-Disposition: form-data; name="${name}"; filename="a.mp3"\r\nContent-Type: audio/mpeg\r\n\r\n${content}`;

describe('bodies as clients send them', () => {
  it.each([
    ['model first', ['model', 'file']],
    ['model last (file first, as the Node SDK builds it)', ['file', 'model']],
    ['model between fields', ['language', 'model', 'file', 'response_format']],
  ])('%s', async (_n, order) => {
    const fd = new FormData();
    for (const k of order) {
      if (k === 'file') fd.append('file', audio(), 'speech.mp3');
      else fd.append(k, k === 'model' ? 'whisper-1' : 'x');
    }
    const { body, boundary } = await encode(fd);
    expect(scanMultipartModel(body, boundary)).toEqual({ kind: 'model', model: 'whisper-1' });
  });

  it('image edits with several image[] parts and a mask', async () => {
    const fd = new FormData();
    fd.append('image[]', new Blob([Buffer.from('png1')], { type: 'image/png' }), 'a.png');
    fd.append('image[]', new Blob([Buffer.from('png2')], { type: 'image/png' }), 'b.png');
    fd.append('mask', new Blob([Buffer.from('mask')], { type: 'image/png' }), 'mask.png');
    fd.append('prompt', 'add a hat');
    fd.append('model', 'openai/gpt-image-1');
    const { body, boundary } = await encode(fd);
    expect(scanMultipartModel(body, boundary)).toEqual({ kind: 'model', model: 'openai/gpt-image-1' });
  });

  it('a file whose bytes contain CRLF, dashes and a "name=model" header look-alike', async () => {
    const fd = new FormData();
    fd.append('file', new Blob([Buffer.from('\r\n--\r\nContent-Disposition: form-data; name="model"\r\n\r\nexpensive\r\n')]), 'x.bin');
    fd.append('model', 'cheap');
    const { body, boundary } = await encode(fd);
    expect(scanMultipartModel(body, boundary)).toEqual({ kind: 'model', model: 'cheap' });
  });

  it('a non-ASCII filename is fine', async () => {
    const fd = new FormData();
    fd.append('file', audio(10), 'café 😀.mp3');
    fd.append('model', 'whisper-1');
    const { body, boundary } = await encode(fd);
    expect(scanMultipartModel(body, boundary)).toEqual({ kind: 'model', model: 'whisper-1' });
  });

  it('no model field is absent', async () => {
    const fd = new FormData();
    fd.append('file', audio(), 'a.jsonl');
    fd.append('purpose', 'batch');
    const { body, boundary } = await encode(fd);
    expect(scanMultipartModel(body, boundary)).toEqual({ kind: 'absent' });
  });
});

describe('hand-written bodies', () => {
  it.each([
    ['minimal', body([field('model', 'whisper-1')])],
    ['no CRLF after the close delimiter', body([field('model', 'whisper-1')], { epilogue: '' })],
    ['unquoted name', body([`Content-Disposition: form-data; name=model\r\n\r\nwhisper-1`])],
    ['header names in any case', body([`content-disposition: FORM-DATA; NAME="model"\r\n\r\nwhisper-1`])],
    ['text/plain UTF-8 part', body([field('model', 'whisper-1').replace('\r\n\r\n', '\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n')])],
  ])('%s', (_n, b) => {
    expect(scanMultipartModel(b, B)).toEqual({ kind: 'model', model: 'whisper-1' });
  });

  it.each([
    ['two model fields', body([field('model', 'cheap'), file('file', 'x'), field('model', 'expensive')]), 'duplicate-model'],
    ['Model in another case', body([field('model', 'cheap'), field('Model', 'expensive')]), 'model-like-field'],
    ['model[] (PHP, Rails, qs)', body([field('model', 'cheap'), field('model[]', 'expensive')]), 'model-like-field'],
    ['model[0]', body([field('model[0]', 'expensive')]), 'model-like-field'],
    ['model.x', body([field('model.name', 'expensive')]), 'model-like-field'],
    ['percent-encoded name', body([field('mod%65l', 'expensive')]), 'model-like-field'],
    ['RFC 2231 name*', body([`Content-Disposition: form-data; name*=UTF-8''model\r\n\r\nexpensive`]), 'invalid-multipart'],
    ['two name parameters', body([`Content-Disposition: form-data; name="file"; name="model"\r\n\r\nexpensive`]), 'invalid-multipart'],
    ['backslash in a quoted name', body([`Content-Disposition: form-data; name="mo\\del"\r\n\r\nexpensive`]), 'invalid-multipart'],
    ['model as a file part', body([field('model', 'expensive', '; filename="m.txt"')]), 'model-field-not-plain'],
    ['model with a transfer encoding', body([field('model', 'ZXhwZW5zaXZl').replace('\r\n\r\n', '\r\nContent-Transfer-Encoding: base64\r\n\r\n')]), 'model-field-not-plain'],
    ['model in UTF-16', body([field('model', 'x').replace('\r\n\r\n', '\r\nContent-Type: text/plain; charset=utf-16\r\n\r\n')]), 'model-field-not-plain'],
    ['model as JSON', body([field('model', '"x"').replace('\r\n\r\n', '\r\nContent-Type: application/json\r\n\r\n')]), 'model-field-not-plain'],
    ['preamble hiding a part', body([field('model', 'cheap')], { preamble: `--${B}\nContent-Disposition: form-data; name="model"\n\nexpensive\n` }), 'invalid-multipart'],
    ['text preamble', body([field('model', 'cheap')], { preamble: 'hello\r\n' }), 'invalid-multipart'],
    ['epilogue', body([field('model', 'cheap')], { epilogue: '\r\nmore' }), 'invalid-multipart'],
    ['LF-only delimiter inside a part', body([file('file', `x\n--${B}\nContent-Disposition: form-data; name="model"\n\nexpensive`), field('model', 'cheap')]), 'invalid-multipart'],
    ['boundary mid-line in a file', body([file('file', `x --${B} y`), field('model', 'cheap')]), 'invalid-multipart'],
    ['header folding', body([`Content-Disposition: form-data;\r\n name="model"\r\n\r\ncheap`]), 'invalid-multipart'],
    ['LF-only headers', Buffer.from(`--${B}\nContent-Disposition: form-data; name="model"\n\ncheap\r\n--${B}--`), 'invalid-multipart'],
    ['no Content-Disposition', body([`Content-Type: text/plain\r\n\r\ncheap`]), 'invalid-multipart'],
    ['two Content-Disposition headers', body([`Content-Disposition: form-data; name="x"\r\nContent-Disposition: form-data; name="model"\r\n\r\nexpensive`]), 'invalid-multipart'],
    ['no name', body([`Content-Disposition: form-data\r\n\r\ncheap`]), 'invalid-multipart'],
    ['attachment disposition', body([`Content-Disposition: attachment; name="model"\r\n\r\ncheap`]), 'invalid-multipart'],
    ['no headers', body([`\r\ncheap`]), 'invalid-multipart'],
    ['transport padding after a delimiter', Buffer.from(`--${B}  \r\n${field('model', 'cheap')}\r\n--${B}--`), 'invalid-multipart'],
    ['truncated (no close delimiter)', Buffer.from(`--${B}\r\n${field('model', 'cheap')}\r\n--${B}\r\n${file('file', 'abc')}`), 'invalid-multipart'],
    ['invalid UTF-8 model', Buffer.concat([Buffer.from(`--${B}\r\n${field('model', '')}`), Buffer.from([0xff]), Buffer.from(`\r\n--${B}--`)]), 'invalid-utf8'],
  ])('refuses: %s', (_n, b, refusal) => {
    expect(scanMultipartModel(b, B)).toEqual({ kind: 'refused', refusal });
  });

  it('a boundary that does not match the body refuses', () => {
    expect(scanMultipartModel(body([field('model', 'x')]), 'other').kind).toBe('refused');
  });

  it.each([
    ['ok', 'abc', true],
    ['WebKit style', '----WebKitFormBoundary7MA4YWxkTrZu0gW', true],
    ['with space inside', 'a b', true],
    ['70 characters', 'a'.repeat(70), true],
    ['empty', '', false],
    ['71 characters', 'a'.repeat(71), false],
    ['trailing space', 'abc ', false],
    ['quote', 'a"b', false],
    ['CRLF', 'a\r\nb', false],
  ])('boundary %s', (_n, boundary, ok) => {
    expect(isValidBoundary(boundary)).toBe(ok);
  });
});
