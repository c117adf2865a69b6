// The bytes of stream messages one replica holds in memory (HOOKLINE_STREAM_MAX_HELD_BYTES),
// shared between namespaces and, within a namespace, between its subscriptions. A message is
// held from the moment it is fetched until it is answered (acknowledged, handed back, dead-
// lettered), its attempt included, and counts twice its size: its bytes, and the request body
// made of them while it is sent (messageCost), so that the budget bounds what stream messages
// take, requests in flight included. A pull reserves room for every message it asks for (the
// largest a message may cost) before it is sent, so what arrives always fits. Above the budget a
// replica fetches nothing more: the messages wait in JetStream, not in the process. Pure
// bookkeeping, no I/O.
//
// The fair-share rule (as the global request slots share between namespaces: global-slots.ts):
//   share       the budget / namespaces holding or waiting, / that namespace's subscriptions
//               holding or waiting;
//   lending     room nobody waits for may be taken by anyone, beyond its share, but the last
//               eighth of the budget (at least room for the largest message: `headroom`) only
//               by a subscription that holds less than that itself, so a subscription that
//               starts pulling always finds room, even beside one whose messages are all in
//               requests (those cannot be handed back: they hold their room until answered);
//   waiting     an account that cannot get room for one message waits, and is woken when bytes
//               are given back; while one below its share waits, nobody at or above its share
//               gets more;
//   shedding    one below its share that waits asks those above theirs to hand back messages
//               they hold but have not started (parked for a slot, waiting for a token): they
//               go back to JetStream for later, so a subscription that holds everything (a slow
//               endpoint behind busy request slots) cannot starve another's pulls.

import { MAX_MESSAGE_BYTES } from "../../jetstream/message.js";

/** What a fetched message of `size` bytes (subject, reply, headers, body) counts: itself, and the request body made of it while it is sent. */
export const messageCost = (size: number): number => 2 * size;

/** The message bytes `cost` pays for (the inverse of messageCost). */
export const costBytes = (cost: number): number => Math.floor(cost / 2);

/** The largest message a pull may meet, as JetStream counts it: the stream's max_msg_size plus its subject and reply subject. */
export const LARGEST_MESSAGE_BYTES = MAX_MESSAGE_BYTES + 2 * 1024;

/** Room the largest message takes. */
export const MESSAGE_ROOM_BYTES = messageCost(LARGEST_MESSAGE_BYTES);

/** One subscription's use of the budget on this replica. */
export interface HeldAccount {
  readonly namespace: string;
  /** Held and reserved now. */
  readonly bytes: number;
  /** Reserved for pulls still open (part of `bytes`). */
  readonly reserved: number;
  /** Bytes it may reserve now, at least `min` (default: room for the largest message); 0 when it must wait (`wake` is called once room frees). */
  room(min?: number): number;
  /** A pull asks for messages: room for them, reserved. */
  reserve(bytes: number): void;
  /** A message arrived on a pull: its `cost` (messageCost) comes out of what the pull reserved. */
  arrived(cost: number): void;
  /** A pull ended: what it reserved and did not get goes back. */
  unreserve(bytes: number): void;
  /** A message was answered: its bytes go back. */
  give(bytes: number): void;
  /** It wants no room now (nothing to fetch, or the subscription holds its events): it stops waiting. */
  rest(): void;
  /** The subscription's stream stopped: whatever it still counts is given back. */
  close(): void;
}

interface Account extends HeldAccount {
  bytes: number;
  reserved: number;
  waiting: boolean;
  wake: () => void;
  /** Hands back messages it holds and has not started, about `bytes` of them; returns what it freed. */
  shed: (bytes: number) => number;
}

export class HeldBudget {
  private total = 0;
  /** The room kept for subscriptions that hold less than this themselves. */
  readonly headroom: number;
  /** Accounts holding bytes or waiting for room, by namespace: the ones a share is computed over. */
  private readonly active = new Map<string, Set<Account>>();

  constructor(
    readonly limit: number,
    /** Called with a namespace's bytes whenever they change (the metric). */
    private readonly onChange?: (namespace: string, bytes: number) => void,
  ) {
    if (limit < MESSAGE_ROOM_BYTES) throw new Error(`a held-bytes budget of ${limit} bytes cannot hold the largest message (${MESSAGE_ROOM_BYTES} bytes counted)`);
    this.headroom = Math.min(limit, Math.max(MESSAGE_ROOM_BYTES, Math.floor(limit / 8)));
  }

  /** Held and reserved across the replica. */
  get used(): number {
    return this.total;
  }

  /** What a namespace holds on this replica: messages that arrived, not the room reserved for pulls. */
  heldBy(namespace: string): number {
    let n = 0;
    for (const a of this.active.get(namespace) ?? []) n += a.bytes - a.reserved;
    return n;
  }

  account(namespace: string, hooks: { wake: () => void; shed: (bytes: number) => number }): HeldAccount {
    const a: Account = {
      namespace,
      bytes: 0,
      reserved: 0,
      waiting: false,
      wake: hooks.wake,
      shed: hooks.shed,
      room: (min = MESSAGE_ROOM_BYTES) => this.room(a, min),
      reserve: (bytes) => {
        a.reserved += bytes;
        this.change(a, bytes);
      },
      arrived: (cost) => {
        const from = Math.min(cost, a.reserved);
        a.reserved -= from;
        this.change(a, cost - from);
      },
      unreserve: (bytes) => {
        const back = Math.min(bytes, a.reserved);
        a.reserved -= back;
        this.change(a, -back);
      },
      give: (bytes) => this.change(a, -Math.min(bytes, a.bytes - a.reserved)),
      rest: () => this.setWaiting(a, false),
      close: () => {
        a.waiting = false;
        a.reserved = 0;
        this.change(a, -a.bytes);
      },
    };
    return a;
  }

  /** The bytes an account's share is: the budget split between the active namespaces, then between the namespace's active accounts (counting `a`). */
  share(a: HeldAccount): number {
    const own = this.active.get(a.namespace);
    const namespaces = this.active.size + (own ? 0 : 1);
    const accounts = (own?.size ?? 0) + (own?.has(a as Account) ? 0 : 1);
    return this.limit / namespaces / accounts;
  }

  private room(a: Account, min: number): number {
    const share = this.share(a);
    const free = this.limit - this.total;
    // Beyond the headroom anyone may take; within it, only up to holding `headroom` oneself.
    let room = Math.max(free - this.headroom, Math.min(free, this.headroom - a.bytes));
    // Someone below their share waits: nobody else takes more than up to their own share.
    if (this.someoneBelowShareWaits(a)) room = Math.min(room, share - a.bytes);
    if (room >= min) {
      this.setWaiting(a, false);
      return room;
    }
    this.setWaiting(a, true);
    // What must be freed for it to get `min`: within the headroom while it holds little, beyond it otherwise.
    if (a.bytes < share) this.shedFor(a, this.headroom - a.bytes >= min ? min - free : this.headroom + min - free);
    return 0;
  }

  private someoneBelowShareWaits(except: Account): boolean {
    for (const set of this.active.values()) for (const o of set) if (o !== except && o.waiting && o.bytes < this.share(o)) return true;
    return false;
  }

  /** Asks the accounts furthest above their share to hand back what they hold and have not started. */
  private shedFor(a: Account, bytes: number): void {
    const over: Array<{ o: Account; excess: number }> = [];
    for (const set of this.active.values()) {
      for (const o of set) {
        if (o === a) continue;
        const excess = o.bytes - this.share(o);
        if (excess > 0) over.push({ o, excess });
      }
    }
    over.sort((x, y) => y.excess - x.excess);
    let left = bytes;
    for (const { o, excess } of over) {
      if (left <= 0) break;
      left -= o.shed(Math.min(excess, Math.max(left, MESSAGE_ROOM_BYTES)));
    }
  }

  private setWaiting(a: Account, waiting: boolean): void {
    if (a.waiting === waiting) return;
    a.waiting = waiting;
    this.track(a);
  }

  private change(a: Account, delta: number): void {
    if (delta === 0) return;
    a.bytes += delta;
    this.total += delta;
    this.track(a);
    this.onChange?.(a.namespace, this.heldBy(a.namespace));
    if (delta < 0) this.wakeWaiting();
  }

  /** Keeps `active` to the accounts holding bytes or waiting. */
  private track(a: Account): void {
    let set = this.active.get(a.namespace);
    if (a.bytes > 0 || a.waiting) {
      if (!set) this.active.set(a.namespace, (set = new Set()));
      set.add(a);
    } else if (set) {
      set.delete(a);
      if (set.size === 0) this.active.delete(a.namespace);
    }
  }

  /** Bytes were given back: every waiting account looks again (each asks room() for itself). */
  private wakeWaiting(): void {
    for (const set of this.active.values()) for (const o of set) if (o.waiting) o.wake();
  }
}
