/** Socket budgets on their own (the socket tests in robustness.test.ts run them behind real sockets). */
import { Budgeted, SocketBudgets } from '../src/sessions/budgets';

const limits = { maxSocketsPerAddress: 3, maxPendingSockets: 4, maxPendingPerAddress: 2 };
const socket = (kind: Budgeted['kind'], address: string): Budgeted => ({ kind, address });

test('all sockets of a path: at most twice the greeted sessions the broker takes', () => {
  const budgets = new SocketBudgets<Budgeted>({ ...limits, maxSocketsPerAddress: 100, maxPendingPerAddress: 100 });
  for (let i = 0; i < 4; i++) {
    expect(budgets.refusal('client', `10.0.0.${i}`, 2)).toBeUndefined();
    const s = socket('client', `10.0.0.${i}`);
    budgets.admit(s);
    budgets.greeted(s);
  }
  expect(budgets.refusal('client', '10.0.0.9', 2)).toBe('busy');
  expect(budgets.refusal('proxy', '10.0.0.9', 2)).toBeUndefined(); // the proxy path counts apart
});

test('per address: open sockets and sockets still greeting, each path apart', () => {
  const budgets = new SocketBudgets<Budgeted>(limits);
  const a = socket('proxy', '192.0.2.1');
  const b = socket('proxy', '192.0.2.1');
  budgets.admit(a);
  budgets.admit(b);
  expect(budgets.refusal('proxy', '192.0.2.1', 100)).toBe('address-limit'); // two greeting
  expect(budgets.refusal('client', '192.0.2.1', 100)).toBeUndefined();
  expect(budgets.refusal('proxy', '192.0.2.2', 100)).toBeUndefined();
  budgets.greeted(a);
  expect(budgets.refusal('proxy', '192.0.2.1', 100)).toBeUndefined();
  const c = socket('proxy', '192.0.2.1');
  budgets.admit(c);
  budgets.greeted(c);
  budgets.greeted(b);
  expect(budgets.refusal('proxy', '192.0.2.1', 100)).toBe('address-limit'); // three open
  budgets.released(a);
  expect(budgets.refusal('proxy', '192.0.2.1', 100)).toBeUndefined();
});

test('sockets still greeting: when their budget is full the oldest is the one to evict', () => {
  const budgets = new SocketBudgets<Budgeted>(limits);
  const sockets = [0, 1, 2, 3].map((i) => socket('client', `198.51.100.${i}`));
  for (const s of sockets) {
    expect(budgets.evictable('client')).toBeUndefined();
    budgets.admit(s);
  }
  expect(budgets.evictable('client')).toBe(sockets[0]);
  budgets.greeted(sockets[0]);
  expect(budgets.evictable('client')).toBeUndefined();
  budgets.admit(socket('client', '198.51.100.9'));
  expect(budgets.evictable('client')).toBe(sockets[1]);
  // A socket that closes while greeting leaves the queue; greeted() twice counts once.
  budgets.released(sockets[1]);
  budgets.greeted(sockets[1]);
  expect(budgets.evictable('client')).toBeUndefined();
});

test('a released address is forgotten, and counts start again from zero', () => {
  const budgets = new SocketBudgets<Budgeted>(limits);
  const sockets = [0, 1, 2].map(() => socket('client', '203.0.113.5'));
  for (const s of sockets) {
    budgets.admit(s);
    budgets.greeted(s);
  }
  expect(budgets.refusal('client', '203.0.113.5', 100)).toBe('address-limit');
  for (const s of sockets) budgets.released(s);
  for (let i = 0; i < 3; i++) {
    expect(budgets.refusal('client', '203.0.113.5', 100)).toBeUndefined();
    const s = socket('client', '203.0.113.5');
    budgets.admit(s);
    budgets.greeted(s);
  }
  expect(budgets.refusal('client', '203.0.113.5', 100)).toBe('address-limit');
});
