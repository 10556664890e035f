import { describe, it, expect } from '@jest/globals';
import { createSanitizer } from '../../src/response/sanitize.js';

const R = '[REDACTED]';

describe('createSanitizer().scrub: well-known credential shapes', () => {
  const { scrub } = createSanitizer();

  const cases: Array<[string, string]> = [
    ['Bearer token', 'Bearer abcDEF123456ghiJKL789'],
    ['Anthropic key', 'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789'],
    ['OpenAI project key', 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789'],
    ['GitHub classic token', 'ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789'],
    ['GitHub fine-grained token', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz'],
    ['Slack bot token', 'xoxb-1234567890-0987654321-AbCdEfGhIjKl'],
    ['AWS access key id', 'AKIAIOSFODNN7EXAMPLE'],
    ['Google API key', 'AIzaSyA1234567890abcdefghijklmnopqrstuv'],
    ['Telegram bot token', '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1'],
    [
      'JWT',
      'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c',
    ],
  ];

  for (const [label, secret] of cases) {
    it(`redacts a ${label} embedded in text`, () => {
      const out = scrub(`before ${secret} after`);
      expect(out).not.toContain(secret);
      expect(out).toContain(R);
      expect(out.startsWith('before ')).toBe(true);
      expect(out.endsWith(' after')).toBe(true);
    });
  }

  it('redacts the Bearer credential but keeps the surrounding header name', () => {
    const out = scrub('Authorization: Bearer abcDEF123456ghiJKL789');
    expect(out).toBe(`Authorization: ${R}`);
  });

  it('the Telegram token is gone entirely, including the numeric bot id prefix', () => {
    const token = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1';
    expect(scrub(token)).toBe(R);
  });

  it('redacts a multi-line PEM private key block completely', () => {
    const pem = [
      '-----BEGIN RSA PRIVATE KEY-----',
      'MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun',
      'VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK',
      '-----END RSA PRIVATE KEY-----',
    ].join('\n');
    const out = scrub(`key:\n${pem}\ntrailer`);
    expect(out).toBe(`key:\n${R}\ntrailer`);
    expect(out).not.toContain('MIIE');
    expect(out).not.toContain('VTLw7');
  });

  it('redacts an OPENSSH private key block too', () => {
    const pem = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----';
    expect(scrub(pem)).toBe(R);
  });

  it('redacts an unencrypted PKCS#8 block and a truncated block to the end of the text', () => {
    expect(scrub('-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----')).toBe(R);
    expect(scrub('oops -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY\n')).toBe(`oops ${R}`);
  });

  it('redacts every occurrence in one string', () => {
    const out = scrub('a AKIAIOSFODNN7EXAMPLE b AKIAI44QH8DHBEXAMPLE c');
    expect(out).toBe(`a ${R} b ${R} c`);
  });

  it('redacts the value of password=… but keeps the key name', () => {
    const out = scrub('connect with password=hunter2secret&user=bob');
    expect(out).toBe(`connect with password=${R}&user=bob`);
  });

  it('redacts the value of "api_key": "…" but keeps the key name', () => {
    const out = scrub('{"api_key": "abcd1234efgh5678", "name": "x"}');
    expect(out).toBe(`{"api_key": "${R}", "name": "x"}`);
  });

  it('redacts client_secret: value and access_token=value forms', () => {
    expect(scrub('client_secret: s3cr3tvalue99')).toBe(`client_secret: ${R}`);
    expect(scrub('access_token=tok_1234567')).toBe(`access_token=${R}`);
  });

  it('removes the password from URL credentials but keeps user and host', () => {
    const out = scrub('fetch https://alice:correcthorse@db.example.com:5432/app');
    expect(out).not.toContain('correcthorse');
    expect(out).toContain('https://alice:');
    expect(out).toContain('@db.example.com:5432/app');
    expect(out).toBe(`fetch https://alice:${R}@db.example.com:5432/app`);
  });

  it('redacts the shortest text any pattern matches (8 characters: the short-text fast path ends there)', () => {
    expect(scrub('//u:pwd@')).toBe(`//u:${R}@`);
  });

  it('leaves ordinary prose alone', () => {
    const text = 'The quick brown fox: 42 items at https://example.com/path?q=1 — done.';
    expect(scrub(text)).toBe(text);
  });
});

describe('createSanitizer: configured exact secrets', () => {
  it('redacts an exact configured secret wherever it appears', () => {
    const { scrub } = createSanitizer(['my-very-own-secret']);
    expect(scrub('value=my-very-own-secret!')).not.toContain('my-very-own-secret');
    expect(scrub('xx my-very-own-secret yy')).toBe(`xx ${R} yy`);
  });

  it('treats regex metacharacters in secrets literally', () => {
    const secret = 'a.b*c+d?(e)[f]';
    const { scrub } = createSanitizer([secret]);
    expect(scrub(`x ${secret} y`)).toBe(`x ${R} y`);
    // A string the unescaped pattern would match must not be touched.
    expect(scrub('x aXbbbcdef y')).toBe('x aXbbbcdef y');
  });

  it('does not match secrets shorter than 8 characters verbatim', () => {
    const { scrub } = createSanitizer(['short', 'abc1234']);
    expect(scrub('a short note abc1234')).toBe('a short note abc1234');
  });

  it('matches a secret of exactly 8 characters', () => {
    const { scrub } = createSanitizer(['8charsXY']);
    expect(scrub('is 8charsXY here')).toBe(`is ${R} here`);
  });

  it('prefers the longer of two overlapping secrets', () => {
    const { scrub } = createSanitizer(['abcdefgh', 'abcdefgh-ijklmnop']);
    expect(scrub('[abcdefgh-ijklmnop]')).toBe(`[${R}]`);
  });
});

describe('createSanitizer(): structured values', () => {
  const sanitize = createSanitizer(['configured-secret-1']);

  it('returns clean input equal and reports no paths', () => {
    const input = { a: 1, b: 'hello', c: [true, null, { d: 'world' }], e: { f: 2.5 } };
    const { value, redactedPaths } = sanitize(input);
    expect(value).toEqual(input);
    expect(redactedPaths).toEqual([]);
  });

  it('scrubs nested objects and arrays and reports the paths', () => {
    const input = {
      result: {
        items: [{ note: 'fine' }, { note: 'token ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789' }],
        meta: 'uses configured-secret-1',
      },
      ok: true,
    };
    const { value, redactedPaths } = sanitize(input);
    expect(value.result.items[0].note).toBe('fine');
    expect(value.result.items[1].note).toBe(`token ${R}`);
    expect(value.result.meta).toBe(`uses ${R}`);
    expect(value.ok).toBe(true);
    expect(redactedPaths.sort()).toEqual(['result.items[1].note', 'result.meta'].sort());
  });

  it('reports "$" for a top-level string and [i] for a top-level array', () => {
    expect(sanitize('Bearer abcdefghijklmnop').redactedPaths).toEqual(['$']);
    const arr = sanitize(['ok', 'AKIAIOSFODNN7EXAMPLE']);
    expect(arr.value).toEqual(['ok', R]);
    expect(arr.redactedPaths).toEqual(['[1]']);
  });

  it('does not mutate the input', () => {
    const input = { s: 'Bearer abcdefghijklmnop' };
    sanitize(input);
    expect(input.s).toBe('Bearer abcdefghijklmnop');
  });

  it('scrubs secrets inside object keys and reports the key location', () => {
    const input = { outer: { 'configured-secret-1': 'v' } } as Record<string, Record<string, string>>;
    const { value, redactedPaths } = sanitize(input);
    const keys = Object.keys(value.outer);
    expect(keys).toEqual([R]);
    expect(JSON.stringify(value)).not.toContain('configured-secret-1');
    expect(value.outer[R]).toBe('v');
    expect(redactedPaths).toEqual(['outer.<key>']);
  });

  it('a top-level key with a secret is reported as <key>', () => {
    const { value, redactedPaths } = sanitize({ 'AKIAIOSFODNN7EXAMPLE': 1 });
    expect(Object.keys(value)).toEqual([R]);
    expect(redactedPaths).toEqual(['<key>']);
  });

  it('keeps an own "__proto__" key as an own key without polluting Object.prototype', () => {
    const input = JSON.parse('{"__proto__": {"polluted": "yes"}, "a": "b"}') as Record<string, unknown>;
    const { value } = sanitize(input);
    const out = value as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(out, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toEqual({ polluted: 'yes' });
    expect((out as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.keys(out).sort()).toEqual(['__proto__', 'a']);
    expect(JSON.parse(JSON.stringify(out))).toEqual(input);
  });

  it('leaves non-string values untouched', () => {
    const input = { n: 12345678901, b: false, z: null, f: 1.5, arr: [1, 2, 3] };
    const { value, redactedPaths } = sanitize(input);
    expect(value).toEqual(input);
    expect(value.n).toBe(12345678901);
    expect(value.z).toBeNull();
    expect(redactedPaths).toEqual([]);
  });

  it('passes primitives through unchanged', () => {
    expect(sanitize(42).value).toBe(42);
    expect(sanitize(null).value).toBeNull();
    expect(sanitize(true).value).toBe(true);
    expect(sanitize('plain').value).toBe('plain');
  });

  it('exposes scrub() for plain text with the same rules', () => {
    expect(typeof sanitize.scrub).toBe('function');
    expect(sanitize.scrub('x configured-secret-1 y AKIAIOSFODNN7EXAMPLE')).toBe(`x ${R} y ${R}`);
  });
});
