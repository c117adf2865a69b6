// Authentication of a local nats-server (`hookline cluster up --nats`, `hookline dev --nats`,
// LocalNatsServer in the tests): one account, HOOKLINE, with JetStream, and its users: the
// operator, and one publisher per set of namespaces, each with a random password and the
// permissions the caller gives (src/jetstream/permissions.ts says which; this module only writes
// them). Nobody gets in without a user and password: nats-server refuses anonymous clients once
// an account has users.
//
// Passwords, not nkeys: they fit in the URL every Hookline client already takes
// (HOOKLINE_NATS_URL, --nats, the library's `nats` option: nats://USER:PASSWORD@HOST), and 192
// random bits are not guessed. The server's config holds them in clear, so every file here is
// 0600 in a 0700 directory.
//
// Layout inside DIR/nats-auth/:
//   users.json          every user and password, and each publisher's namespaces (the source)
//   nats-server.conf    the accounts and users nats-server reads (-c), written from users.json
//   accounts.conf       the same without the server's name: what each node of a local cluster
//                       includes (nats-cluster.ts), each naming itself
//   operator.password   the operator's password alone (HOOKLINE_NATS_PASSWORD_FILE)
//
// A local cluster's nodes also authenticate each other: the route user (users.json `route`), whom
// every node's cluster port requires, so a process of this machine cannot join as a node and
// read every account.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

/** Subjects a user may publish to and subscribe to (nats-server `permissions`); nothing else. */
export interface NatsUserPermissions {
  publish: string[];
  subscribe: string[];
}

/** What the users may do: given by the caller (src/jetstream/permissions.ts). */
export interface NatsAuthPolicy {
  operator: NatsUserPermissions;
  publisher: (namespaces: string[]) => NatsUserPermissions;
  /** Also a user that may do anything in the account (tests: setting up and looking at what the operator may not). */
  admin?: boolean;
}

export interface NatsUser {
  user: string;
  password: string;
}

export interface NatsPublisher extends NatsUser {
  namespaces: string[];
}

/** users.json. */
export interface NatsUsers {
  operator: NatsUser;
  publishers: NatsPublisher[];
  admin?: NatsUser;
  /** The nodes of a local cluster, to each other (the cluster port's authorization). */
  route?: NatsUser;
}

export const NATS_ACCOUNT = "HOOKLINE";
export const OPERATOR_USER = "hookline-operator";
/** The local server's name (JetStream's, in /varz): in the config file, or on the command line without one (nats.ts). */
export const LOCAL_SERVER_NAME = "hookline-local";
export const ADMIN_USER = "admin";
export const ROUTE_USER = "hookline-route";

export const natsAuthPaths = (dir: string) => {
  const root = join(resolve(dir), "nats-auth");
  return { root, users: join(root, "users.json"), config: join(root, "nats-server.conf"), accounts: join(root, "accounts.conf"), operatorPassword: join(root, "operator.password") };
};

const newPassword = (): string => randomBytes(24).toString("base64url");

/** The publisher of a set of namespaces: `publisher-<ns>[+<ns>...]` (a namespace has no "+"). */
export const publisherName = (namespaces: readonly string[]): string => `publisher-${[...new Set(namespaces)].sort().join("+")}`;

function writePrivate(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

/**
 * nats-server's config of the account and its users, named `serverName` (the local server's
 * name by default); `serverName: null`: no name, for a cluster's nodes to include. Pure.
 */
export function renderNatsConfig(users: NatsUsers, policy: NatsAuthPolicy, serverName: string | null = LOCAL_SERVER_NAME): string {
  const q = (s: string) => JSON.stringify(s);
  const list = (items: string[]) => `[${items.map(q).join(", ")}]`;
  const user = (u: NatsUser, p: NatsUserPermissions | undefined) =>
    [
      "      {",
      `        user: ${q(u.user)}`,
      `        password: ${q(u.password)}`,
      ...(p ? ["        permissions: {", `          publish: { allow: ${list(p.publish)} }`, `          subscribe: { allow: ${list(p.subscribe)} }`, "        }"] : []),
      "      }",
    ].join("\n");
  return [
    "# Written by Hookline from users.json beside it (hookline cluster up --nats); rewritten at each start.",
    "# One account with JetStream; its users and what each may do (docs/stream-mode.md).",
    // Here, not on the command line: a reload reads only this file.
    ...(serverName !== null ? [`server_name: ${q(serverName)}`] : []),
    "accounts: {",
    `  ${NATS_ACCOUNT}: {`,
    "    jetstream: enabled",
    "    users: [",
    [user(users.operator, policy.operator), ...users.publishers.map((p) => user(p, policy.publisher(p.namespaces))), ...(policy.admin && users.admin ? [user(users.admin, undefined)] : [])].join("\n"),
    "    ]",
    "  }",
    "}",
    "",
  ].join("\n");
}

function readUsers(file: string): NatsUsers | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, "utf8")) as NatsUsers;
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function writeAll(dir: string, users: NatsUsers, policy: NatsAuthPolicy): void {
  const p = natsAuthPaths(dir);
  mkdirSync(p.root, { recursive: true, mode: 0o700 });
  writePrivate(p.users, `${JSON.stringify(users, null, 2)}\n`);
  writePrivate(p.config, renderNatsConfig(users, policy));
  writePrivate(p.accounts, renderNatsConfig(users, policy, null));
  writePrivate(p.operatorPassword, users.operator.password);
}

/**
 * The users of DIR (made on first use, with a new operator password), and nats-server's config
 * written again from them with today's permissions. Returns the users and where the files are.
 */
export function ensureNatsAuth(dir: string, policy: NatsAuthPolicy, opts: { route?: boolean } = {}): NatsUsers & { paths: ReturnType<typeof natsAuthPaths> } {
  const p = natsAuthPaths(dir);
  const users = readUsers(p.users) ?? { operator: { user: OPERATOR_USER, password: newPassword() }, publishers: [] };
  if (policy.admin) users.admin ??= { user: ADMIN_USER, password: newPassword() };
  if (opts.route) users.route ??= { user: ROUTE_USER, password: newPassword() };
  writeAll(dir, users, policy);
  return { ...users, paths: p };
}

/**
 * The publisher of `namespaces` (made with a new password when there is none, the same one
 * otherwise), written into users.json and nats-server's config. `added` says whether the config
 * changed (nats-server must reload it). Throws what `policy.publisher` throws for a bad name.
 */
export function addNatsPublisher(dir: string, policy: NatsAuthPolicy, namespaces: readonly string[]): { publisher: NatsPublisher; added: boolean } {
  const sorted = [...new Set(namespaces)].sort();
  policy.publisher(sorted);
  const users = ensureNatsAuth(dir, policy);
  const name = publisherName(sorted);
  const have = users.publishers.find((x) => x.user === name);
  if (have) return { publisher: have, added: false };
  const publisher: NatsPublisher = { user: name, password: newPassword(), namespaces: sorted };
  const { paths: _paths, ...kept } = users;
  writeAll(dir, { ...kept, publishers: [...users.publishers, publisher] }, policy);
  return { publisher, added: true };
}

/** `url` (nats://HOST:PORT, or a comma-separated list of them: a cluster) with the user's credentials in each. */
export function urlWithCredentials(url: string, u: NatsUser): string {
  const creds = `${encodeURIComponent(u.user)}:${encodeURIComponent(u.password)}@`;
  return url
    .split(",")
    .map((one) => one.trim().replace(/^([a-z]+:\/\/)/i, `$1${creds}`))
    .join(",");
}
