import { origoUrlProblem } from '../src/client/origo-session';

test('plain ws:// is allowed only to this machine unless insecure', () => {
  for (const ok of [
    'wss://origo.example.com/v1/client',
    'ws://127.0.0.1:8700/v1/client',
    'ws://localhost/v1/client',
    'ws://[::1]:1/x',
  ]) {
    expect([ok, origoUrlProblem(ok)]).toEqual([ok, undefined]);
  }
  for (const bad of [
    'ws://origo.example.com/v1/client',
    'ws://10.0.0.2/v1/client',
    'ws://127.0.0.1.evil.com/',
    'http://x/',
  ]) {
    expect([bad, origoUrlProblem(bad)]).toEqual([bad, expect.any(String)]);
  }
  expect(origoUrlProblem('ws://origo.example.com/v1/client', true)).toBeUndefined();
});
