//! Noise injection (SPEC §9): widening each case's world snapshot with unrelated context items,
//! to measure whether an agent can sift signal from noise.
//!
//! An experiment (or one scenario) says `noise: {from: cases | FILE, items: N, similar_by: PATH,
//! seed: S}` ([`NoiseSpec`], read here for [`crate::experiment`]). [`plan`] picks, for every case,
//! `N` items and the places they go among the case's own context items ([`Widening`]):
//!
//! - The pool is the `task.context` of the *other* selected cases (never their expectations, nor
//!   their choices), or the items of a noise file. An item of the case itself is never taken.
//! - A candidate whose text holds any expectation string of the case being widened (its expected
//!   output, per-turn values, acceptable answers, outcome texts, rubric and rubric variables;
//!   compared without case) is skipped: noise never carries the answer in.
//! - With `similar_by`, items of cases that share a value at that path (`label.service`,
//!   `metadata.team`) come first, so that the noise is plausible rather than off-topic.
//! - Sampling is a pure function of the seed, the case id and each candidate's own name (its
//!   case id and index, or its index in the file): every candidate gets a score from a BLAKE3
//!   key of those, the lowest scores win. The same seed gives the same items in the same places,
//!   and adding an unrelated case changes a case's noise only if one of the new items scores
//!   lower than those picked. Places come from a small PRNG (splitmix64) seeded the same way.
//!
//! The widened task is what the run hash covers and what the agent is sent; nothing in a
//! request marks an item as noise. A result records what was added ([`NoiseAdded`]).
//! Picking costs one hash per candidate item and case: O(cases × pool) for `from: cases`.
//!
//! **Noise in the environment** (`tools: {entries: N, defaults: R}`, [`ToolNoiseSpec`]) changes
//! the answers the case's tools have recorded, before the run, so the run's environment serves
//! it like any recorded answer:
//!
//! - Each recorded result that is a JSON array (a list of log lines, of metrics, of hits) gets
//!   `entries` unrelated entries at seeded places, drawn from the array results of the other
//!   cases' tools, those of a tool of the same name first. Only arrays: a string's lines may be
//!   one signal (a stack trace, a table) that splitting would break.
//! - Each tool with a `default` answer has it replaced, with probability `defaults` (seeded per
//!   case and tool), by a whole recorded result of another case's tool (same name first): the
//!   calls the snapshot does not match get a plausible signal rather than an obvious blank. A
//!   tool without a `default` keeps answering such calls with an error, so `unmatched` calls
//!   stay countable with or without noise.
//!
//! Sources are the other cases' recorded `result`s, the task half only, never their
//! expectations; one whose text holds an expectation string of the case being widened is
//! skipped, as for context items. Candidates are drawn with a PRNG seeded by the seed, the case
//! id, the tool and the response (all of a small pool, shuffled; a bounded number of draws from
//! a large one), so the cost is per list, not per list × pool.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use std::collections::HashMap;

use casebook_filter::FieldPath;
use casebook_formats::node::{Node, NodeValue};
use casebook_formats::pointer::Ptr;
use casebook_model::snapshot::{Fallback, Responses};
use casebook_model::{Case, ContextItem, Task, Tool};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::experiment::{ExperimentError, Reader};

/// An experiment's or a scenario's `noise:`.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseSpec {
    pub from: NoiseSource,
    /// Items added to each case (fewer when the pool has fewer).
    pub items: u32,
    /// Prefer items of cases with the same value at this path.
    pub similar_by: Option<SimilarBy>,
    pub seed: i64,
    /// Noise in the answers of the case's tools.
    pub tools: Option<ToolNoiseSpec>,
}

/// `noise: {tools: {entries: N, defaults: R}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolNoiseSpec {
    /// Entries added to each recorded result that is a JSON array.
    pub entries: u32,
    /// The probability (0..1) that a tool's `default` answer is replaced by another case's
    /// recorded result.
    pub defaults: f64,
}

/// Where noise items come from.
#[derive(Debug, Clone, PartialEq)]
pub enum NoiseSource {
    /// The context items of the other selected cases.
    Cases,
    /// A noise file's items; `name` as the experiment wrote it.
    File { name: String, items: Vec<ContextItem> },
}

/// A `similar_by` path, as written and parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct SimilarBy {
    pub text: String,
    pub path: FieldPath,
}

/// One item added to a case's context, or to a tool's answers: where it landed and where it
/// came from.
///
/// As JSON: `{"at": 2, "from_case": "c-7", "item": 0}` or `{"at": 1, "from_file": "noise.yaml",
/// "item": 4}` (`item` is the index in that case's context, or in the file). In a tool's answers:
/// `{"at": 3, "from_case": "c-7", "item": 1, "tool": {"name": "logs", "response": 0,
/// "from_tool": "logs", "from_response": 2}}`: entry 1 of the result of response 2 of `c-7`'s
/// `logs` went to place 3 of the result of response 0; without `response`, the tool's default
/// answer was replaced by that whole result (`at` and `item` are 0).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NoiseAdded {
    /// 0-based place in the widened context (or list result).
    pub at: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_case: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_file: Option<String>,
    pub item: usize,
    /// Set for noise in a tool's answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolNoise>,
}

/// Where noise in a tool's answers went and came from (see [`NoiseAdded`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ToolNoise {
    /// The case's tool that got it.
    pub name: String,
    /// The response whose list result got an entry; absent: the default answer was replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<usize>,
    /// The other case's tool and response it comes from.
    pub from_tool: String,
    pub from_response: usize,
}

/// The noise one case gets in one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Widening {
    /// The context items by place, lowest first; then the noise in tools' answers, by tool and
    /// list, each list's entries by place, lowest first.
    pub added: Vec<NoiseAdded>,
    /// The context items, in the order of `added`.
    items: Vec<ContextItem>,
    /// The values put into tools' answers, in the order of the tool part of `added`.
    answers: Vec<Value>,
}

impl Widening {
    /// Puts the noise items into `task`'s context at their places, and the noise in tools'
    /// answers into its tools.
    pub fn apply(&self, task: &mut Task) {
        let (context_part, tool_part): (Vec<&NoiseAdded>, Vec<&NoiseAdded>) =
            self.added.iter().partition(|added| added.tool.is_none());
        if !context_part.is_empty() {
            let context = task.context.get_or_insert_with(Vec::new);
            // Places are final and ascending: each insertion leaves the earlier ones where they are.
            for (added, item) in context_part.iter().zip(&self.items) {
                let at = added.at.min(context.len());
                context.insert(at, item.clone());
            }
        }
        let Some(tools) = task.tools.as_mut() else { return };
        for (added, value) in tool_part.iter().zip(&self.answers) {
            let Some(noise) = &added.tool else { continue };
            let Some(tool) = tools.iter_mut().find(|t| t.name == noise.name) else { continue };
            match noise.response {
                Some(response) => {
                    if let Some(Value::Array(list)) = result_mut(tool, response) {
                        let at = added.at.min(list.len());
                        list.insert(at, value.clone());
                    }
                }
                None => tool.default = Some(Fallback::Answer { result: Some(value.clone()), error: None }),
            }
        }
    }

    /// `task`, widened.
    pub fn widened(&self, task: &Task) -> Task {
        let mut task = task.clone();
        self.apply(&mut task);
        task
    }
}

/// The noise of every case (outer, in `cases` order) in every scenario (inner, in `specs`
/// order): `None` where a scenario has no noise. Scenarios with the same spec share a widening.
/// ([`NoisePools`] over `cases`, then [`Noise::widen`] of each.)
pub fn plan(cases: &[Case], specs: &[Option<NoiseSpec>]) -> Vec<Vec<Option<Arc<Widening>>>> {
    let Some(mut pools) = NoisePools::new(specs) else { return vec![vec![None; specs.len()]; cases.len()] };
    for (c, case) in cases.iter().enumerate() {
        pools.add(c, case);
    }
    let noise = pools.finish();
    cases.iter().enumerate().map(|(c, case)| noise.widen(c, case)).collect()
}

/// Context items sampled from the cases for one spec, at most.
pub const SAMPLED_ITEMS: usize = 2048;
/// Entries of tools' list results sampled for one spec, at most.
pub const SAMPLED_ENTRIES: usize = 2048;
/// Tools' whole results sampled for one spec, at most.
pub const SAMPLED_RESULTS: usize = 512;
/// Bytes (of JSON, roughly) each of those samples holds at most.
pub const SAMPLED_BYTES: usize = 4 << 20;

/// What the noise of an experiment's scenarios draws from, sampled as the selected cases stream
/// by ([`NoisePools::add`], in order); [`NoisePools::finish`] makes the [`Noise`] that widens
/// each case.
///
/// Each pool keeps a bounded sample of the other cases' context items and recorded tool results:
/// those whose key (a BLAKE3 hash of the seed and the item's name: its case id and place) is
/// lowest, as many as fit in [`SAMPLED_ITEMS`] (or [`SAMPLED_ENTRIES`], [`SAMPLED_RESULTS`]) and
/// [`SAMPLED_BYTES`], cut at the first that does not fit. So the sample depends on the seed and
/// the cases, not on the order they come in nor the threads that read them; when the cases hold
/// fewer, it is all of them, and the noise is what drawing from every case gives.
pub struct NoisePools {
    /// Per scenario, its pool's place in `pools`.
    of_scenario: Vec<Option<usize>>,
    pools: Vec<PoolBuilder>,
}

/// What one spec's noise draws from.
pub struct Noise {
    of_scenario: Vec<Option<usize>>,
    pools: Vec<Pool>,
}

impl NoisePools {
    /// Pools for the scenarios' `specs` (scenarios with the same spec share one); `None` when
    /// no scenario has noise.
    pub fn new(specs: &[Option<NoiseSpec>]) -> Option<Self> {
        let mut pools: Vec<PoolBuilder> = Vec::new();
        let mut of_scenario = Vec::with_capacity(specs.len());
        for spec in specs {
            of_scenario.push(spec.as_ref().map(|spec| match pools.iter().position(|p| p.spec == *spec) {
                Some(at) => at,
                None => {
                    pools.push(PoolBuilder::new(spec.clone()));
                    pools.len() - 1
                }
            }));
        }
        (!pools.is_empty()).then_some(Self { of_scenario, pools })
    }

    /// Offers selected case `c` (0-based, in order) to every pool.
    pub fn add(&mut self, c: usize, case: &Case) {
        for pool in &mut self.pools {
            pool.add(c, case);
        }
    }

    pub fn finish(self) -> Noise {
        Noise { of_scenario: self.of_scenario, pools: self.pools.into_iter().map(PoolBuilder::finish).collect() }
    }
}

impl Noise {
    /// The noise selected case `c` gets in each scenario (`None` where a scenario has none;
    /// scenarios with the same spec share it).
    pub fn widen(&self, c: usize, case: &Case) -> Vec<Option<Arc<Widening>>> {
        let widened: Vec<Arc<Widening>> = self.pools.iter().map(|pool| Arc::new(pool.widening(c, case))).collect();
        self.of_scenario.iter().map(|at| at.map(|at| widened[at].clone())).collect()
    }
}

/// A case whose items are in a sample: its place among the selected cases, its id, its values
/// at `similar_by` (as JSON text).
struct Owner {
    c: usize,
    id: String,
    values: BTreeSet<String>,
}

/// A sample's order: the key, then the item's place (case, tool, response, index), which
/// also orders the final sample.
type Rank = (u64, [usize; 4]);

/// The items of lowest rank that fit in a count and a size (see [`NoisePools`]): a max-heap
/// cut as it goes, and in the end only what ranks below everything cut (which makes the sample
/// the same whatever order the items came in).
struct Sample<T> {
    heap: std::collections::BinaryHeap<Held<T>>,
    bytes: usize,
    most: usize,
    budget: usize,
    /// The lowest rank cut so far.
    cut: Option<Rank>,
}

struct Held<T> {
    rank: Rank,
    bytes: usize,
    value: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank.cmp(&other.rank)
    }
}

impl<T> Sample<T> {
    fn new(most: usize) -> Self {
        Self { heap: Default::default(), bytes: 0, most, budget: SAMPLED_BYTES, cut: None }
    }

    /// Whether an item of `rank` could still be kept.
    fn wants(&self, rank: &Rank) -> bool {
        self.cut.is_none_or(|cut| *rank < cut)
    }

    fn offer(&mut self, rank: Rank, bytes: usize, value: impl FnOnce() -> T) {
        if !self.wants(&rank) || self.most == 0 {
            return;
        }
        self.heap.push(Held { rank, bytes, value: value() });
        self.bytes += bytes;
        while self.heap.len() > self.most || self.bytes > self.budget {
            let Some(top) = self.heap.pop() else { break };
            self.bytes -= top.bytes;
            self.cut = Some(self.cut.map_or(top.rank, |cut| cut.min(top.rank)));
        }
    }

    /// What was kept, in the items' order.
    fn finish(self) -> Vec<T> {
        let cut = self.cut;
        let mut kept: Vec<Held<T>> =
            self.heap.into_vec().into_iter().filter(|held| cut.is_none_or(|cut| held.rank < cut)).collect();
        kept.sort_unstable_by_key(|held| held.rank.1);
        kept.into_iter().map(|held| held.value).collect()
    }
}

/// One spec's samples while the cases stream by.
struct PoolBuilder {
    spec: NoiseSpec,
    candidates: Sample<Candidate>,
    entries: Sample<Source>,
    results: Sample<Source>,
}

impl PoolBuilder {
    fn new(spec: NoiseSpec) -> Self {
        let tools = spec.tools.is_some();
        let items = if spec.items > 0 && spec.from == NoiseSource::Cases { SAMPLED_ITEMS } else { 0 };
        Self {
            spec,
            candidates: Sample::new(items),
            entries: Sample::new(if tools { SAMPLED_ENTRIES } else { 0 }),
            results: Sample::new(if tools { SAMPLED_RESULTS } else { 0 }),
        }
    }

    fn add(&mut self, c: usize, case: &Case) {
        let seed = self.spec.seed.to_le_bytes();
        let id = case.id.as_bytes();
        // Made once the case has an item in a sample.
        let mut owner: Option<Arc<Owner>> = None;
        let mut owner_of = |case: &Case| {
            owner
                .get_or_insert_with(|| {
                    let values = match &self.spec.similar_by {
                        Some(similar) => similar.path.values(case).iter().map(Value::to_string).collect(),
                        None => BTreeSet::new(),
                    };
                    Arc::new(Owner { c, id: case.id.clone(), values })
                })
                .clone()
        };
        if self.candidates.most > 0 {
            for (index, item) in case.task.context.iter().flatten().enumerate() {
                // Another question's choices would be a second list of options.
                if casebook_model::choices::is_choices(item) {
                    continue;
                }
                let place = (index as u64).to_le_bytes();
                let rank = (key_of(&[b"sample", &seed, b"case", id, &place]), [c, index, 0, 0]);
                if !self.candidates.wants(&rank) {
                    continue;
                }
                let text = lower_json(item);
                let key = key_of(&[b"case", id, &place]);
                let from = owner_of(case);
                self.candidates.offer(rank, 2 * text.len() + 64, || Candidate {
                    owner: Some(from),
                    index,
                    item: item.clone(),
                    key,
                    text,
                });
            }
        }
        if self.results.most == 0 {
            return;
        }
        for (t, tool) in case.task.tools.iter().flatten().enumerate() {
            let name = tool.name.as_bytes();
            for (response, value) in results(tool) {
                let r = (response as u64).to_le_bytes();
                let rank = (key_of(&[b"tool-sample", &seed, id, name, &r]), [c, t, response, 0]);
                if self.results.wants(&rank) {
                    let bytes = serde_json::to_string(value).map_or(0, |text| text.len()) + tool.name.len() + 64;
                    let owner = owner_of(case);
                    self.results.offer(rank, bytes, || Source {
                        owner,
                        tool: tool.name.clone(),
                        response,
                        index: 0,
                        value: value.clone(),
                    });
                }
                for (index, entry) in value.as_array().into_iter().flatten().enumerate() {
                    let place = (index as u64).to_le_bytes();
                    let rank = (key_of(&[b"entry-sample", &seed, id, name, &r, &place]), [c, t, response, index]);
                    if self.entries.wants(&rank) {
                        let bytes = serde_json::to_string(entry).map_or(0, |text| text.len()) + tool.name.len() + 64;
                        let owner = owner_of(case);
                        self.entries.offer(rank, bytes, || Source {
                            owner,
                            tool: tool.name.clone(),
                            response,
                            index,
                            value: entry.clone(),
                        });
                    }
                }
            }
        }
    }

    fn finish(self) -> Pool {
        let mut candidates = self.candidates.finish();
        if let (NoiseSource::File { items, .. }, true) = (&self.spec.from, self.spec.items > 0) {
            for (index, item) in items.iter().enumerate() {
                let key = key_of(&[b"file", &(index as u64).to_le_bytes()]);
                candidates.push(Candidate { owner: None, index, item: item.clone(), key, text: lower_json(item) });
            }
        }
        let tools = self.spec.tools.as_ref().map(|_| ToolPool::new(self.entries.finish(), self.results.finish()));
        Pool { spec: self.spec, candidates, tools }
    }
}

/// The candidates of one spec.
struct Pool {
    spec: NoiseSpec,
    candidates: Vec<Candidate>,
    /// The recorded results of the sampled cases' tools, with `tools` noise.
    tools: Option<ToolPool>,
}

struct Candidate {
    /// The case it comes from (`None`: the noise file).
    owner: Option<Arc<Owner>>,
    index: usize,
    item: ContextItem,
    /// Its name as a number: what, with the case's key, gives its score.
    key: u64,
    /// Its JSON text, lower-cased, to look for expectation strings in.
    text: String,
}

impl Candidate {
    fn is_of_case(&self, c: usize) -> bool {
        self.owner.as_ref().is_some_and(|owner| owner.c == c)
    }
}

const DOMAIN: &str = "casebook noise v1";

/// The first 8 bytes of a BLAKE3 hash of `parts`, each length-prefixed.
fn key_of(parts: &[&[u8]]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(DOMAIN.as_bytes());
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let bytes = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// splitmix64's output function: a well-mixed u64 of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// splitmix64: the places of the noise items.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A number in `0..n` (n > 0); the bias of a modulo is far below what matters here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn lower_json(item: &ContextItem) -> String {
    serde_json::to_string(item).unwrap_or_default().to_lowercase()
}

/// Whether `owner` shares a `similar_by` value with `mine`.
fn similar(mine: &BTreeSet<String>, owner: &Owner) -> bool {
    !mine.is_disjoint(&owner.values)
}

impl Pool {
    fn widening(&self, c: usize, case: &Case) -> Widening {
        let wanted = self.spec.items as usize;
        let case_key = key_of(&[b"case-key", &self.spec.seed.to_le_bytes(), case.id.as_bytes()]);
        let needles = needles(case);
        let mine: BTreeSet<String> = match &self.spec.similar_by {
            Some(similar) => similar.path.values(case).iter().map(Value::to_string).collect(),
            None => BTreeSet::new(),
        };
        // (tier, score, candidate): similar cases' items first, then by score.
        let mut order: Vec<(u8, u64, usize)> = self
            .candidates
            .iter()
            .enumerate()
            .filter(|(_, cand)| !cand.is_of_case(c))
            .map(|(i, cand)| {
                let near = cand.owner.as_ref().is_some_and(|owner| similar(&mine, owner));
                (u8::from(!near), mix(case_key ^ cand.key), i)
            })
            .collect();
        // Only the best few are needed unless many of them carry the answer: sort a prefix first.
        let mut picked: Vec<usize> = Vec::with_capacity(wanted);
        let mut start = 0;
        let mut window = wanted.saturating_mul(4).saturating_add(16);
        while picked.len() < wanted && start < order.len() {
            let end = order.len().min(start.saturating_add(window));
            if end < order.len() {
                order[start..].select_nth_unstable(end - start - 1);
            }
            order[start..end].sort_unstable();
            for &(_, _, i) in &order[start..end] {
                if picked.len() == wanted {
                    break;
                }
                if !needles.iter().any(|n| self.candidates[i].text.contains(n.as_str())) {
                    picked.push(i);
                }
            }
            start = end;
            window = window.saturating_mul(4);
        }
        // Places: each item goes into the context as it stands so far.
        let own = case.task.context.as_ref().map_or(0, Vec::len);
        let mut rng = SplitMix(key_of(&[b"places", &self.spec.seed.to_le_bytes(), case.id.as_bytes()]));
        let mut added = Vec::with_capacity(picked.len());
        let mut items = Vec::with_capacity(picked.len());
        for (at, n) in places(own, picked.len(), &mut rng) {
            let cand = &self.candidates[picked[n]];
            let (from_case, from_file) = match (&self.spec.from, &cand.owner) {
                (NoiseSource::File { name, .. }, _) => (None, Some(name.clone())),
                (NoiseSource::Cases, owner) => (owner.as_ref().map(|o| o.id.clone()), None),
            };
            added.push(NoiseAdded { at, from_case, from_file, item: cand.index, tool: None });
            items.push(cand.item.clone());
        }
        let mut widening = Widening { added, items, answers: Vec::new() };
        if let (Some(pool), Some(tools)) = (&self.tools, &self.spec.tools) {
            pool.widen(self, c, case, tools, (&needles, &mine), &mut widening);
        }
        widening
    }
}

/// Where `count` new items go among `own` items: `(place, item)` by place, lowest first. Each
/// item goes into the list as it stands so far, at a place drawn from `rng`.
fn places(own: usize, count: usize, rng: &mut SplitMix) -> Vec<(usize, usize)> {
    let mut slots: Vec<Option<usize>> = vec![None; own];
    for n in 0..count {
        let at = rng.below(slots.len() + 1);
        slots.insert(at, Some(n));
    }
    slots.iter().enumerate().filter_map(|(at, slot)| slot.map(|n| (at, n))).collect()
}

/// The recorded results of `tool`'s responses, with the index of each response.
fn results(tool: &Tool) -> Vec<(usize, &Value)> {
    match &tool.responses {
        Some(Responses::Inline(list)) => {
            list.iter().enumerate().filter_map(|(r, response)| response.result.as_ref().map(|v| (r, v))).collect()
        }
        Some(Responses::File { content: Value::Array(list), .. }) => {
            list.iter().enumerate().filter_map(|(r, response)| response.get("result").map(|v| (r, v))).collect()
        }
        _ => Vec::new(),
    }
}

/// The recorded result of response `r` of `tool`, to change.
fn result_mut(tool: &mut Tool, r: usize) -> Option<&mut Value> {
    match &mut tool.responses {
        Some(Responses::Inline(list)) => list.get_mut(r)?.result.as_mut(),
        Some(Responses::File { content, .. }) => content.get_mut(r)?.get_mut("result"),
        _ => None,
    }
}

/// A recorded value of another case that noise may put into a tool's answers.
struct Source {
    owner: Arc<Owner>,
    tool: String,
    response: usize,
    /// Its index in its list result (0 for a whole result).
    index: usize,
    value: Value,
}

/// What `tools` noise draws from: the sampled entries of the cases' array results, and their
/// sampled whole results, each also by tool name.
struct ToolPool {
    entries: Vec<Source>,
    results: Vec<Source>,
    entries_by_tool: HashMap<String, Vec<usize>>,
    results_by_tool: HashMap<String, Vec<usize>>,
}

/// All of a pool at most this large (or 4 × the entries wanted) is shuffled and scanned; from a
/// larger one, at most that many draws are made per phase and list.
const SCANNED: usize = 64;

impl ToolPool {
    fn new(entries: Vec<Source>, results: Vec<Source>) -> Self {
        let by_tool = |sources: &[Source]| {
            let mut by: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, source) in sources.iter().enumerate() {
                by.entry(source.tool.clone()).or_default().push(i);
            }
            by
        };
        let (entries_by_tool, results_by_tool) = (by_tool(&entries), by_tool(&results));
        ToolPool { entries, results, entries_by_tool, results_by_tool }
    }

    /// Adds case `c`'s noise in its tools' answers to `widening` (`near`: the case's needles and
    /// its values at `similar_by`).
    fn widen(
        &self,
        within: &Pool,
        c: usize,
        case: &Case,
        spec: &ToolNoiseSpec,
        near: (&[String], &BTreeSet<String>),
        widening: &mut Widening,
    ) {
        let seed = within.spec.seed.to_le_bytes();
        let id = case.id.as_bytes();
        let similar_by = within.spec.similar_by.is_some();
        for tool in case.task.tools.iter().flatten() {
            let name = tool.name.as_str();
            for (response, value) in results(tool).into_iter().filter(|_| spec.entries > 0) {
                let Value::Array(list) = value else { continue };
                let mut rng = SplitMix(key_of(&[b"tool-entries", &seed, id, name.as_bytes(), &response.to_le_bytes()]));
                let draw = Draw { c, name, entries: true, wanted: spec.entries as usize, near, similar_by };
                let picked = self.draw(&draw, &mut rng);
                for (at, n) in places(list.len(), picked.len(), &mut rng) {
                    let source = &self.entries[picked[n]];
                    widening.added.push(added(source, name, Some(response), at));
                    widening.answers.push(source.value.clone());
                }
            }
            if tool.default.is_some() && spec.defaults > 0.0 {
                let mut rng = SplitMix(key_of(&[b"tool-default", &seed, id, name.as_bytes()]));
                // 53 random bits as a number in 0..1.
                let chance = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                if chance < spec.defaults {
                    let draw = Draw { c, name, entries: false, wanted: 1, near, similar_by };
                    if let Some(&picked) = self.draw(&draw, &mut rng).first() {
                        let source = &self.results[picked];
                        widening.added.push(added(source, name, None, 0));
                        widening.answers.push(source.value.clone());
                    }
                }
            }
        }
    }

    /// Up to `wanted` sources (indices into `entries`, or `results` when not `entries`) for
    /// case `c`'s tool `name`: of tools of the same name in similar cases, then of the same
    /// name, then of any tool; never of case `c`, never holding one of its needles.
    fn draw(&self, draw: &Draw<'_>, rng: &mut SplitMix) -> Vec<usize> {
        let Draw { c, name, entries, wanted, near: (needles, mine), similar_by } = *draw;
        let (sources, by_tool) =
            if entries { (&self.entries, &self.entries_by_tool) } else { (&self.results, &self.results_by_tool) };
        let same: &[usize] = by_tool.get(name).map_or(&[], Vec::as_slice);
        let mut picked: Vec<usize> = Vec::with_capacity(wanted);
        let budget = SCANNED.max(wanted.saturating_mul(4));
        // One pass over `len` candidates, the `k`th being `at(k)`.
        let mut phase = |len: usize, at: &dyn Fn(usize) -> usize, only_similar: bool, picked: &mut Vec<usize>| {
            let mut take = |i: usize| {
                let source = &sources[i];
                if picked.len() < wanted
                    && source.owner.c != c
                    && !picked.contains(&i)
                    && (!only_similar || similar(mine, &source.owner))
                {
                    let text = serde_json::to_string(&source.value).unwrap_or_default().to_lowercase();
                    if !needles.iter().any(|n| text.contains(n.as_str())) {
                        picked.push(i);
                    }
                }
            };
            if len <= budget {
                // Fisher–Yates, then every candidate in that order.
                let mut order: Vec<usize> = (0..len).collect();
                for k in (1..len).rev() {
                    order.swap(k, rng.below(k + 1));
                }
                order.into_iter().for_each(|k| take(at(k)));
            } else {
                (0..budget).for_each(|_| take(at(rng.below(len))));
            }
        };
        if similar_by {
            phase(same.len(), &|k| same[k], true, &mut picked);
        }
        if picked.len() < wanted {
            phase(same.len(), &|k| same[k], false, &mut picked);
        }
        if picked.len() < wanted {
            phase(sources.len(), &|k| k, false, &mut picked);
        }
        picked
    }
}

/// What [`ToolPool::draw`] draws for.
#[derive(Clone, Copy)]
struct Draw<'a> {
    c: usize,
    name: &'a str,
    entries: bool,
    wanted: usize,
    near: (&'a [String], &'a BTreeSet<String>),
    similar_by: bool,
}

/// The record of `source` put into the answers of tool `name`.
fn added(source: &Source, name: &str, response: Option<usize>, at: usize) -> NoiseAdded {
    NoiseAdded {
        at,
        from_case: Some(source.owner.id.clone()),
        from_file: None,
        item: if response.is_some() { source.index } else { 0 },
        tool: Some(ToolNoise {
            name: name.to_owned(),
            response,
            from_tool: source.tool.clone(),
            from_response: source.response,
        }),
    }
}

/// The expectation strings of `case`, lower-cased, as written and as JSON escapes them: no
/// noise item may hold one.
pub fn needles(case: &Case) -> Vec<String> {
    let e = &case.expected;
    let mut texts: Vec<String> = Vec::new();
    let mut leaves = |value: &Value| collect_leaves(value, &mut texts);
    if let Some(output) = &e.output {
        leaves(output);
    }
    for value in e.per_turn.iter().flatten().chain(e.acceptable.iter().flatten()) {
        leaves(value);
    }
    if let Some(vars) = &e.rubric_vars {
        for value in vars.values() {
            leaves(value);
        }
    }
    texts.extend(e.outcomes.iter().flatten().map(|o| o.text().to_owned()));
    texts.extend(e.rubric.iter().cloned());
    let mut needles = BTreeSet::new();
    for text in texts {
        let text = text.trim().to_lowercase();
        if text.is_empty() {
            continue;
        }
        let quoted = serde_json::to_string(&text).unwrap_or_default();
        let escaped = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')).unwrap_or(&quoted);
        if escaped != text {
            needles.insert(escaped.to_owned());
        }
        needles.insert(text);
    }
    needles.into_iter().collect()
}

/// The text of every string and number in `value`.
fn collect_leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| collect_leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_leaves(v, out)),
        Value::Null | Value::Bool(_) => {}
    }
}

/// Pairs each scenario with noise with the noise-free scenario it is measured against: the one
/// of the same target (`describe`) if there is one, else the first noise-free scenario. Empty
/// when no scenario has noise or none is free of it. Each entry is `(noisy, clean)`.
pub fn pairs(scenarios: &[(&str, &Value, bool)]) -> Vec<(String, String)> {
    let clean: Vec<&(&str, &Value, bool)> = scenarios.iter().filter(|s| !s.2).collect();
    let Some(first) = clean.first() else { return Vec::new() };
    scenarios
        .iter()
        .filter(|s| s.2)
        .map(|(name, target, _)| {
            let partner = clean.iter().find(|c| c.1 == *target).unwrap_or(first);
            ((*name).to_owned(), partner.0.to_owned())
        })
        .collect()
}

const KEYS: &[&str] = &["from", "items", "similar_by", "seed", "tools"];
const TOOL_KEYS: &[&str] = &["entries", "defaults"];
const ITEM_KEYS: &[&str] = &["type", "source", "content", "metadata"];

/// A `noise:` value: a mapping, or `null`/`false` for none. `file` is the experiment file (a
/// noise file is relative to it).
pub(crate) fn parse(r: &Reader<'_>, node: &Node) -> Result<Option<NoiseSpec>, ExperimentError> {
    let entries = match &node.value {
        NodeValue::Null | NodeValue::Bool(false) => return Ok(None),
        NodeValue::Object(entries) => entries,
        other => {
            return Err(r.hinted(
                node.offset,
                format!("`noise` must be a mapping, not {}", other.kind()),
                "`noise: {from: cases, items: 3, seed: 1}`, or `noise: false` for none",
            ));
        }
    };
    if let Some(extra) = entries.iter().find(|e| !KEYS.contains(&e.key.as_ref())) {
        return Err(r.hinted(
            extra.key_offset,
            format!("unknown key `{}` in `noise`", extra.key),
            match casebook_model::did_you_mean(&extra.key, KEYS) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!("the keys of `noise`: {}", KEYS.join(", ")),
            },
        ));
    }
    let tools = node.get("tools").map(|tools| tool_noise(r, tools)).transpose()?;
    let items = match node.get("items") {
        Some(items) => r.count(items, "items", 1.0)? as u32,
        None if tools.is_some() => 0,
        None => {
            return Err(r.hinted(
                node.offset,
                "`noise` says no number of `items`",
                "add `items: N`, the items added to each case's context, or `tools: {entries: N}` for noise in \
                 its tools' answers",
            ));
        }
    };
    let seed = match node.get("seed") {
        None => 0,
        Some(seed) => match &seed.value {
            NodeValue::Number(text) => {
                text.parse::<i64>().map_err(|_| r.error(seed.offset, "`seed` must be a whole number (64-bit)"))?
            }
            other => return Err(r.error(seed.offset, format!("`seed` must be a whole number, not {}", other.kind()))),
        },
    };
    let from = match node.get("from") {
        None => NoiseSource::Cases,
        Some(from) => {
            let text = r.string(from, "from")?;
            if text == "cases" {
                NoiseSource::Cases
            } else {
                let base = Path::new(r.file).parent().unwrap_or(Path::new(""));
                let items = load_file(&base.join(&text)).map_err(|e| match e {
                    FileError::Read(message) => r.hinted(
                        from.offset,
                        format!("cannot read the noise file `{text}`: {message}"),
                        "`from` is `cases`, or a file of context items relative to the experiment",
                    ),
                    FileError::Located(e) => e,
                })?;
                NoiseSource::File { name: text, items }
            }
        }
    };
    let similar_by = match node.get("similar_by") {
        None => None,
        Some(similar) => {
            let text = r.string(similar, "similar_by")?;
            let path = FieldPath::parse(&text).map_err(|e| {
                r.hinted(
                    similar.offset,
                    format!("`similar_by` is not a field path: {}", e.message),
                    "a path as in filters: `label.service`, `metadata.team`",
                )
            })?;
            if let NoiseSource::File { .. } = from {
                return Err(r.hinted(
                    similar.offset,
                    "`similar_by` needs `from: cases`",
                    "the items of a noise file belong to no case to compare with",
                ));
            }
            Some(SimilarBy { text, path })
        }
    };
    if let (Some(tools), NoiseSource::File { .. }) = (entries.iter().find(|e| e.key == "tools"), &from) {
        return Err(r.hinted(
            tools.key_offset,
            "`tools` needs `from: cases`",
            "noise in tools' answers is drawn from the other cases' recorded answers; a noise file holds context items",
        ));
    }
    Ok(Some(NoiseSpec { from, items, similar_by, seed, tools }))
}

/// `tools: {entries: N, defaults: R}`.
fn tool_noise(r: &Reader<'_>, node: &Node) -> Result<ToolNoiseSpec, ExperimentError> {
    let NodeValue::Object(entries) = &node.value else {
        return Err(r.hinted(
            node.offset,
            format!("`tools` must be a mapping, not {}", node.value.kind()),
            "`tools: {entries: 2, defaults: 0.5}`",
        ));
    };
    if let Some(extra) = entries.iter().find(|e| !TOOL_KEYS.contains(&e.key.as_ref())) {
        return Err(r.hinted(
            extra.key_offset,
            format!("unknown key `{}` in `noise.tools`", extra.key),
            match casebook_model::did_you_mean(&extra.key, TOOL_KEYS) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!("the keys of `noise.tools`: {}", TOOL_KEYS.join(", ")),
            },
        ));
    }
    let count = node.get("entries").map(|n| r.count(n, "entries", 1.0)).transpose()?;
    let defaults = match node.get("defaults") {
        None => None,
        Some(n) => match r.number(n, "defaults")? {
            rate if (0.0..=1.0).contains(&rate) && rate > 0.0 => Some(rate),
            rate => return Err(r.error(n.offset, format!("`defaults` must be more than 0 and at most 1, not {rate}"))),
        },
    };
    if count.is_none() && defaults.is_none() {
        return Err(r.hinted(
            node.offset,
            "`noise.tools` says neither `entries` nor `defaults`",
            "`entries: N` adds N entries to each list-shaped recorded answer; `defaults: R` replaces a tool's \
             default answer by another case's signal with probability R",
        ));
    }
    Ok(ToolNoiseSpec { entries: count.map_or(0, |n| n as u32), defaults: defaults.unwrap_or(0.0) })
}

enum FileError {
    /// The file cannot be read at all: said at the `from` key.
    Read(String),
    /// A problem inside the file, at its place there.
    Located(ExperimentError),
}

/// The context items of a noise file: a YAML or JSON list, or JSON lines (`.jsonl`).
fn load_file(path: &Path) -> Result<Vec<ContextItem>, FileError> {
    let text = fs_err::read_to_string(path).map_err(|e| FileError::Read(e.to_string()))?;
    let display = path.display().to_string();
    let r = Reader { file: &display, text: &text };
    let located = FileError::Located;
    let mut items = Vec::new();
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("jsonl")) {
        let mut start = 0;
        for line in text.split_inclusive('\n') {
            let offset = start;
            start += line.len();
            if line.trim().is_empty() {
                continue;
            }
            let node =
                casebook_formats::yaml::parse(line).map_err(|e| located(r.error(offset + e.offset, e.message)))?;
            items.push(item(&r, &node, offset).map_err(located)?);
        }
    } else {
        let root = casebook_formats::yaml::parse(&text).map_err(|e| located(r.error(e.offset, e.message)))?;
        let NodeValue::Array(list) = &root.value else {
            return Err(located(r.hinted(
                root.offset,
                format!("a noise file is a list of context items, not {}", root.value.kind()),
                "each item is `{type, source, content, metadata}`",
            )));
        };
        for node in list {
            items.push(item(&r, node, 0).map_err(located)?);
        }
    }
    Ok(items)
}

/// One item of a noise file; `base` is where the node's text starts in the file (a JSON line).
fn item(r: &Reader<'_>, node: &Node, base: usize) -> Result<ContextItem, ExperimentError> {
    let NodeValue::Object(entries) = &node.value else {
        return Err(r.hinted(
            base + node.offset,
            format!("a context item is a mapping, not {}", node.value.kind()),
            "`{type, source, content, metadata}`",
        ));
    };
    if let Some(extra) = entries.iter().find(|e| !ITEM_KEYS.contains(&e.key.as_ref())) {
        return Err(r.hinted(
            base + extra.key_offset,
            format!("unknown key `{}` in a context item", extra.key),
            match casebook_model::did_you_mean(&extra.key, ITEM_KEYS) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!("the keys of a context item: {}", ITEM_KEYS.join(", ")),
            },
        ));
    }
    if node.get("content").is_none() {
        return Err(r.error(base + node.offset, "a context item needs `content`"));
    }
    for key in ["type", "source"] {
        if let Some(value) = node.get(key).filter(|v| !matches!(v.value, NodeValue::String(_))) {
            return Err(r.error(base + value.offset, format!("`{key}` must be text, not {}", value.value.kind())));
        }
    }
    if let Some(value) = node.get("metadata").filter(|v| !matches!(v.value, NodeValue::Object(_))) {
        return Err(r.error(base + value.offset, format!("`metadata` must be a mapping, not {}", value.value.kind())));
    }
    let value = node
        .to_value(&Ptr::ROOT)
        .map_err(|_| r.error(base + node.offset, "the item holds a number JSON cannot represent"))?;
    serde_json::from_value(value).map_err(|e| r.error(base + node.offset, format!("not a context item: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn case(value: Value) -> Case {
        serde_json::from_value(value).unwrap()
    }

    fn spec(items: u32, seed: i64, similar_by: Option<&str>) -> NoiseSpec {
        NoiseSpec {
            from: NoiseSource::Cases,
            items,
            similar_by: similar_by.map(|t| SimilarBy { text: t.into(), path: FieldPath::parse(t).unwrap() }),
            seed,
            tools: None,
        }
    }

    fn tool_spec(entries: u32, defaults: f64, seed: i64) -> NoiseSpec {
        NoiseSpec { tools: Some(ToolNoiseSpec { entries, defaults }), ..spec(0, seed, None) }
    }

    /// Eight incident cases: `journaux` answers the case's service with a list of lines,
    /// `métriques` with an object, and has a default; each expects its own answer.
    fn incidents() -> Vec<Case> {
        incidents_of(8)
    }

    fn incidents_of(n: usize) -> Vec<Case> {
        (0..n)
            .map(|i| {
                case(json!({
                    "id": format!("inc-{i}"),
                    "input": format!("Pourquoi le service {i} est-il lent ?"),
                    "tools": [
                        {"name": "journaux", "responses": [
                            {"when": {"includes": {"service": format!("svc-{i}")}},
                             "result": [format!("ligne {i}.0 délai"), format!("ligne {i}.1 東京")]}
                        ]},
                        {"name": "métriques", "responses": [{"when": {"includes": {"m": "pool"}}, "result": {"pool": i}}],
                         "default": {"result": []}}
                    ],
                    "expected": {"output": format!("cause secrète {i}"), "outcomes": [format!("should find cause {i}")]}
                }))
            })
            .collect()
    }

    /// What the environment of `task` serves for `calls`.
    fn served(task: &Task, calls: &[(&str, Value)]) -> Vec<(String, Value)> {
        let environment = crate::environment::Environment::of(task.tools.as_deref()).unwrap().unwrap();
        calls
            .iter()
            .map(|(name, arguments)| {
                let answer = environment.serve(name, arguments);
                (format!("{:?}", answer.served), answer.content)
            })
            .collect()
    }

    #[test]
    fn tool_noise_is_served_and_the_same_seed_gives_the_same_answers() {
        let cases = incidents();
        let calls = [("journaux", json!({"service": "svc-3"})), ("métriques", json!({"m": "cpu"}))];
        let answers = |seed: i64| {
            let w = widening(&cases, tool_spec(2, 1.0, seed), 3);
            (served(&w.widened(&cases[3].task), &calls), w.added.clone())
        };
        let (one, added) = answers(7);
        assert_eq!(answers(7), (one.clone(), added.clone()), "the same seed, the same answers");
        // The list answer keeps the case's own lines in order, with two entries of others.
        let Value::Array(lines) = &one[0].1 else { panic!("{one:?}") };
        assert_eq!(lines.len(), 4);
        let own: Vec<&Value> = lines.iter().filter(|l| l.as_str().unwrap().starts_with("ligne 3.")).collect();
        assert_eq!(own, [&json!("ligne 3.0 délai"), &json!("ligne 3.1 東京")]);
        // The call no response matches gets another case's recorded result instead of `[]`.
        assert_eq!(one[1].0, "Default");
        assert!(one[1].1.get("pool").is_some_and(|p| p != &json!(3)), "{one:?}");
        // Each entry is recorded at its place, with where it came from.
        assert_eq!(added.len(), 3);
        for a in &added {
            let noise = a.tool.as_ref().unwrap();
            let from = cases.iter().find(|c| Some(&c.id) == a.from_case.as_ref()).unwrap();
            assert_ne!(from.id, "inc-3");
            let source = from.task.tools.as_ref().unwrap().iter().find(|t| t.name == noise.from_tool).unwrap();
            let recorded = results(source)[noise.from_response].1;
            match noise.response {
                Some(r) => {
                    assert_eq!((noise.name.as_str(), r), ("journaux", 0));
                    assert_eq!(lines[a.at], recorded[a.item], "{a:?}");
                }
                None => assert_eq!((noise.name.as_str(), &one[1].1), ("métriques", recorded)),
            }
        }
        // Other seeds draw otherwise.
        let others: BTreeSet<String> = (1..6).map(|seed| format!("{:?}", answers(seed * 1000).0)).collect();
        assert!(others.len() > 1, "{others:?}");
        // Without `defaults`, the default stays; without `entries`, the lists do.
        let w = widening(&cases, tool_spec(2, 0.0, 7), 3);
        assert_eq!(served(&w.widened(&cases[3].task), &calls)[1].1, json!([]));
        let w = widening(&cases, tool_spec(0, 1.0, 7), 3);
        assert_eq!(served(&w.widened(&cases[3].task), &calls)[0].1.as_array().unwrap().len(), 2);
    }

    #[test]
    fn tool_noise_from_a_large_pool_is_drawn_reproducibly() {
        // 300 cases: 600 candidate lines, more than are scanned whole.
        let cases = incidents_of(300);
        let added = |seed: i64, c: usize| widening(&cases, tool_spec(20, 0.0, seed), c).added.clone();
        let one = added(1, 17);
        assert_eq!(one.len(), 20);
        assert_eq!(one, added(1, 17));
        assert_ne!(one, added(2, 17));
        assert_ne!(one, added(1, 18));
        let sources: BTreeSet<(Option<String>, usize)> = one.iter().map(|a| (a.from_case.clone(), a.item)).collect();
        assert_eq!(sources.len(), 20, "no entry twice");
        assert!(one.iter().all(|a| a.from_case.as_deref() != Some("inc-17")));
    }

    #[test]
    fn tool_noise_never_comes_from_the_case_nor_carries_an_expectation() {
        let mut cases = incidents();
        // Case 1's lines hold case 0's expected answer: none may reach case 0.
        cases[1].task.tools.as_mut().unwrap()[0].responses = Some(
            serde_json::from_value(json!([{"result": ["la CAUSE SECRÈTE 0 est là", "cause secrète 0"]}])).unwrap(),
        );
        for seed in 0..30 {
            for c in 0..cases.len() {
                let w = widening(&cases, tool_spec(3, 1.0, seed), c);
                let task = w.widened(&cases[c].task);
                let text = serde_json::to_string(&task).unwrap().to_lowercase();
                // No case's expectations are anywhere in what its agent can be served.
                assert!(!text.contains(&format!("cause secrète {c}")), "{seed} {c}: {text}");
                assert!(!text.contains("should find"), "{text}");
                for a in &w.added {
                    assert_ne!(a.from_case.as_deref(), Some(cases[c].id.as_str()));
                }
            }
        }
    }

    #[test]
    fn tool_noise_is_part_of_the_run_hash() {
        let cases = incidents();
        let scenarios = [crate::engine::PlannedScenario {
            name: "noisy".into(),
            describe: json!("builtin:echo"),
            target: "builtin:echo".parse::<crate::target::TargetSpec>().unwrap().connect().unwrap(),
            max_steps: crate::environment::DEFAULT_MAX_STEPS,
        }];
        let keys = crate::engine::RunKeys::new(&scenarios, &[], 1).unwrap();
        let hash = |spec: Option<NoiseSpec>| keys.widened_hashes(&cases[2], &plan(&cases, &[spec])[2]).unwrap();
        let plain = keys.hashes(&cases[2]).unwrap();
        assert_eq!(hash(None), plain);
        let one = hash(Some(tool_spec(1, 0.0, 4)));
        assert_ne!(one, plain);
        assert_eq!(one, hash(Some(tool_spec(1, 0.0, 4))));
        assert_ne!(one, hash(Some(tool_spec(2, 0.0, 4))));
        assert_ne!(one, hash(Some(tool_spec(1, 0.0, 5))));
        assert_ne!(one, hash(Some(tool_spec(1, 1.0, 4))));
    }

    #[test]
    fn tool_noise_is_read_and_its_mistakes_located() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("exp.yaml");
        fs_err::write(dir.path().join("noise.yaml"), "- {content: a}\n").unwrap();
        let parse = |noise: &str| {
            crate::experiment::Experiment::parse(&file, &format!("dataset: d.jsonl\ntarget: x\nnoise: {noise}\n"))
        };
        let e = parse("{tools: {entries: 2, defaults: 0.25}, seed: 9}").unwrap();
        let noise = e.noise.unwrap();
        assert_eq!((noise.items, noise.seed), (0, 9));
        assert_eq!(noise.tools, Some(ToolNoiseSpec { entries: 2, defaults: 0.25 }));
        let e = parse("{items: 1, tools: {defaults: 1}}").unwrap().noise.unwrap();
        assert_eq!((e.items, e.tools), (1, Some(ToolNoiseSpec { entries: 0, defaults: 1.0 })));
        let at = |noise: &str| {
            let e = parse(noise).unwrap_err();
            (e.at.column, e.message, e.hint)
        };
        let (column, message, hint) = at("{tools: {entrys: 2}}");
        assert_eq!(
            (column, message.as_str(), hint.as_deref()),
            (17, "unknown key `entrys` in `noise.tools`", Some("did you mean `entries`?"))
        );
        let (column, message, _) = at("{tools: {defaults: 1.5}}");
        assert_eq!((column, message.as_str()), (27, "`defaults` must be more than 0 and at most 1, not 1.5"));
        let (column, message, _) = at("{tools: {entries: 0}}");
        assert_eq!((column, message.as_str()), (26, "`entries` must be a whole number of at least 1"));
        let (column, message, _) = at("{tools: {}}");
        assert_eq!((column, message.as_str()), (16, "`noise.tools` says neither `entries` nor `defaults`"));
        let (column, message, _) = at("{tools: 3}");
        assert_eq!((column, message.as_str()), (16, "`tools` must be a mapping, not an integer"));
        let (column, message, _) = at("{from: noise.yaml, tools: {entries: 1}}");
        assert_eq!((column, message.as_str()), (27, "`tools` needs `from: cases`"));
    }

    /// Twelve cases, three context items each; services alternate between `db` and `web`.
    fn cases() -> Vec<Case> {
        (0..12)
            .map(|i| {
                let service = if i % 2 == 0 { "db" } else { "web" };
                case(json!({
                    "id": format!("c{i}"),
                    "input": format!("question {i}"),
                    "labels": [format!("service:{service}")],
                    "context": (0..3).map(|j| json!({"type": "log", "content": format!("log {i}.{j}")})).collect::<Vec<_>>(),
                    "expected": {"output": format!("answer {i}")}
                }))
            })
            .collect()
    }

    fn widening(cases: &[Case], spec: NoiseSpec, c: usize) -> Arc<Widening> {
        plan(cases, &[Some(spec)])[c][0].clone().unwrap()
    }

    #[test]
    fn the_same_seed_gives_the_same_items_in_the_same_places_and_another_seed_others() {
        let cases = cases();
        let a = widening(&cases, spec(4, 7, None), 3);
        assert_eq!(a, widening(&cases, spec(4, 7, None), 3));
        assert_eq!(a.added.len(), 4);
        let task = a.widened(&cases[3].task);
        let context = task.context.unwrap();
        assert_eq!(context.len(), 7);
        // Every recorded item is at its place, and the case's own items keep their order.
        for added in &a.added {
            let from = cases.iter().find(|c| Some(&c.id) == added.from_case.as_ref()).unwrap();
            assert_eq!(context[added.at], from.task.context.as_ref().unwrap()[added.item]);
        }
        let own: Vec<&ContextItem> =
            context.iter().enumerate().filter(|(i, _)| a.added.iter().all(|x| x.at != *i)).map(|(_, c)| c).collect();
        assert_eq!(own, cases[3].task.context.as_ref().unwrap().iter().collect::<Vec<_>>());
        // Other seeds pick otherwise (over a few seeds, the picks are not all the same).
        let others: BTreeSet<Vec<NoiseAdded>> =
            (1..6).map(|seed| widening(&cases, spec(4, seed * 1000, None), 3).added.clone()).collect();
        assert!(others.len() > 1 && !others.contains(&a.added), "{others:?}");
    }

    #[test]
    fn adding_an_unrelated_case_keeps_picks_unless_its_items_score_lower() {
        let cases = cases();
        let before = widening(&cases, spec(2, 5, None), 0);
        let mut more = cases.clone();
        more.push(case(json!({"id": "z", "input": "q", "context": [{"content": "zzz"}]})));
        let after = widening(&more, spec(2, 5, None), 0);
        // Either unchanged, or a pick of the new case came in.
        assert!(
            after == before || after.added.iter().any(|a| a.from_case.as_deref() == Some("z")),
            "{before:?} {after:?}"
        );
    }

    #[test]
    fn never_from_the_case_itself_nor_carrying_its_answer() {
        let mut cases = cases();
        // Case 1's items all hold case 0's answer (in another case): none may widen case 0.
        cases[1].task.context = Some(vec![
            serde_json::from_value(json!({"content": "the ANSWER 0 is here"})).unwrap(),
            serde_json::from_value(json!({"content": {"nested": "Answer 0"}})).unwrap(),
        ]);
        for seed in 0..20 {
            let w = widening(&cases, spec(20, seed, None), 0);
            assert_eq!(w.added.len(), 20, "every other item but case 1's: 10 × 3 = 30 ≥ 20");
            for added in &w.added {
                assert_ne!(added.from_case.as_deref(), Some("c0"));
                assert_ne!(added.from_case.as_deref(), Some("c1"));
            }
        }
        // When the pool is smaller than asked, all of it (less its own items) is taken.
        let w = widening(&cases, spec(100, 1, None), 0);
        assert_eq!(w.added.len(), 30);
    }

    #[test]
    fn similar_cases_come_first() {
        let cases = cases();
        for seed in 0..10 {
            let w = widening(&cases, spec(6, seed, Some("label.service")), 4);
            // Case 4 is `db`: the six items come from the five other `db` cases (15 items).
            for added in &w.added {
                let from: usize = added.from_case.as_ref().unwrap()[1..].parse().unwrap();
                assert_eq!(from % 2, 0, "{added:?}");
                assert_ne!(from, 4);
            }
            // More than the similar ones hold: the rest come from the others.
            let w = widening(&cases, spec(20, seed, Some("label.service")), 4);
            let similar =
                w.added.iter().filter(|a| a.from_case.as_ref().unwrap()[1..].parse::<usize>().unwrap() % 2 == 0);
            assert_eq!(similar.count(), 15);
        }
    }

    #[test]
    fn needles_cover_every_expectation_text() {
        let c = case(json!({"id": "a", "input": "x", "expected": {
            "output": {"k": "Out \"q\""}, "per_turn": ["T1", 42], "acceptable": ["Acc"],
            "outcomes": ["should X", {"outcome": "should Y", "role": "gate"}], "rubric": "R", "rubric_vars": {"v": "V"}
        }}));
        let n = needles(&c);
        for want in ["out \"q\"", "out \\\"q\\\"", "t1", "42", "acc", "should x", "should y", "r", "v"] {
            assert!(n.contains(&want.to_owned()), "{want}: {n:?}");
        }
        assert!(!n.contains(&"gate".to_owned()) && !n.contains(&"k".to_owned()));
    }

    #[test]
    fn scenarios_pair_with_the_clean_one_of_their_target() {
        let (a, b) = (json!("builtin:echo"), json!("http://x"));
        let scenarios =
            [("clean-a", &a, false), ("clean-b", &b, false), ("noisy-b", &b, true), ("noisy-c", &json!(1), true)];
        assert_eq!(
            pairs(&scenarios),
            vec![("noisy-b".to_owned(), "clean-b".to_owned()), ("noisy-c".to_owned(), "clean-a".to_owned())]
        );
        assert!(pairs(&[("n", &a, true)]).is_empty());
    }
}
