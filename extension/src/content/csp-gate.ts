/**
 * Whether the page's own Content Security Policy would let it fetch a URL, from what the isolated
 * content script can see (issue 31). The extension replaces the page's fetch with one by the
 * proxies (and, cross-origin, a CORS-consent HEAD by the content script), neither of which the
 * browser checks against the page's CSP: without this gate a script injected into a
 * CSP-protected page could send data out through the URL of a "media" request.
 *
 * The evidence, each from the browser, none from the page world:
 * - `<meta http-equiv=Content-Security-Policy>` policies, read as they are inserted; every one is
 *   enforced (`connect-src`, else `default-src`);
 * - trusted `securitypolicyviolation` events for `connect-src`: an origin the browser refused the
 *   page is refused here too;
 * - the origins the page's own fetch/XHR reached on the network (resource timing): a header CSP
 *   cannot be read without host permissions, so a cross-origin URL is let through only when the
 *   page's CSP, whatever it is, already let the page connect to that origin. A request blocked by
 *   CSP is a network error and leaves no resource timing entry.
 *
 * A refused URL goes to the network, where the browser applies the page's CSP itself.
 */
import { CspPolicy, parseMetaPolicies, policyAllowsConnect } from './csp-policy';

export type CspVerdict = { ok: true } | { ok: false; reason: 'csp' | 'csp-unseen' };

/** What the content script learnt from a `securitypolicyviolation` event. */
export interface ViolationFacts {
  blockedURI: string;
  effectiveDirective: string;
  disposition: string;
}

/** Bounds on what a page can make the gate keep; past them it refuses everything (fails closed). */
export const CSP_LIMITS = { metaPolicies: 32, origins: 512 } as const;

/** The resource timing initiator types of requests governed by `connect-src`. */
const CONNECT_INITIATORS: ReadonlySet<string> = new Set(['fetch', 'xmlhttprequest', 'beacon']);

export class PageConnectGate {
  private readonly policies: CspPolicy[] = [];
  private readonly metaContents = new Set<string>();
  /** Origins the browser refused the page under `connect-src`. */
  private readonly blocked = new Set<string>();
  /** Origins the page's own fetch/XHR reached (so its CSP allowed them). */
  private readonly reached = new Set<string>();
  /** More policies or refusals than the bounds allow: the gate then refuses every URL. */
  private overflowed = false;

  /**
   * `self`: the document's URL, for 'self' and scheme-less sources; `pageOrigin`: its origin as the
   * browser sees it ('null' for a sandboxed document: nothing is same-origin then).
   */
  constructor(
    private readonly self: URL,
    private readonly pageOrigin: string,
  ) {}

  /** A `<meta http-equiv=Content-Security-Policy>` content, as inserted into the document. */
  addMetaPolicy(content: string): void {
    if (content.trim() === '' || this.metaContents.has(content)) return;
    const readings = parseMetaPolicies(content);
    if (this.metaContents.size >= CSP_LIMITS.metaPolicies) {
      this.overflowed = true;
      return;
    }
    this.metaContents.add(content);
    this.policies.push(...readings);
  }

  /** A trusted `securitypolicyviolation` event: an enforced `connect-src` refusal marks its origin. */
  noteViolation(v: ViolationFacts): void {
    if (v.disposition !== 'enforce' || v.effectiveDirective !== 'connect-src') return;
    const origin = originOf(v.blockedURI);
    if (origin === undefined) return;
    if (!this.blocked.has(origin) && this.blocked.size >= CSP_LIMITS.origins) this.overflowed = true;
    else this.blocked.add(origin);
  }

  /** A resource timing entry of the page: a fetch/XHR that went out shows its origin is allowed. */
  noteReached(name: string, initiatorType: string): void {
    if (!CONNECT_INITIATORS.has(initiatorType)) return;
    const origin = originOf(name);
    // Full: new origins are simply not learnt (their requests stay on the network).
    if (origin !== undefined && this.reached.size < CSP_LIMITS.origins) this.reached.add(origin);
  }

  /** Whether the proxies (and the consent HEAD) may fetch `url` on the page's behalf. */
  verdict(url: string): CspVerdict {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return { ok: false, reason: 'csp' };
    }
    if (this.overflowed) return { ok: false, reason: 'csp' };
    for (const policy of this.policies) {
      if (!policyAllowsConnect(policy, target, this.self)) return { ok: false, reason: 'csp' };
    }
    if (this.blocked.has(target.origin)) return { ok: false, reason: 'csp' };
    if (target.origin !== this.pageOrigin && !this.reached.has(target.origin))
      return { ok: false, reason: 'csp-unseen' };
    return { ok: true };
  }
}

function originOf(raw: string): string | undefined {
  try {
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined; // 'inline', 'eval', '' and the like
  }
}
