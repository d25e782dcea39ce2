//! The selected cases of a run, kept in two unnamed temporary files while it goes: their JSON
//! one after another, and a record of fixed size per case (where its JSON is, its row, its
//! content id and its runs' hashes). Memory holds a window of them at a time, whatever the
//! number of cases: the engine reads the records of the cases a window of jobs runs
//! ([`crate::engine::Plan::jobs`]) and each job reads its case back when it runs.

use std::io::{self, Write};
use std::sync::Arc;

use casebook_model::Case;

use crate::engine::RunKeys;
use crate::record::Failure;

/// A selected case as a window of the plan holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCase {
    pub content_id: [u8; 32],
    /// Its 0-based row in the dataset (see `Provenance::row`).
    pub row: Option<u64>,
    /// The hashes of its runs, scenario by scenario, run by run ([`RunKeys::hashes`]).
    pub hashes: Vec<[u8; 32]>,
    /// Where its JSON is in the file of texts.
    at: u64,
    len: u32,
}

/// Bytes of a record before its hashes: place and length of the JSON, row, content id.
const HEAD: usize = 8 + 4 + 8 + 32;
/// The row of a record of a case without one.
const NO_ROW: u64 = u64::MAX;

/// Writes the selected cases as a dataset is read; [`PlanWriter::finish`] makes the
/// [`PlannedCases`] that reads them back.
pub struct PlanWriter {
    texts: io::BufWriter<std::fs::File>,
    records: io::BufWriter<std::fs::File>,
    at: u64,
    len: usize,
    per_case: usize,
}

impl PlanWriter {
    /// A writer of cases with `per_case` run hashes each (scenarios × runs), into new unnamed
    /// temporary files.
    pub fn new(per_case: usize) -> io::Result<Self> {
        Ok(Self {
            texts: io::BufWriter::with_capacity(256 * 1024, tempfile::tempfile()?),
            records: io::BufWriter::with_capacity(64 * 1024, tempfile::tempfile()?),
            at: 0,
            len: 0,
            per_case,
        })
    }

    /// Keeps the next selected case: its native JSON, content id, row and run hashes.
    pub fn keep(&mut self, json: &str, content_id: &[u8; 32], row: Option<u64>, hashes: &[[u8; 32]]) -> io::Result<()> {
        let len = u32::try_from(json.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a case of more than 4 GiB"))?;
        if hashes.len() != self.per_case {
            let message = format!("{} run hashes for a case, not {}", hashes.len(), self.per_case);
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        }
        self.texts.write_all(json.as_bytes())?;
        let mut record = Vec::with_capacity(HEAD + 32 * hashes.len());
        record.extend_from_slice(&self.at.to_le_bytes());
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&row.unwrap_or(NO_ROW).to_le_bytes());
        record.extend_from_slice(content_id);
        hashes.iter().for_each(|hash| record.extend_from_slice(hash));
        self.records.write_all(&record)?;
        self.at += u64::from(len);
        self.len += 1;
        Ok(())
    }

    /// How many cases it kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it kept none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn finish(self) -> io::Result<PlannedCases> {
        let texts = self.texts.into_inner().map_err(io::IntoInnerError::into_error)?;
        let records = self.records.into_inner().map_err(io::IntoInnerError::into_error)?;
        Ok(PlannedCases { texts, records, len: self.len, per_case: self.per_case, rows: true })
    }
}

/// The selected cases of a run, in dataset order, in temporary files (see the module's comment).
#[derive(Debug)]
pub struct PlannedCases {
    texts: std::fs::File,
    records: std::fs::File,
    len: usize,
    per_case: usize,
    /// Whether records' rows are given (`false`: every case's row is `None`).
    rows: bool,
}

impl PlannedCases {
    /// `cases` with their run hashes by `keys`, without rows (for callers that hold their cases).
    pub fn of(cases: &[Case], keys: &RunKeys) -> Result<Self, Failure> {
        let io = |e: io::Error| Failure::new("config", format!("cannot keep the cases in a temporary file: {e}"));
        let mut writer = PlanWriter::new(keys.per_case()).map_err(io)?;
        for case in cases {
            let json = serde_json::to_string(case).map_err(|e| Failure::new("config", e.to_string()))?;
            let content_id = casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &json)
                .map_err(|e| Failure::new("config", e.to_string()))?;
            writer.keep(&json, &content_id, None, &keys.hashes(case)?).map_err(io)?;
        }
        writer.finish().map_err(io)
    }

    /// How many cases there are.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Leaves every case without a row (when the rows read are not the dataset's rows).
    pub fn forget_rows(&mut self) {
        self.rows = false;
    }

    fn record_size(&self) -> usize {
        HEAD + 32 * self.per_case
    }

    /// The cases `range` (clipped to the cases there are), read in one go.
    pub fn window(&self, range: std::ops::Range<usize>) -> io::Result<Vec<Arc<PlannedCase>>> {
        let (start, end) = (range.start.min(self.len), range.end.min(self.len));
        if start >= end {
            return Ok(Vec::new());
        }
        let size = self.record_size();
        let mut bytes = vec![0; (end - start) * size];
        read_exact_at(&self.records, &mut bytes, (start * size) as u64)?;
        Ok(bytes
            .chunks_exact(size)
            .map(|record| {
                let number = |from: usize, to: usize| {
                    let mut eight = [0u8; 8];
                    eight[..to - from].copy_from_slice(&record[from..to]);
                    u64::from_le_bytes(eight)
                };
                let row = number(12, 20);
                let mut content_id = [0u8; 32];
                content_id.copy_from_slice(&record[20..HEAD]);
                let hashes = record[HEAD..]
                    .chunks_exact(32)
                    .map(|hash| {
                        let mut one = [0u8; 32];
                        one.copy_from_slice(hash);
                        one
                    })
                    .collect();
                Arc::new(PlannedCase {
                    content_id,
                    row: (self.rows && row != NO_ROW).then_some(row),
                    hashes,
                    at: number(0, 8),
                    len: number(8, 12) as u32,
                })
            })
            .collect())
    }

    /// The JSON of `case`.
    pub fn text(&self, case: &PlannedCase) -> io::Result<String> {
        let mut bytes = vec![0; case.len as usize];
        read_exact_at(&self.texts, &mut bytes, case.at)?;
        String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The JSON of each of `cases`, which follow each other in the plan, read in one go.
    pub fn texts(&self, cases: &[Arc<PlannedCase>]) -> io::Result<Vec<String>> {
        let (Some(first), Some(last)) = (cases.first(), cases.last()) else { return Ok(Vec::new()) };
        let end = last.at + u64::from(last.len);
        let mut bytes = vec![0; end.saturating_sub(first.at) as usize];
        read_exact_at(&self.texts, &mut bytes, first.at)?;
        cases
            .iter()
            .map(|case| {
                let from = case.at.checked_sub(first.at).map(|from| from as usize);
                let slice = from.and_then(|from| bytes.get(from..from + case.len as usize));
                let slice = slice.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "cases out of order"))?;
                String::from_utf8(slice.to_vec()).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            })
            .collect()
    }

    /// `case`, parsed.
    pub fn case(&self, case: &PlannedCase) -> Result<Case, Failure> {
        let text = self
            .text(case)
            .map_err(|e| Failure::new("config", format!("a case cannot be read back from its temporary file: {e}")))?;
        serde_json::from_str(&text).map_err(|e| Failure::new("config", format!("a case cannot be read: {e}")))
    }
}

pub use casebook_formats::spill::read_exact_at;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_read_back_as_they_were_kept_a_window_at_a_time() {
        let mut writer = PlanWriter::new(2).unwrap();
        let texts = ["{\"id\":\"première\"}", "{}", "{\"id\":\"東京\",\"input\":\"x\"}"];
        for (i, text) in texts.iter().enumerate() {
            let hashes = [[i as u8; 32], [100 + i as u8; 32]];
            writer.keep(text, &[7 + i as u8; 32], (i != 1).then_some(i as u64 * 10), &hashes).unwrap();
        }
        // A case with the wrong number of hashes is refused, not written.
        assert_eq!(writer.keep("{}", &[0; 32], None, &[[0; 32]]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(writer.len(), 3);
        let mut cases = writer.finish().unwrap();
        let all = cases.window(0..10).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].hashes, vec![[2; 32], [102; 32]]);
        assert_eq!((all[0].row, all[1].row, all[2].row), (Some(0), None, Some(20)));
        assert_eq!(all[1].content_id, [8; 32]);
        assert_eq!(cases.texts(&all).unwrap(), texts);
        assert_eq!(cases.texts(&all[1..]).unwrap(), &texts[1..]);
        assert_eq!(cases.text(&all[2]).unwrap(), texts[2]);
        assert_eq!(cases.window(1..2).unwrap(), all[1..2].to_vec());
        assert!(cases.window(3..5).unwrap().is_empty());
        cases.forget_rows();
        assert!(cases.window(0..3).unwrap().iter().all(|c| c.row.is_none()));
        // A place beyond the file's end is an error, not a panic.
        let beyond = PlannedCase { at: 1 << 20, ..(*all[0]).clone() };
        assert_eq!(cases.text(&beyond).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(cases.case(&beyond).unwrap_err().kind, "config");
    }
}
