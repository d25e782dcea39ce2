/**
 * casebook's TypeScript client: datasets read page by page from a casebook server (a pinned
 * version), files pushed and pulled, and runs logged from your own loop as `casebook run` records
 * them. The request and answer types are generated from the server's OpenAPI document
 * (`./openapi.js`); this file is the small layer over them.
 */
import { createHash, randomBytes } from "node:crypto";
import type { components } from "./openapi.js";

type Schemas = components["schemas"];
/** A dataset of the project, as the server lists it. */
export type Dataset = Schemas["Dataset"];
/** A version of a dataset: number, content id, author, time, message and counts. */
export type Version = Schemas["Version"];
/** What a push did: the version made (or the head the content already was), warnings. */
export type ImportReport = Schemas["ImportReport"];
/** A stored run: its settings (`meta`) and, once finished, its summary. */
export type StoredRun = Schemas["Run"];
/** The body of every error answer of the API: `{"error": ErrorDetail}`. */
export type ErrorBody = Schemas["ErrorBody"];
/** What an error answer says: its stable code, message, located diagnostics and request id. */
export type ErrorDetail = Schemas["ErrorDetail"];

/** A case as native casebook JSON (`id`, `input`, `expected`, `labels`, `metadata`, …). */
export interface Case {
  id: string;
  [field: string]: unknown;
}

/** Where the server is and the API key to use; from `CASEBOOK_URL` and `CASEBOOK_TOKEN` when absent. */
export interface ClientOptions {
  url?: string;
  token?: string;
  /** The `fetch` to send requests with (the global one by default). */
  fetch?: typeof fetch;
}

/**
 * What went wrong talking to a casebook server: which server, and why (the API's error code
 * and message, or the network's reason). `status` is the HTTP status, 0 when no answer came.
 */
export class CasebookError extends Error {
  override name = "CasebookError";
  constructor(
    /** The server's address. */
    readonly server: string,
    /** Why, in a line. */
    readonly reason: string,
    /** The HTTP status; 0 when the server could not be reached. */
    readonly status: number,
    /** The API's stable error code (`not-found`, `unauthorized`, `invalid-filter`, …), or `network`. */
    readonly code: string,
    /** What the error answer said, when the server sent one: its diagnostics locate problems in the input. */
    readonly body?: ErrorDetail,
  ) {
    super(`casebook server ${server}: ${reason}`);
  }
}

/** `name@ref` split; the reference is `latest` when absent. */
function splitRef(reference: string): { name: string; version: string } {
  const at = reference.lastIndexOf("@");
  if (at <= 0) return { name: reference, version: "latest" };
  return { name: reference.slice(0, at), version: reference.slice(at + 1) || "latest" };
}

/** A client of one casebook server, on behalf of one API key (and so one project). */
export class Casebook {
  readonly url: string;
  readonly #token: string;
  readonly #fetch: typeof fetch;
  #project: Promise<string> | undefined;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? process.env.CASEBOOK_URL;
    const token = options.token ?? process.env.CASEBOOK_TOKEN;
    if (!url) throw new CasebookError("(none)", "no server: pass `url` or set `CASEBOOK_URL`", 0, "config");
    if (!token) throw new CasebookError(url, "no API key: pass `token` or set `CASEBOOK_TOKEN`", 0, "config");
    this.url = url.replace(/\/+$/, "");
    this.#token = token;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Sends a request to `path` (under the server's address) and gives the answer, or throws a `CasebookError`. */
  async request(method: string, path: string, init: { body?: BodyInit; type?: string; query?: Record<string, string | number | undefined> } = {}): Promise<Response> {
    const query = Object.entries(init.query ?? {}).filter((entry): entry is [string, string | number] => entry[1] !== undefined);
    const search = query.length ? `?${new URLSearchParams(query.map(([k, v]) => [k, String(v)]))}` : "";
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, accept: "application/json" };
    if (init.type) headers["content-type"] = init.type;
    let response: Response;
    try {
      response = await this.#fetch(`${this.url}${path}${search}`, { method, headers, body: init.body });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (error as Error).message;
      throw new CasebookError(this.url, `cannot reach the server (${why})`, 0, "network");
    }
    if (response.ok) return response;
    const text = await response.text();
    let body: ErrorDetail | undefined;
    try {
      const parsed = JSON.parse(text) as Partial<ErrorBody>;
      body = parsed.error;
    } catch {
      body = undefined;
    }
    const reason = body?.message ?? `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}`;
    throw new CasebookError(this.url, reason, response.status, body?.code ?? "http", body);
  }

  async #json<T>(method: string, path: string, init?: Parameters<Casebook["request"]>[2]): Promise<T> {
    const response = await this.request(method, path, init);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  /** The project of the API key. */
  project(): Promise<string> {
    this.#project ??= this.#json<Schemas["Project"][]>("GET", "/api/v1/projects").then((projects) => {
      const first = projects[0];
      if (!first) throw new CasebookError(this.url, "the API key opens no project", 200, "garbled");
      return first.name;
    });
    return this.#project;
  }

  async #projectPath(rest: string): Promise<string> {
    return `/api/v1/projects/${encodeURIComponent(await this.project())}${rest}`;
  }

  async #datasetPath(name: string, rest = ""): Promise<string> {
    return this.#projectPath(`/datasets/${encodeURIComponent(name)}${rest}`);
  }

  /** The project's datasets. */
  async datasets(): Promise<Dataset[]> {
    return this.#json("GET", await this.#projectPath("/datasets"));
  }

  /** The version `reference` (`name@v3`, `name@prod`, `name` for the head) names. */
  async version(reference: string): Promise<Version> {
    const { name, version } = splitRef(reference);
    return this.#json("GET", await this.#datasetPath(name, `/versions/${encodeURIComponent(version)}`));
  }

  /**
   * The cases of a version (`support@prod`; the head without `@`), those `where` selects (the
   * filter language), read a page at a time from one version, pinned when the first page is
   * asked for: iterate it with `for await` (cases) or `.pages()`.
   */
  dataset(reference: string, options: { where?: string; pageSize?: number } = {}): DatasetCases {
    return new DatasetCases(this, reference, options.where, options.pageSize ?? 200);
  }

  /**
   * Reads one page of the cases of `name`'s version `version` (used by `DatasetCases`);
   * `content_ids: true` asks for each case's content id too.
   */
  async page(name: string, version: string, query: { where?: string; limit: number; cursor?: string; content_ids?: boolean }): Promise<Schemas["CasePage"]> {
    const { content_ids, ...rest } = query;
    return this.#json("GET", await this.#datasetPath(name, `/versions/${encodeURIComponent(version)}/cases`), {
      query: { ...rest, content_ids: content_ids ? "true" : undefined },
    });
  }

  /**
   * Makes `cases` (native cases, or a file's text in any format casebook reads) the next
   * version of the dataset `name` (its first when it is new), as `casebook push` does.
   */
  async push(
    name: string,
    cases: Case[] | string,
    options: { message?: string; filename?: string; format?: string; mode?: "replace" | "upsert"; parent?: string } = {},
  ): Promise<ImportReport> {
    const text = typeof cases === "string" ? cases : cases.map((c) => JSON.stringify(c)).join("\n") + "\n";
    const filename = options.filename ?? (typeof cases === "string" ? undefined : `${name}.jsonl`);
    return this.#json("POST", await this.#datasetPath(name, "/import"), {
      body: text,
      type: "application/octet-stream",
      query: {
        message: options.message,
        filename,
        format: options.format ?? (typeof cases === "string" ? undefined : "casebook"),
        mode: options.mode,
        parent: options.parent,
      },
    });
  }

  /**
   * A version as a file's text (`native` casebook JSON lines by default; any format with
   * `format` and `syntax`), the cases `where` selects; what `casebook pull` writes.
   */
  async pull(reference: string, options: { format?: string; syntax?: string; where?: string } = {}): Promise<string> {
    const { name, version } = splitRef(reference);
    const response = await this.request("GET", await this.#datasetPath(name, `/versions/${encodeURIComponent(version)}/export`), {
      query: { format: options.format, syntax: options.syntax, where: options.where },
    });
    return response.text();
  }

  /**
   * Begins a run of `reference`'s version (pinned now) under `name`: log each case's result
   * with `log`, then `finish`. It is recorded as `casebook run` records its runs, so
   * `casebook results`, `compare` and the console show it beside them.
   */
  async run(reference: string, options: { name: string; scenario?: string; threshold?: number }): Promise<Run> {
    const { name } = splitRef(reference);
    const version = await this.version(reference);
    const started = new Date().toISOString();
    const stamp = started.replace(/[^0-9A-Za-z]/g, "").slice(0, 15);
    const id = `r-${stamp}-${randomBytes(3).toString("hex")}`;
    const scenario = options.scenario ?? "client";
    const meta = {
      run_id: id,
      experiment: options.name,
      dataset: name,
      dataset_version_id: version.id,
      started,
      finished: "",
      n_runs: 1,
      scenarios: [scenario],
      targets: [{ kind: "client", client: "casebook-ts" }],
    };
    const body: Schemas["NewRun"] = { id, experiment: options.name, started, meta };
    await this.#json("POST", await this.#projectPath("/runs"), { body: JSON.stringify(body), type: "application/json" });
    return new Run(this, id, `${name}@v${version.number}`, version, scenario, options.threshold);
  }

  /** Sends a batch of a run's results (used by `Run`). */
  async saveResults(run: string, results: Schemas["ResultIn"][]): Promise<void> {
    await this.#json("POST", await this.#projectPath(`/runs/${encodeURIComponent(run)}/results`), {
      body: JSON.stringify(results),
      type: "application/json",
    });
  }

  /** Ends a run: the server counts its summary from its results (used by `Run`). */
  async finishRun(run: string, threshold?: number): Promise<StoredRun> {
    const body: Schemas["FinishRun"] = { finished: new Date().toISOString(), threshold };
    const path = await this.#projectPath(`/runs/${encodeURIComponent(run)}`);
    await this.#json("PUT", `${path}/finish`, { body: JSON.stringify(body), type: "application/json" });
    return this.#json("GET", path);
  }

  /** A stored run by id (`latest` for the newest). */
  async storedRun(id: string): Promise<StoredRun> {
    return this.#json("GET", await this.#projectPath(`/runs/${encodeURIComponent(id)}`));
  }
}

/** A page of cases, and the version they are of. */
export interface Page {
  version: number;
  cases: Case[];
  /** Each case's content id, in the same order (what `Run.log` records with a result). */
  contentIds: string[];
}

/** The content id of each case read by `DatasetCases`, kept beside the case, not in it. */
const contentIds = new WeakMap<Case, string>();

/**
 * The content id of a case read from a server (`dataset()`): the id of its content in the
 * version it was read from, which a run's results carry. `undefined` for a case made here.
 */
export function contentId(c: Case): string | undefined {
  return contentIds.get(c) ?? (typeof c.content_id === "string" ? c.content_id : undefined);
}

/** The cases of one version, read a page at a time (`Casebook.dataset`). */
export class DatasetCases implements AsyncIterable<Case> {
  #pinned: Promise<Version> | undefined;

  constructor(
    readonly client: Casebook,
    readonly reference: string,
    readonly where: string | undefined,
    readonly pageSize: number,
  ) {}

  /** The version read: resolved once, on first use, and kept for every page after. */
  version(): Promise<Version> {
    this.#pinned ??= this.client.version(this.reference);
    return this.#pinned;
  }

  /** The pages, in the version's order. */
  async *pages(): AsyncGenerator<Page> {
    const { name } = splitRef(this.reference);
    const pinned = `v${(await this.version()).number}`;
    let cursor: string | undefined;
    do {
      const page = await this.client.page(name, pinned, { where: this.where, limit: this.pageSize, cursor, content_ids: true });
      const cases = page.cases as unknown as Case[];
      const ids = page.content_ids ?? [];
      cases.forEach((c, i) => {
        const id = ids[i];
        if (id !== undefined) contentIds.set(c, id);
      });
      yield { version: page.version, cases, contentIds: ids };
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Case> {
    for await (const page of this.pages()) yield* page.cases;
  }

  /** Every selected case in one list (mind the memory on large versions). */
  async toArray(): Promise<Case[]> {
    const all: Case[] = [];
    for await (const c of this) all.push(c);
    return all;
  }
}

/** A grader's verdict as `log` takes it: a score in 0..1 (a pass from 0.5), or the whole verdict. */
export type Score = number | { score: number; pass?: boolean; rationale?: string };

/** What one case's run produced, for `Run.log`. */
export interface Logged {
  /** The agent's final output. */
  output?: unknown;
  /** Each turn's output, in order. */
  perTurn?: unknown[];
  /** The agent's steps: `{type: "message", role, content}`, `{type: "tool_call", name, arguments, result}`, … */
  trajectory?: unknown[];
  /** Grader name → score or verdict. */
  scores?: Record<string, Score>;
  /** Wall time of the case's run, milliseconds. */
  millis?: number;
  /** Why the agent failed: the result is an error, counted apart, never a score of 0. */
  error?: { kind: string; message: string } | Error | string;
}

/** A run being logged from your own loop (`Casebook.run`). Results are sent in batches. */
export class Run {
  #seq = 0;
  #pending: Schemas["ResultIn"][] = [];
  #finished = false;

  constructor(
    readonly client: Casebook,
    /** The run's id, as `casebook results` takes it. */
    readonly id: string,
    /** The version run, pinned: `name@vN`. */
    readonly dataset: string,
    readonly version: Version,
    readonly scenario: string,
    readonly threshold: number | undefined,
    /** Results sent at once. */
    readonly batch = 100,
  ) {}

  /** The cases of the pinned version that `where` selects. */
  cases(options: { where?: string; pageSize?: number } = {}): DatasetCases {
    return this.client.dataset(this.dataset, options);
  }

  /** Records `case`'s result: its output, scores and trajectory, or its error. */
  async log(c: Case, logged: Logged): Promise<void> {
    if (this.#finished) throw new CasebookError(this.client.url, `run ${this.id} is finished: begin another with \`run()\``, 0, "finished");
    const seq = this.#seq++;
    const grades = Object.entries(logged.scores ?? {}).map(([grader, s]) => {
      const verdict = typeof s === "number" ? { score: s } : s;
      return { grader, weight: 1, score: verdict.score, pass: verdict.pass ?? verdict.score >= 0.5, rationale: verdict.rationale ?? "" };
    });
    const error = logged.error === undefined ? undefined : toFailure(logged.error);
    const result: Record<string, unknown> = {
      case_id: c.id,
      // The content id the server gave with the case (`dataset()`), as `casebook run` and the
      // Python client record it; empty for a case made here.
      case_content_id: contentId(c) ?? "",
      scenario: this.scenario,
      run: 0,
      // A hash of the run and case: the output is kept under it, never mistaken for another's.
      hash: createHash("sha256").update(`casebook-ts\0${this.id}\0${c.id}\0${seq}`).digest("hex"),
    };
    if (Array.isArray(c.labels) && c.labels.length) result.labels = c.labels;
    if (typeof c.review === "string") result.review = c.review;
    if (typeof c.confidence === "number") result.confidence = c.confidence;
    let output: Schemas["OutputIn"] | null = null;
    if (error) {
      result.error = error;
    } else {
      const full = { output: logged.output ?? null, per_turn: logged.perTurn ?? [], trajectory: logged.trajectory ?? [], millis: logged.millis ?? 0 };
      result.output = { millis: full.millis };
      output = { hash: result.hash as string, output: full };
      if (grades.length) {
        result.grades = grades;
        result.score = grades.reduce((sum, g) => sum + g.score, 0) / grades.length;
        result.pass = grades.every((g) => g.pass);
      }
    }
    this.#pending.push({ seq, result, output });
    if (this.#pending.length >= this.batch) await this.flush();
  }

  /** Sends the results logged and not yet sent. */
  async flush(): Promise<void> {
    if (!this.#pending.length) return;
    const batch = this.#pending;
    this.#pending = [];
    await this.client.saveResults(this.id, batch);
  }

  /** Sends what is left and ends the run; the server counts its summary. Gives the stored run. */
  async finish(): Promise<StoredRun> {
    await this.flush();
    this.#finished = true;
    return this.client.finishRun(this.id, this.threshold);
  }
}

function toFailure(error: NonNullable<Logged["error"]>): { kind: string; message: string } {
  if (typeof error === "string") return { kind: "client", message: error };
  if (error instanceof Error) return { kind: "client", message: error.message };
  return error;
}

let shared: Casebook | undefined;
/** The client of `CASEBOOK_URL` and `CASEBOOK_TOKEN`, made on first use. */
function client(): Casebook {
  shared ??= new Casebook();
  return shared;
}

/** `new Casebook().dataset(…)` with `CASEBOOK_URL` and `CASEBOOK_TOKEN`. */
export function dataset(reference: string, options?: { where?: string; pageSize?: number }): DatasetCases {
  return client().dataset(reference, options);
}

/** `new Casebook().push(…)` with `CASEBOOK_URL` and `CASEBOOK_TOKEN`. */
export function push(name: string, cases: Case[] | string, options?: Parameters<Casebook["push"]>[2]): Promise<ImportReport> {
  return client().push(name, cases, options);
}

/** `new Casebook().pull(…)` with `CASEBOOK_URL` and `CASEBOOK_TOKEN`. */
export function pull(reference: string, options?: Parameters<Casebook["pull"]>[1]): Promise<string> {
  return client().pull(reference, options);
}

/** `new Casebook().run(…)` with `CASEBOOK_URL` and `CASEBOOK_TOKEN`. */
export function run(reference: string, options: Parameters<Casebook["run"]>[1]): Promise<Run> {
  return client().run(reference, options);
}
