//! The version id a dataset file's cases would have as the first version of a dataset, made
//! in bounded memory: `casebook_canon::first_version_id` wants the (case id, content id) pairs
//! in case-id order, and a file's cases come in any order. Pairs are sorted in memory up to
//! [`SORTED_BYTES`]; beyond that, each full buffer is sorted and written to an unnamed temporary
//! file as a run, and the runs are merged back in order at the end (an external sort).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

/// Bytes of pairs (roughly, as held in memory) sorted before they are written out as a run.
pub const SORTED_BYTES: usize = 1 << 20;
/// Bytes read ahead from each run while merging.
const READ_AHEAD: usize = 16 * 1024;

/// Takes a dataset's (case id, content id) pairs in any order; [`FirstVersion::finish`] gives
/// the version id.
pub struct FirstVersion {
    name: String,
    pending: Vec<(Box<str>, [u8; 32])>,
    pending_bytes: usize,
    budget: usize,
    /// The runs written so far: one file, each run a span of it.
    spill: Option<io::BufWriter<std::fs::File>>,
    runs: Vec<(u64, u64)>,
    written: u64,
    count: u64,
}

impl FirstVersion {
    /// For the dataset named `name`.
    pub fn new(name: &str) -> Self {
        Self::with_budget(name, SORTED_BYTES)
    }

    fn with_budget(name: &str, budget: usize) -> Self {
        Self {
            name: name.to_owned(),
            pending: Vec::new(),
            pending_bytes: 0,
            budget,
            spill: None,
            runs: Vec::new(),
            written: 0,
            count: 0,
        }
    }

    /// How many cases it was given.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn add(&mut self, id: &str, content_id: &[u8; 32]) -> io::Result<()> {
        self.pending.push((id.into(), *content_id));
        // The id, its content id, the box and the allocator's share.
        self.pending_bytes += id.len() + 32 + 16 + 16;
        self.count += 1;
        if self.pending_bytes > self.budget {
            self.write_run()?;
        }
        Ok(())
    }

    /// Sorts what is pending and writes it out as a run: `u32` length, id, content id, each.
    fn write_run(&mut self) -> io::Result<()> {
        self.pending.sort_unstable();
        let spill = match &mut self.spill {
            Some(spill) => spill,
            None => self.spill.insert(io::BufWriter::with_capacity(64 * 1024, tempfile::tempfile()?)),
        };
        let start = self.written;
        for (id, cid) in self.pending.drain(..) {
            let len = u32::try_from(id.len()).map_err(|_| io::Error::other("a case id of more than 4 GiB"))?;
            spill.write_all(&len.to_le_bytes())?;
            spill.write_all(id.as_bytes())?;
            spill.write_all(&cid)?;
            self.written += 4 + id.len() as u64 + 32;
        }
        self.runs.push((start, self.written));
        self.pending_bytes = 0;
        Ok(())
    }

    /// The version id.
    pub fn finish(mut self) -> anyhow::Result<String> {
        let Some(spill) = self.spill.take() else {
            self.pending.sort_unstable();
            let pairs = self.pending.iter().map(|(id, cid)| (&**id, cid));
            return Ok(casebook_canon::first_version_id(&self.name, pairs)?);
        };
        self.spill = Some(spill);
        if !self.pending.is_empty() {
            self.write_run()?;
        }
        let file = match self.spill.take() {
            Some(spill) => spill.into_inner().map_err(io::IntoInnerError::into_error)?,
            None => return Err(io::Error::other("no file of sorted cases").into()),
        };
        let mut readers: Vec<Run<'_>> =
            self.runs.iter().map(|&(at, end)| Run { file: &file, at, end, buffer: Vec::new(), used: 0 }).collect();
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (r, reader) in readers.iter_mut().enumerate() {
            if let Some((id, cid)) = reader.next()? {
                heap.push(Reverse((id, cid, r)));
            }
        }
        let mut hasher = casebook_canon::VersionHasher::new(
            &serde_json::json!({"dataset": self.name, "parent": null, "order": null}),
        )?;
        while let Some(Reverse((id, cid, r))) = heap.pop() {
            hasher.change(&id, Some(&casebook_canon::id_hex(&cid)))?;
            if let Some((id, cid)) = readers[r].next()? {
                heap.push(Reverse((id, cid, r)));
            }
        }
        Ok(hasher.finish())
    }
}

/// One sorted run of the spill file, read a little at a time.
struct Run<'a> {
    file: &'a std::fs::File,
    at: u64,
    end: u64,
    buffer: Vec<u8>,
    used: usize,
}

impl Run<'_> {
    /// Makes sure `n` unread bytes are buffered.
    fn fill(&mut self, n: usize) -> io::Result<()> {
        if self.buffer.len() - self.used >= n {
            return Ok(());
        }
        self.buffer.drain(..self.used);
        self.used = 0;
        let want = (n - self.buffer.len()).max(READ_AHEAD).min((self.end - self.at) as usize);
        if self.buffer.len() + want < n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let from = self.buffer.len();
        self.buffer.resize(from + want, 0);
        casebook_runner::planned::read_exact_at(self.file, &mut self.buffer[from..], self.at)?;
        self.at += want as u64;
        Ok(())
    }

    fn next(&mut self) -> io::Result<Option<(String, [u8; 32])>> {
        if self.used == self.buffer.len() && self.at == self.end {
            return Ok(None);
        }
        self.fill(4)?;
        let mut four = [0u8; 4];
        four.copy_from_slice(&self.buffer[self.used..self.used + 4]);
        let len = u32::from_le_bytes(four) as usize;
        self.fill(4 + len + 32)?;
        let start = self.used + 4;
        let id = std::str::from_utf8(&self.buffer[start..start + len])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            .to_owned();
        let mut cid = [0u8; 32];
        cid.copy_from_slice(&self.buffer[start + len..start + len + 32]);
        self.used = start + len + 32;
        Ok(Some((id, cid)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids out of order, of every length, some not ASCII: the id is the one made from the pairs
    /// sorted in memory, whether they fit the budget or spill into many runs.
    #[test]
    fn the_version_id_is_the_same_sorted_in_memory_or_through_a_file() {
        let pairs: Vec<(String, [u8; 32])> = (0..3000u32)
            .map(|i| {
                let n = i.wrapping_mul(2_654_435_761) % 100_000;
                let id = match i % 4 {
                    0 => format!("case-{n}"),
                    1 => format!("é{n}"),
                    2 => "x".repeat((n % 300) as usize) + &i.to_string(),
                    _ => format!("t-{n:016x}"),
                };
                (id, [(i % 251) as u8; 32])
            })
            .collect();
        let mut sorted: Vec<&(String, [u8; 32])> = pairs.iter().collect();
        sorted.sort_unstable();
        let expected =
            casebook_canon::first_version_id("support", sorted.iter().map(|(id, cid)| (id.as_str(), cid))).unwrap();
        for budget in [SORTED_BYTES, 10_000, 200] {
            let mut version = FirstVersion::with_budget("support", budget);
            for (id, cid) in &pairs {
                version.add(id, cid).unwrap();
            }
            assert_eq!(version.count(), 3000);
            let spilled = version.runs.len();
            assert_eq!(version.finish().unwrap(), expected, "budget {budget}");
            assert!((budget == SORTED_BYTES) == (spilled == 0), "budget {budget}: {spilled} runs");
        }
        // No case at all: the id of an empty first version.
        let empty = casebook_canon::first_version_id("support", std::iter::empty()).unwrap();
        assert_eq!(FirstVersion::new("support").finish().unwrap(), empty);
    }
}
