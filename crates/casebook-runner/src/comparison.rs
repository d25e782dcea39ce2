//! Two runs compared without holding either: what `casebook compare` does for stored runs of any
//! size. The numbers and lists are those of [`crate::summary::compare`] (its definitions hold);
//! only the way there differs.
//!
//! Each run's results go into a [`Side`] as they are read (in the run's order): the few fields
//! the comparison reads, sorted by (case id, scenario, run) through temporary files
//! ([`crate::sorted`]). [`compare_sides`] merges the two sorted streams, pairing equal keys, and
//! keeps what the reports show: counts, the first few of each list for the terminal, and each
//! whole list as JSON lines in a temporary file for `--format json`, which
//! [`Compared::write_json`] writes out as [`Comparison`]'s JSON, byte for byte.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};

use serde::{Deserialize, Serialize};

use crate::pairing::{Ran, ScenarioPair};
use crate::record::{Failure, RunResult};
use crate::sorted::{Sorted, Sorter};
#[cfg(doc)]
use crate::summary::Comparison;
use crate::summary::{CaseRun, Interval, PairedDifference, PairedError, RunMeta, Verdict};

/// Entries of each list kept in memory: as many as the terminal names.
pub const FIRST_KEPT: usize = crate::report::terminal::CASES_NAMED;

/// What the comparison reads of one result, with its place in its run (the first of a case run
/// counts).
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    key: CaseRun,
    seq: u64,
    verdict: Verdict,
    score: Option<f64>,
    failure: Option<Failure>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key).then(self.seq.cmp(&other.seq))
    }
}

/// One run's results, taken in the run's order and sorted by case run.
#[derive(Default)]
pub struct Side {
    sorter: Sorter<Entry>,
    scenarios: BTreeSet<String>,
    seq: u64,
}

impl Side {
    /// The scenarios the run's results have, with their targets from `meta`, for pairing.
    pub fn ran(&self, meta: Option<&RunMeta>) -> Ran {
        Ran::of_scenarios(self.scenarios.iter().cloned(), meta)
    }

    /// Takes the run's next result.
    pub fn add(&mut self, result: &RunResult) -> io::Result<()> {
        if !self.scenarios.contains(&result.scenario) {
            self.scenarios.insert(result.scenario.clone());
        }
        let failure = result.failure().cloned();
        let bytes = result.case_id.len()
            + result.scenario.len()
            + failure.as_ref().map_or(0, |f| f.kind.len() + f.message.len());
        let entry = Entry {
            key: CaseRun { case_id: result.case_id.clone(), scenario: result.scenario.clone(), run: result.run },
            seq: self.seq,
            verdict: Verdict::of(result),
            score: result.score,
            failure,
        };
        self.seq += 1;
        self.sorter.push(entry, bytes + 64)
    }
}

/// The first entries of a list and how many there are, the whole list as JSON lines in a
/// temporary file.
pub struct Listed<T> {
    pub count: usize,
    /// The first [`FIRST_KEPT`].
    pub first: Vec<T>,
    file: BufWriter<std::fs::File>,
}

impl<T: Serialize> Listed<T> {
    fn new() -> io::Result<Self> {
        Ok(Self { count: 0, first: Vec::new(), file: BufWriter::with_capacity(64 * 1024, tempfile::tempfile()?) })
    }

    fn push(&mut self, item: T) -> io::Result<()> {
        self.count += 1;
        serde_json::to_writer(&mut self.file, &item)?;
        self.file.write_all(b"\n")?;
        if self.first.len() < FIRST_KEPT {
            self.first.push(item);
        }
        Ok(())
    }

    /// Writes the list as a JSON array.
    fn write_json(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.file.flush()?;
        let file = self.file.get_mut();
        file.rewind()?;
        let mut lines = BufReader::with_capacity(64 * 1024, &*file);
        out.write_all(b"[")?;
        let mut line = Vec::new();
        for i in 0..self.count {
            line.clear();
            lines.read_until(b'\n', &mut line)?;
            if line.pop() != Some(b'\n') {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a compared list was cut short"));
            }
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(&line)?;
        }
        out.write_all(b"]")?;
        file.seek(io::SeekFrom::End(0))?;
        Ok(())
    }
}

/// An entry of a compared list: what it is ordered by (lists are in case run order).
pub trait Keyed {
    fn key(&self) -> &CaseRun;
}

impl Keyed for CaseRun {
    fn key(&self) -> &CaseRun {
        self
    }
}

impl Keyed for PairedDifference {
    fn key(&self) -> &CaseRun {
        &self.key
    }
}

impl Keyed for PairedError {
    fn key(&self) -> &CaseRun {
        &self.key
    }
}

/// Where a page of a compared list is: from the start, just after a case run, or just before
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At<'a> {
    Start,
    After(&'a CaseRun),
    Before(&'a CaseRun),
}

/// A page of a compared list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage<T> {
    pub entries: Vec<T>,
    /// The place of the first entry in the list (0-based).
    pub first: usize,
    pub more_before: bool,
    pub more_after: bool,
}

impl<T: Serialize + serde::de::DeserializeOwned + Keyed> Listed<T> {
    /// At most `size` entries of the list from `at`, read back from its file one line at a time
    /// (memory holds the page).
    pub fn page(&mut self, at: At<'_>, size: usize) -> io::Result<ListPage<T>> {
        self.file.flush()?;
        let file = self.file.get_mut();
        file.rewind()?;
        let mut lines = BufReader::with_capacity(64 * 1024, &*file);
        let mut line = Vec::new();
        let mut window: VecDeque<T> = VecDeque::new();
        let (mut first, mut more_after) = (0, false);
        for i in 0..self.count {
            line.clear();
            lines.read_until(b'\n', &mut line)?;
            let item: T = serde_json::from_slice(&line)?;
            match at {
                At::After(key) if item.key() <= key => continue,
                At::Before(key) if item.key() >= key => {
                    more_after = true;
                    break;
                }
                At::Before(_) => {
                    window.push_back(item);
                    if window.len() > size {
                        window.pop_front();
                    }
                    first = i + 1 - window.len();
                }
                At::Start | At::After(_) => {
                    if window.len() == size {
                        more_after = true;
                        break;
                    }
                    if window.is_empty() {
                        first = i;
                    }
                    window.push_back(item);
                }
            }
        }
        drop(lines);
        file.seek(io::SeekFrom::End(0))?;
        if window.is_empty() {
            first = 0;
        }
        Ok(ListPage { more_before: first > 0, entries: window.into(), first, more_after })
    }
}

/// Run B against run A (see [`Comparison`], whose fields these are).
pub struct Compared {
    pub pairs: usize,
    pub mean_difference: Option<f64>,
    pub mean_difference_interval: Option<Interval>,
    pub pass_to_fail: Listed<PairedDifference>,
    pub fail_to_pass: Listed<PairedDifference>,
    pub only_in_a: Listed<CaseRun>,
    pub only_in_b: Listed<CaseRun>,
    pub errors: Listed<PairedError>,
    pub ungraded: usize,
    pub differences: Listed<PairedDifference>,
    pub paired_scenarios: Vec<ScenarioPair>,
}

impl Compared {
    /// Writes the comparison as [`Comparison`]'s JSON (without a line break).
    pub fn write_json(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let json = |value: &dyn erased::Json| value.text();
        write!(out, "{{\"pairs\":{}", self.pairs)?;
        write!(out, ",\"mean_difference\":{}", json(&self.mean_difference)?)?;
        write!(out, ",\"mean_difference_interval\":{}", json(&self.mean_difference_interval)?)?;
        out.write_all(b",\"pass_to_fail\":")?;
        self.pass_to_fail.write_json(out)?;
        out.write_all(b",\"fail_to_pass\":")?;
        self.fail_to_pass.write_json(out)?;
        out.write_all(b",\"only_in_a\":")?;
        self.only_in_a.write_json(out)?;
        out.write_all(b",\"only_in_b\":")?;
        self.only_in_b.write_json(out)?;
        out.write_all(b",\"errors\":")?;
        self.errors.write_json(out)?;
        write!(out, ",\"ungraded\":{}", self.ungraded)?;
        out.write_all(b",\"differences\":")?;
        self.differences.write_json(out)?;
        if !self.paired_scenarios.is_empty() {
            write!(out, ",\"paired_scenarios\":{}", json(&self.paired_scenarios)?)?;
        }
        out.write_all(b"}")
    }
}

/// `serde_json::to_string` behind a trait object, for the scalar fields above.
mod erased {
    pub trait Json {
        fn text(&self) -> std::io::Result<String>;
    }
    impl<T: serde::Serialize> Json for T {
        fn text(&self) -> std::io::Result<String> {
            Ok(serde_json::to_string(self)?)
        }
    }
}

/// Pairs the results of two runs as [`crate::summary::compare_paired`] does: by (case id,
/// scenario, run), the first result of a case run on a side, B's scenarios named as `pairs`
/// says ([`crate::pairing::pair_scenarios`]).
pub fn compare_sides(a: Side, b: Side, pairs: Vec<ScenarioPair>) -> io::Result<Compared> {
    let renamed: HashMap<String, String> = pairs.iter().map(|p| (p.b.clone(), p.a.clone())).collect();
    let paired_scenarios = pairs;
    let mut compared = Compared {
        pairs: 0,
        mean_difference: None,
        mean_difference_interval: None,
        pass_to_fail: Listed::new()?,
        fail_to_pass: Listed::new()?,
        only_in_a: Listed::new()?,
        only_in_b: Listed::new()?,
        errors: Listed::new()?,
        ungraded: 0,
        differences: Listed::new()?,
        paired_scenarios,
    };
    // The differences in pair order, as raw doubles, for the mean and its interval.
    let mut values = BufWriter::with_capacity(64 * 1024, tempfile::tempfile()?);
    let mut left = Firsts::new(a.sorter.finish()?, HashMap::new());
    let mut right = Firsts::new(b.sorter.finish()?, renamed);
    let (mut x, mut y) = (left.next()?, right.next()?);
    loop {
        let order = match (&x, &y) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => x.key.cmp(&y.key),
        };
        match order {
            Ordering::Less => {
                if let Some(entry) = x.take() {
                    compared.only_in_a.push(entry.key)?;
                }
                x = left.next()?;
            }
            Ordering::Greater => {
                if let Some(entry) = y.take() {
                    compared.only_in_b.push(entry.key)?;
                }
                y = right.next()?;
            }
            Ordering::Equal => {
                if let (Some(l), Some(r)) = (x.take(), y.take()) {
                    pair(&mut compared, &mut values, l, r)?;
                }
                (x, y) = (left.next()?, right.next()?);
            }
        }
    }
    compared.pairs = compared.differences.count;
    // As `mean_interval` over the list: the sum in order, then the squared deviations.
    let mut file = values.into_inner().map_err(io::IntoInnerError::into_error)?;
    let n = compared.pairs;
    if n > 0 {
        let sum = fold_values(&mut file, |sum, v| sum + v)?;
        let mean = sum / n as f64;
        let squares = fold_values(&mut file, |sum, v| sum + (v - mean) * (v - mean))?;
        let variance = squares / n.saturating_sub(1).max(1) as f64;
        compared.mean_difference = Some(mean);
        compared.mean_difference_interval = crate::summary::t_interval(mean, variance, n, -1.0, 1.0);
    }
    Ok(compared)
}

/// Sums `f` over the doubles of `file` from its start, from −0.0 (as `Iterator::sum` does).
fn fold_values(file: &mut std::fs::File, f: impl Fn(f64, f64) -> f64) -> io::Result<f64> {
    file.rewind()?;
    let mut reader = BufReader::with_capacity(64 * 1024, &*file);
    let mut eight = [0u8; 8];
    let mut sum = -0.0;
    loop {
        match reader.read_exact(&mut eight) {
            Ok(()) => sum = f(sum, f64::from_le_bytes(eight)),
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(sum),
            Err(err) => return Err(err),
        }
    }
}

/// One case run on both sides.
fn pair(compared: &mut Compared, values: &mut impl Write, left: Entry, right: Entry) -> io::Result<()> {
    if left.failure.is_some() || right.failure.is_some() {
        return compared.errors.push(PairedError { key: left.key, a: left.failure, b: right.failure });
    }
    let (Some(score_a), Some(score_b)) = (left.score, right.score) else {
        compared.ungraded += 1;
        return Ok(());
    };
    let pair = PairedDifference {
        key: left.key,
        score_a,
        score_b,
        difference: score_b - score_a,
        verdict_a: left.verdict,
        verdict_b: right.verdict,
    };
    values.write_all(&pair.difference.to_le_bytes())?;
    match (pair.verdict_a, pair.verdict_b) {
        (Verdict::Pass, Verdict::Fail) => compared.pass_to_fail.push(pair.clone())?,
        (Verdict::Fail, Verdict::Pass) => compared.fail_to_pass.push(pair.clone())?,
        _ => {}
    }
    compared.differences.push(pair)
}

/// A side's sorted entries, the first of each case run only, its scenario renamed when asked.
struct Firsts {
    sorted: Sorted<Entry>,
    /// B's scenarios paired with A's, by B's name.
    rename: HashMap<String, String>,
    /// The entries of one case id, renamed and sorted again, not handed out yet.
    group: VecDeque<Entry>,
    /// The first entry of the next case id, read while gathering a group.
    ahead: Option<Entry>,
    last: Option<CaseRun>,
}

impl Firsts {
    fn new(sorted: Sorted<Entry>, rename: HashMap<String, String>) -> Self {
        Self { sorted, rename, group: VecDeque::new(), ahead: None, last: None }
    }

    fn next(&mut self) -> io::Result<Option<Entry>> {
        loop {
            if self.group.is_empty() && !self.gather()? {
                return Ok(None);
            }
            let Some(entry) = self.group.pop_front() else { continue };
            if self.last.as_ref() == Some(&entry.key) {
                continue;
            }
            self.last = Some(entry.key.clone());
            return Ok(Some(entry));
        }
    }

    /// Reads the entries of the next case id; renaming scenarios can change their order within
    /// it (never across case ids), so they are sorted again. False at the end.
    fn gather(&mut self) -> io::Result<bool> {
        let first = match self.ahead.take() {
            Some(entry) => entry,
            None => match self.sorted.next().transpose()? {
                Some(entry) => entry,
                None => return Ok(false),
            },
        };
        let mut group = vec![first];
        while let Some(entry) = self.sorted.next().transpose()? {
            if entry.key.case_id != group[0].key.case_id {
                self.ahead = Some(entry);
                break;
            }
            group.push(entry);
        }
        if !self.rename.is_empty() {
            for entry in &mut group {
                if let Some(name) = self.rename.get(&entry.key.scenario) {
                    entry.key.scenario.clone_from(name);
                }
            }
            group.sort();
        }
        self.group.extend(group);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::compare;
    use crate::summary::tests::{erroring, failing, graded, passing};

    /// Compared through small sorted runs in files (many of them), as a large run is.
    fn streamed(a: &[RunResult], b: &[RunResult]) -> Compared {
        let side = || Side { sorter: Sorter::with_budget(2000), ..Side::default() };
        let (mut x, mut y) = (side(), side());
        a.iter().for_each(|r| x.add(r).unwrap());
        b.iter().for_each(|r| y.add(r).unwrap());
        assert!(a.len() < 50 || x.sorter.spilled() > 5);
        let pairs = crate::pairing::pair_scenarios(&x.ran(None), &y.ran(None), &[]).unwrap_or_default();
        compare_sides(x, y, pairs).unwrap()
    }

    fn json(compared: &mut Compared) -> String {
        let mut out = Vec::new();
        compared.write_json(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Passes, failures, errors, ungraded results, flips both ways, cases on one side only, a
    /// case run twice on a side, scores making a mean with an interval, in an order that is not
    /// the cases' ids: the JSON and the terminal text are those of the comparison in memory.
    #[test]
    fn the_streamed_comparison_is_the_comparison_in_memory() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for i in (0..300).rev() {
            let id = format!("ça-{:03}", (i * 37) % 300);
            for run in 0..2 {
                let score = f64::from((i * 7 + run) % 10) / 10.0;
                a.push(match (i + run) % 6 {
                    0 => erroring(&id, "base", run, "timeout", "no reply"),
                    1 => failing(&id, "base", run),
                    _ => graded(&id, "base", run, &[("g", score, score >= 0.5)]),
                });
                if i % 17 != 3 {
                    let score = f64::from((i * 3 + run) % 10) / 10.0;
                    b.push(match (i + 2 * run) % 7 {
                        0 => failing(&id, "base", run),
                        1 => passing(&id, "base", run),
                        _ => graded(&id, "base", run, &[("g", score, score >= 0.5)]),
                    });
                }
            }
        }
        b.push(passing("only-b", "base", 0));
        // The same case run again on A: its first result counts.
        a.push(failing("ça-000", "base", 0));
        let mut ungraded = passing("ungraded", "base", 0);
        (ungraded.score, ungraded.pass) = (None, None);
        a.push(ungraded.clone());
        b.push(ungraded);
        let in_memory = compare(&a, &b);
        assert!(in_memory.pairs > 100 && !in_memory.only_in_a.is_empty() && !in_memory.errors.is_empty());
        assert!(in_memory.ungraded > 0 && in_memory.mean_difference_interval.is_some());
        let mut compared = streamed(&a, &b);
        assert_eq!(json(&mut compared), serde_json::to_string(&in_memory).unwrap());
        // Written twice, the same.
        assert_eq!(json(&mut compared), serde_json::to_string(&in_memory).unwrap());
        assert_eq!(
            crate::report::terminal::human_compared(&compared),
            crate::report::terminal::human_comparison(&in_memory)
        );
    }

    /// A list read back a page at a time, forwards from each page's last entry and backwards
    /// from each page's first, is the list in memory, with its places; the list can still be
    /// written whole afterwards.
    #[test]
    fn a_list_pages_both_ways_from_its_file() {
        let a: Vec<RunResult> = (0..230).map(|i| passing(&format!("c{i:03}"), "base", 0)).collect();
        let b: Vec<RunResult> = (0..230).map(|i| failing(&format!("c{i:03}"), "base", 0)).collect();
        let in_memory = compare(&a, &b);
        let mut compared = streamed(&a, &b);
        let mut forward = Vec::new();
        let mut page = compared.pass_to_fail.page(At::Start, 100).unwrap();
        let mut firsts = vec![page.first];
        assert!(!page.more_before && page.more_after);
        loop {
            forward.extend(page.entries.clone());
            if !page.more_after {
                break;
            }
            let last = page.entries.last().unwrap().key.clone();
            page = compared.pass_to_fail.page(At::After(&last), 100).unwrap();
            firsts.push(page.first);
        }
        assert_eq!(firsts, [0, 100, 200]);
        assert_eq!(page.entries.len(), 30);
        assert_eq!(forward, in_memory.pass_to_fail);
        // Back from the last page.
        let first = page.entries[0].key.clone();
        let back = compared.pass_to_fail.page(At::Before(&first), 100).unwrap();
        assert_eq!((back.first, back.more_before, back.more_after), (100, true, true));
        assert_eq!(back.entries, in_memory.pass_to_fail[100..200]);
        let start = compared.pass_to_fail.page(At::Before(&back.entries[0].key), 100).unwrap();
        assert_eq!((start.first, start.more_before), (0, false));
        assert_eq!(start.entries, in_memory.pass_to_fail[..100]);
        let empty = compared.fail_to_pass.page(At::Start, 100).unwrap();
        assert!(empty.entries.is_empty() && !empty.more_after && !empty.more_before);
        assert_eq!(json(&mut compared), serde_json::to_string(&in_memory).unwrap());
    }

    /// Runs of one scenario each, named differently, pair by case and run, in either order of
    /// names; no result at all compares as nothing.
    #[test]
    fn one_scenario_each_pairs_across_names_as_in_memory() {
        for (x, y) in [("base", "target"), ("target", "base")] {
            let a: Vec<RunResult> = (0..30).map(|i| passing(&format!("c{i}"), x, 0)).collect();
            let b: Vec<RunResult> = (5..40).map(|i| failing(&format!("c{i}"), y, 0)).collect();
            let mut compared = streamed(&a, &b);
            assert_eq!(json(&mut compared), serde_json::to_string(&compare(&a, &b)).unwrap());
        }
        assert_eq!(json(&mut streamed(&[], &[])), serde_json::to_string(&compare(&[], &[])).unwrap());
    }
}
