import { secretsEqual } from '../src/secrets';

test('secretsEqual: equal secrets only, whatever their lengths and characters', () => {
  expect(secretsEqual('m0nitor', 'm0nitor')).toBe(true);
  expect(secretsEqual('m0nitor', 'm0nitors')).toBe(false);
  expect(secretsEqual('m0nitors', 'm0nitor')).toBe(false);
  expect(secretsEqual('', 'm0nitor')).toBe(false);
  expect(secretsEqual('', '')).toBe(true);
  expect(secretsEqual('clé', 'cle\u0301')).toBe(false);
  expect(secretsEqual('clé', 'clé')).toBe(true);
});
