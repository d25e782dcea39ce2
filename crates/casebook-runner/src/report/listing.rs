//! The results a run's per-result reports list, kept in bounded memory while the run goes.
//!
//! JUnit and HTML list every result, Markdown the first [`FAILING_CASES_SHOWN`] failing ones, all
//! in report order (scenario, case id, run: see [`ordered`](super::ordered)), while a run
//! finishes its jobs in another order. A [`Listing`] takes the results as they finish: it keeps
//! the failing ones Markdown shows (the first in report order, and how many there are) and,
//! when every result is to be listed, writes them to temporary files in sorted runs of at most
//! [`RUN_BYTES`], which [`Listing::results`] merges back in report order. Memory holds one
//! run's worth of results, whatever the number of runs.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, BufRead, BufReader, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use super::markdown::FAILING_CASES_SHOWN;
use crate::record::RunResult;
use crate::summary::Verdict;

/// Bytes of results (as JSON) sorted in memory before they are written out as one run.
pub const RUN_BYTES: usize = 16 << 20;

/// A result's place in report order: its scenario's place in the summary, the scenario, the
/// case id, the run, then the order it was run in (so equal places keep it, as a stable sort).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    scenario_at: usize,
    scenario: String,
    case_id: String,
    run: u32,
    seq: u64,
}

/// `result`'s place, run `seq`-th, among results of `scenarios` (the summary's order).
fn place(scenarios: &[String], seq: u64, result: &RunResult) -> Place {
    let scenario_at = scenarios.iter().position(|s| *s == result.scenario).unwrap_or(usize::MAX);
    Place { scenario_at, scenario: result.scenario.clone(), case_id: result.case_id.clone(), run: result.run, seq }
}

/// A result with its place (ordered by the place alone).
struct Placed {
    place: Place,
    result: RunResult,
}

impl PartialEq for Placed {
    fn eq(&self, other: &Self) -> bool {
        self.place == other.place
    }
}
impl Eq for Placed {}
impl PartialOrd for Placed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Placed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.place.cmp(&other.place)
    }
}

/// The results of a run as its per-result reports need them (see the module's comment).
pub struct Listing {
    /// The summary's scenario order: the experiment's scenarios (a result of another scenario
    /// comes after them, by name, as in the summary).
    scenarios: Vec<String>,
    /// Where the sorted runs are written (temporary files, gone when closed); `None` when only
    /// the failing cases are kept.
    dir: Option<PathBuf>,
    /// Results not yet written, as `(place, JSON)`, and their size.
    pending: Vec<(Place, String)>,
    pending_bytes: usize,
    runs: Vec<fs_err::File>,
    count: usize,
    /// Each scenario's time (the results' `millis`), which JUnit states before its results.
    millis: HashMap<String, u64>,
    /// The first failing results in report order, and how many failed.
    failing: First,
    /// The first results with tool calls in report order, and how many had some.
    calling: First,
}

/// The first [`FAILING_CASES_SHOWN`] results of a kind in report order (largest place on top),
/// and how many there were.
#[derive(Default)]
struct First {
    heap: BinaryHeap<Placed>,
    count: usize,
}

impl First {
    fn offer(&mut self, place: Place, result: impl FnOnce() -> RunResult) {
        self.count += 1;
        if self.heap.len() < FAILING_CASES_SHOWN {
            self.heap.push(Placed { place, result: result() });
        } else if self.heap.peek().is_some_and(|last| place < last.place) {
            self.heap.pop();
            self.heap.push(Placed { place, result: result() });
        }
    }

    fn shown(&self) -> (usize, Vec<&RunResult>) {
        let mut shown: Vec<&Placed> = self.heap.iter().collect();
        shown.sort();
        (self.count, shown.into_iter().map(|p| &p.result).collect())
    }
}

impl Listing {
    /// A listing of the results of a run of `scenarios` (in the experiment's order). With
    /// `every` in `Some(dir)`, every result is kept, in temporary files in `dir`; otherwise only
    /// what Markdown shows.
    pub fn new(scenarios: &[String], every: Option<&Path>) -> Self {
        Self {
            scenarios: scenarios.to_vec(),
            dir: every.map(Path::to_path_buf),
            pending: Vec::new(),
            pending_bytes: 0,
            runs: Vec::new(),
            count: 0,
            millis: HashMap::new(),
            failing: First::default(),
            calling: First::default(),
        }
    }

    /// Takes the result run `seq`-th (its place among the experiment's jobs).
    pub fn add(&mut self, seq: u64, result: RunResult) -> io::Result<()> {
        self.count += 1;
        let output_millis = result.output.as_ref().map_or(0, |o| o.millis);
        match self.millis.get_mut(&result.scenario) {
            Some(millis) => *millis += output_millis,
            None => {
                self.millis.insert(result.scenario.clone(), output_millis);
            }
        }
        if self.dir.is_some() {
            let json = serde_json::to_string(&result)?;
            self.pending_bytes += json.len();
            self.pending.push((place(&self.scenarios, seq, &result), json));
            if self.pending_bytes >= RUN_BYTES {
                self.write_run()?;
            }
        }
        let fails = Verdict::of(&result) == Verdict::Fail;
        let calls = super::has_tool_calls(&result);
        if fails || calls {
            let at = place(&self.scenarios, seq, &result);
            if calls {
                self.calling.offer(at.clone(), || result.clone());
            }
            if fails {
                self.failing.offer(at, || result);
            }
        }
        Ok(())
    }

    /// Writes the pending results, sorted, as one run: `seq`, a tab, the result's JSON (which
    /// holds no raw tab or line break) per line.
    fn write_run(&mut self) -> io::Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        self.pending.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let file = tempfile::tempfile_in(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot make a temporary file in `{}`: {e}", dir.display()))
        })?;
        let mut file = fs_err::File::from_parts(file, dir.join("(temporary file)"));
        let mut out = BufWriter::new(&mut file);
        for (place, json) in self.pending.drain(..) {
            writeln!(out, "{}\t{json}", place.seq)?;
        }
        out.flush()?;
        drop(out);
        file.rewind()?;
        self.runs.push(file);
        self.pending_bytes = 0;
        Ok(())
    }

    /// How many results were listed.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The time of `scenario`'s results, in milliseconds.
    pub fn millis(&self, scenario: &str) -> u64 {
        self.millis.get(scenario).copied().unwrap_or(0)
    }

    /// How many results failed, and the first [`FAILING_CASES_SHOWN`] of them in report order.
    pub fn failing(&self) -> (usize, Vec<&RunResult>) {
        self.failing.shown()
    }

    /// How many results had tool calls, and the first [`FAILING_CASES_SHOWN`] of them in report
    /// order (Markdown's "Tool calls").
    pub fn calling(&self) -> (usize, Vec<&RunResult>) {
        self.calling.shown()
    }

    /// Every result in report order (none unless the listing keeps every result), read back
    /// from the sorted runs; each call reads them again from the start. A result that cannot be
    /// read back ends the list; [`Merged::error`] says why.
    pub fn results(&mut self) -> io::Result<Merged> {
        if !self.pending.is_empty() {
            self.write_run()?;
        }
        let mut merged =
            Merged { readers: Vec::new(), heads: BinaryHeap::new(), scenarios: self.scenarios.clone(), error: None };
        for file in &mut self.runs {
            file.rewind()?;
            merged.readers.push(BufReader::new(file.try_clone()?));
            merged.advance(merged.readers.len() - 1);
        }
        Ok(merged)
    }
}

/// The sorted runs of a [`Listing`] merged: its results in report order.
pub struct Merged {
    readers: Vec<BufReader<fs_err::File>>,
    /// The next result of each run, smallest place on top.
    heads: BinaryHeap<std::cmp::Reverse<(Placed, usize)>>,
    scenarios: Vec<String>,
    error: Option<io::Error>,
}

impl Merged {
    /// Reads run `at`'s next result into the heads.
    fn advance(&mut self, at: usize) {
        let mut line = String::new();
        match self.readers[at].read_line(&mut line) {
            Ok(0) => {}
            Ok(_) => {
                let read = line.trim_end().split_once('\t').and_then(|(seq, json)| {
                    Some((seq.parse::<u64>().ok()?, serde_json::from_str::<RunResult>(json).ok()?))
                });
                match read {
                    Some((seq, result)) => {
                        let place = place(&self.scenarios, seq, &result);
                        self.heads.push(std::cmp::Reverse((Placed { place, result }, at)));
                    }
                    None => {
                        self.error.get_or_insert_with(|| io::Error::other("a listed result cannot be read back"));
                    }
                }
            }
            Err(err) => {
                self.error.get_or_insert(err);
            }
        }
    }

    /// Why the list ended early, if it did.
    pub fn error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
}

impl Iterator for Merged {
    type Item = RunResult;

    fn next(&mut self) -> Option<RunResult> {
        if self.error.is_some() {
            return None;
        }
        let std::cmp::Reverse((placed, at)) = self.heads.pop()?;
        self.advance(at);
        Some(placed.result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{html, junit, markdown};
    use crate::summary::Summary;
    use crate::summary::tests::{erroring, failing, meta, passing};

    #[test]
    fn reports_from_a_listing_are_the_reports_from_the_list() {
        // 130 cases (ids with non-ASCII, run out of id order), two scenarios, two runs: passes,
        // 70-odd failures (more than Markdown shows), errors; finishing out of order.
        let mut results = Vec::new();
        for case in (0..130).rev() {
            let id = format!("ça-{:03}", (case * 37) % 130);
            for scenario in ["tools", "base"] {
                for run in 0..2 {
                    let mut r = match (case + run) % 5 {
                        0 | 1 => passing(&id, scenario, run),
                        4 => erroring(&id, scenario, run, "timeout", "no reply"),
                        _ => failing(&id, scenario, run),
                    };
                    if let Ok(output) = &mut r.output {
                        output.millis = u64::from(case * 3 + run);
                    }
                    results.push(r);
                }
            }
        }
        let mut arrived: Vec<(u64, RunResult)> = (0..).zip(results.iter().cloned()).collect();
        for window in arrived.chunks_mut(8) {
            window.reverse();
        }
        let scenarios = ["tools".to_owned(), "base".to_owned()];
        let summary = Summary::of(&results, 0.5, meta(&["tools", "base"], 2));
        let dir = tempfile::tempdir().unwrap();
        let mut listing = Listing::new(&scenarios, Some(dir.path()));
        // Small runs, so that the merge has many to merge.
        for (seq, result) in arrived {
            listing.add(seq, result).unwrap();
            if listing.pending.len() == 50 {
                listing.write_run().unwrap();
            }
        }
        assert!(listing.runs.len() > 5);
        assert_eq!(listing.count(), results.len());

        let (failed, shown) = listing.failing();
        let (with_calls, calling) = listing.calling();
        let mut md = Vec::new();
        markdown::write_listed(&summary, (failed, &shown), (with_calls, &calling), &mut md).unwrap();
        assert_eq!(String::from_utf8(md).unwrap(), markdown::render(&summary, &results));
        assert!(markdown::render(&summary, &results).contains("…and "));

        let mut page = Vec::new();
        html::write_listed(&summary, listing.count(), listing.results().unwrap(), &mut page).unwrap();
        assert_eq!(String::from_utf8(page).unwrap(), html::render(&summary, &results));

        // Read again from the start for the next report.
        let mut xml = Vec::new();
        let mut merged = listing.results().unwrap();
        junit::write_listed(&summary, &|s| listing.millis(s), &mut merged, &mut xml).unwrap();
        assert!(merged.error().is_none());
        assert_eq!(String::from_utf8(xml).unwrap(), junit::render(&summary, &results));
    }

    #[test]
    fn a_listing_without_a_folder_keeps_only_what_markdown_shows() {
        let results: Vec<RunResult> = (0..200).map(|i| failing(&format!("c{i:03}"), "base", 0)).collect();
        let mut listing = Listing::new(&["base".to_owned()], None);
        for (seq, result) in (0..).zip(results.iter().rev().cloned()) {
            listing.add(seq, result).unwrap();
        }
        assert!(listing.pending.is_empty() && listing.runs.is_empty());
        assert_eq!(listing.failing.heap.len(), FAILING_CASES_SHOWN);
        let (failed, shown) = listing.failing();
        assert_eq!((failed, shown[0].case_id.as_str(), shown[49].case_id.as_str()), (200, "c000", "c049"));
        assert_eq!(listing.results().unwrap().count(), 0);
    }
}
