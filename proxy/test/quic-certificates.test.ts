/**
 * Certificate rotation of the QUIC endpoint: the next certificate is announced at half-life and
 * presented from three quarters on, so every hash a client was handed in the last quarter of a
 * validity is still accepted. Wall-clock time is the test's.
 */
import { CertificateRotation, QuicCertificate } from '../src/quic-certificates';

const DAY = 86_400_000;

function setup(validityDays = 14) {
  let now = Date.UTC(2026, 10, 27);
  let made = 0;
  const switched: string[] = [];
  const reported: string[][] = [];
  const generate = (days: number): QuicCertificate => {
    made++;
    return {
      certificatePem: `cert-${made}`,
      privateKeyPem: `key-${made}`,
      sha256: new Uint8Array(32).fill(made),
      notBefore: now,
      notAfter: now + days * DAY,
    };
  };
  const rotation = new CertificateRotation({
    validityDays,
    generate,
    now: () => now,
    onSwitch: (c) => switched.push(c.certificatePem),
    onHashesChanged: (h) => reported.push(h),
  });
  return {
    rotation,
    switched,
    reported,
    at(days: number) {
      now = Date.UTC(2026, 10, 27) + days * DAY;
      rotation.advance();
    },
  };
}

const hash = (fill: number) => Buffer.alloc(32, fill).toString('base64');

test('one hash until half-life, both until three quarters, then the new one alone', () => {
  const r = setup(14);
  expect(r.rotation.hashes()).toEqual([hash(1)]);
  r.at(6.9);
  expect(r.rotation.hashes()).toEqual([hash(1)]);
  r.at(7);
  expect(r.rotation.hashes()).toEqual([hash(1), hash(2)]);
  expect(r.switched).toEqual([]);
  r.at(10.5);
  expect(r.rotation.hashes()).toEqual([hash(2)]);
  expect(r.switched).toEqual(['cert-2']);
  expect(r.rotation.certificate.certificatePem).toBe('cert-2');
  expect(r.reported).toEqual([[hash(1), hash(2)], [hash(2)]]);
});

test('the presented certificate is never expired, and every hash handed out in the last quarter-validity still works', () => {
  const r = setup(4);
  const handedOut: { at: number; hashes: string[] }[] = [];
  for (let day = 0; day <= 40; day += 0.25) {
    r.at(day);
    const c = r.rotation.certificate;
    const now = Date.UTC(2026, 10, 27) + day * DAY;
    expect(c.notBefore).toBeLessThanOrEqual(now);
    expect(c.notAfter).toBeGreaterThan(now);
    handedOut.push({ at: day, hashes: r.rotation.hashes() });
    const presented = Buffer.from(c.sha256).toString('base64');
    for (const offer of handedOut.filter((o) => day - o.at <= 1)) expect(offer.hashes).toContain(presented);
  }
});

test('a clock that jumps far ahead catches up at once', () => {
  const r = setup(2);
  r.at(100);
  const now = Date.UTC(2026, 10, 27) + 100 * DAY;
  expect(r.rotation.certificate.notAfter).toBeGreaterThan(now);
});

test.each([0, 15, 1.5])('a validity of %s days is refused', (days) => {
  expect(() => setup(days)).toThrow(/1-14 days/);
});
