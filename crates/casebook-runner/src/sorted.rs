//! An external sort of serialisable items in bounded memory: items are kept and sorted in
//! memory up to a budget of bytes; beyond it each full buffer is sorted and written to an
//! unnamed temporary file as a run of JSON lines, and [`Sorter::finish`] merges the runs back in
//! order. What `casebook compare` sorts each run's results by case with.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, Write};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Bytes of items (roughly, as their caller counts them) sorted in memory before they are
/// written out as one run.
pub const SORTED_BYTES: usize = 8 << 20;

/// Takes items in any order; [`Sorter::finish`] gives them back sorted (a stable sort only if
/// the items' order tells equal ones apart).
pub struct Sorter<T> {
    pending: Vec<T>,
    pending_bytes: usize,
    budget: usize,
    runs: Vec<std::fs::File>,
}

impl<T: Ord + Serialize + DeserializeOwned> Default for Sorter<T> {
    fn default() -> Self {
        Self::with_budget(SORTED_BYTES)
    }
}

impl<T: Ord + Serialize + DeserializeOwned> Sorter<T> {
    /// A sorter that writes a run each `budget` bytes of items.
    pub fn with_budget(budget: usize) -> Self {
        Self { pending: Vec::new(), pending_bytes: 0, budget, runs: Vec::new() }
    }

    /// Takes `item`, which holds about `bytes` bytes.
    pub fn push(&mut self, item: T, bytes: usize) -> io::Result<()> {
        self.pending.push(item);
        self.pending_bytes += bytes + std::mem::size_of::<T>();
        if self.pending_bytes > self.budget {
            self.write_run()?;
        }
        Ok(())
    }

    /// How many runs went to temporary files.
    pub fn spilled(&self) -> usize {
        self.runs.len()
    }

    fn write_run(&mut self) -> io::Result<()> {
        self.pending.sort();
        let mut file = tempfile::tempfile()?;
        let mut out = BufWriter::with_capacity(64 * 1024, &mut file);
        for item in self.pending.drain(..) {
            serde_json::to_writer(&mut out, &item)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        drop(out);
        file.rewind()?;
        self.runs.push(file);
        self.pending_bytes = 0;
        Ok(())
    }

    /// Every item taken, in order.
    pub fn finish(mut self) -> io::Result<Sorted<T>> {
        if self.runs.is_empty() {
            self.pending.sort();
            return Ok(Sorted::Memory(self.pending.into_iter()));
        }
        if !self.pending.is_empty() {
            self.write_run()?;
        }
        let mut merge = Merge { readers: Vec::new(), heads: BinaryHeap::new() };
        for file in self.runs {
            merge.readers.push(BufReader::with_capacity(64 * 1024, file));
            let at = merge.readers.len() - 1;
            merge.advance(at)?;
        }
        Ok(Sorted::Merged(merge))
    }
}

/// A [`Sorter`]'s items in order.
pub enum Sorted<T> {
    Memory(std::vec::IntoIter<T>),
    Merged(Merge<T>),
}

/// Sorted runs merged.
pub struct Merge<T> {
    readers: Vec<BufReader<std::fs::File>>,
    /// The next item of each run, smallest on top.
    heads: BinaryHeap<Reverse<(T, usize)>>,
}

impl<T: Ord + DeserializeOwned> Merge<T> {
    fn advance(&mut self, at: usize) -> io::Result<()> {
        let mut line = String::new();
        if self.readers[at].read_line(&mut line)? == 0 {
            return Ok(());
        }
        let item = serde_json::from_str(&line)?;
        self.heads.push(Reverse((item, at)));
        Ok(())
    }
}

impl<T: Ord + DeserializeOwned> Iterator for Sorted<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        match self {
            Sorted::Memory(items) => items.next().map(Ok),
            Sorted::Merged(merge) => {
                let Reverse((item, at)) = merge.heads.pop()?;
                Some(merge.advance(at).map(|()| item))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same order in memory as through many runs in files.
    #[test]
    fn items_come_back_sorted_in_memory_or_through_files() {
        let items: Vec<(String, u64)> =
            (0..2000u64).map(|i| (format!("é-{}", i.wrapping_mul(2_654_435_761) % 997), i)).collect();
        let mut expected = items.clone();
        expected.sort();
        for budget in [SORTED_BYTES, 3000] {
            let mut sorter = Sorter::with_budget(budget);
            for item in &items {
                sorter.push(item.clone(), item.0.len()).unwrap();
            }
            assert_eq!(sorter.spilled() > 10, budget == 3000, "budget {budget}");
            let sorted: Vec<(String, u64)> = sorter.finish().unwrap().collect::<io::Result<_>>().unwrap();
            assert_eq!(sorted, expected, "budget {budget}");
        }
        assert_eq!(Sorter::<u8>::default().finish().unwrap().count(), 0);
    }
}
