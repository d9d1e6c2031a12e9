/**
 * The two sessions origo speaks, one per WebSocket path: what a proxy (`/v1/proxy`) and a client
 * (`/v1/client`) greet with, how their frames are parsed, and where their messages go in the broker.
 */
import { ClientToOrigo, clientToOrigo, parseSignal, ProxyToOrigo, proxyToOrigo, SignalResult } from '@mutp/shared';
import { Broker } from '../broker/router';
import { OrigoConfig } from '../config';
import { Kind, Session } from './session';

export interface Protocol<In extends { type: string }> {
  kind: Kind;
  greeting: In['type'];
  /** Greeted sessions the broker takes on this path (sockets are capped at twice that). */
  max: number;
  parse(frame: Uint8Array): SignalResult<In>;
  /** Handles the greeting; returns the session id, or undefined when refused. */
  greet(session: Session, message: In): string | undefined | Promise<string | undefined>;
  message(id: string, message: In): void;
  gone(id: string, session: Session): void;
}

export function proxyProtocol(broker: Broker, config: OrigoConfig): Protocol<ProxyToOrigo> {
  return {
    kind: 'proxy',
    greeting: 'register',
    max: config.maxProxies,
    parse: (frame) => parseSignal(proxyToOrigo, frame),
    greet: (session, m) => (m.type === 'register' ? broker.register(session, m) : undefined),
    message: (id, m) => broker.proxyMessage(id, m),
    gone: (id, session) => broker.proxyGone(id, session),
  };
}

export function clientProtocol(broker: Broker, config: OrigoConfig): Protocol<ClientToOrigo> {
  return {
    kind: 'client',
    greeting: 'hello',
    max: config.maxClients,
    parse: (frame) => parseSignal(clientToOrigo, frame),
    greet: (session, m) => (m.type === 'hello' ? broker.hello(session, m) : undefined),
    message: (id, m) => broker.clientMessage(id, m),
    gone: (id, session) => broker.clientGone(id, session),
  };
}
