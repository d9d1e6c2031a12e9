/**
 * Several origo instances in the extension's settings: `origoUrl` holds one URL or several
 * comma-separated; each is normalized and checked, and the downloader hands the list to MutpClient.
 */
import { normalizeSettings, origoUrlList, origoUrlProblem } from '../src/common/settings';

test('a comma-separated list is normalized: ws(s) URLs kept in order, duplicates and junk dropped', () => {
  const s = normalizeSettings({
    origoUrl:
      ' wss://a.example:443/v1/client ,, http://b.example/v1/client, wss://b.example/v1/client,wss://a.example/v1/client',
  });
  expect(s.origoUrl).toBe('wss://a.example/v1/client, wss://b.example/v1/client');
  expect(origoUrlList(s.origoUrl)).toEqual(['wss://a.example/v1/client', 'wss://b.example/v1/client']);
  expect(normalizeSettings({ origoUrl: ' , not a url' }).origoUrl).toBe('ws://127.0.0.1:8700/v1/client');
});

test('every URL of the list must be safe to use; the problem names the one that is not', () => {
  expect(origoUrlProblem('wss://a.example/v1/client, ws://127.0.0.1:8700/v1/client')).toBeUndefined();
  expect(origoUrlProblem('wss://a.example/v1/client, ws://b.example/v1/client')).toMatch(
    /^ws:\/\/b\.example\/v1\/client: plain ws:\/\/ is only allowed to this machine/,
  );
  expect(origoUrlProblem('ws://b.example/v1/client')).toMatch(/^plain ws:\/\//);
  expect(origoUrlProblem(' , ')).toBe('the origo URL is not a URL');
});
