/**
 * Network changes in Node (network-watch.ts): an address the host had that is gone is a change
 * (connections bound to it are dead); one that only appears, loopback and IPv6 link-local ones
 * are not. The poller tells its listeners and stops with the last one.
 */
import type { networkInterfaces } from 'node:os';
import { AddressBook, externalAddresses, nodeNetworkWatch } from '../src/network-watch';

type Interfaces = ReturnType<typeof networkInterfaces>;

function iface(address: string, family: 'IPv4' | 'IPv6' = 'IPv4', internal = false) {
  const base = { netmask: '', mac: '00:00:00:00:00:00', internal, cidr: null };
  return family === 'IPv4' ? { ...base, address, family } : { ...base, address, family, scopeid: 0 };
}

const WIFI: Interfaces = {
  lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)],
  wlan0: [iface('192.168.1.20'), iface('fe80::1', 'IPv6'), iface('2001:db8::20', 'IPv6')],
};
const WIFI_AND_VPN: Interfaces = { ...WIFI, tun0: [iface('10.8.0.2')] };
const CELLULAR: Interfaces = { lo: WIFI.lo, wwan0: [iface('100.64.3.7')] };

test('external addresses leave out loopback and IPv6 link-local', () => {
  expect([...externalAddresses(WIFI)].sort()).toEqual(['192.168.1.20', '2001:db8::20']);
});

test('an address that is gone is a change; one that only appears is not', () => {
  const readings = [WIFI, WIFI_AND_VPN, WIFI_AND_VPN, WIFI, CELLULAR, CELLULAR];
  const book = new AddressBook(() => readings.shift()!);
  expect([book.lost(), book.lost(), book.lost(), book.lost(), book.lost()]).toEqual([false, false, true, true, false]);
});

test('the poller tells every listener of a lost address, and stops with the last one', async () => {
  let current = WIFI;
  let reads = 0;
  const watch = nodeNetworkWatch(() => {
    reads++;
    return current;
  }, 5);
  const heard: string[] = [];
  const stopA = watch(() => heard.push('a'));
  const stopB = watch(() => heard.push('b'));
  current = CELLULAR;
  const deadline = Date.now() + 5000;
  while (heard.length < 2) {
    if (Date.now() > deadline) throw new Error(`no change heard within 5 s (${reads} reads)`);
    await new Promise((r) => setTimeout(r, 5));
  }
  expect(heard.sort()).toEqual(['a', 'b']);
  stopA();
  stopB();
  const after = reads;
  await new Promise((r) => setTimeout(r, 50));
  expect(reads).toBe(after);
});
