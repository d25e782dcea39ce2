//! Bounded memory for work on more items than memory should hold: [`Partitions`] keeps items
//! by partition (in memory up to a budget, then in chunks of one unnamed temporary file) so that
//! each partition can be worked on alone; [`Sorter`] sorts items by a key, in memory up to a
//! budget, else as sorted runs in a temporary file merged back at the end (an external sort).
//! Items are kept as JSON, so anything serde can write round-trips.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;
use std::io::{self, Write};
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Bytes read ahead from each run while merging.
const READ_AHEAD: usize = 64 * 1024;

/// Items of type `T` by partition (see the module's comment).
pub struct Partitions<T> {
    buffers: Vec<Vec<u8>>,
    /// Where each partition's chunks are in the file: (offset, length).
    chunks: Vec<Vec<(u64, usize)>>,
    file: Option<std::fs::File>,
    written: u64,
    buffered: usize,
    budget: usize,
    _items: PhantomData<T>,
}

impl<T: Serialize + DeserializeOwned> Partitions<T> {
    /// `count` partitions, holding at most about `budget` bytes of items in memory.
    pub fn new(count: usize, budget: usize) -> Self {
        Self {
            buffers: vec![Vec::new(); count.max(1)],
            chunks: vec![Vec::new(); count.max(1)],
            file: None,
            written: 0,
            buffered: 0,
            budget,
            _items: PhantomData,
        }
    }

    pub fn count(&self) -> usize {
        self.buffers.len()
    }

    /// The partition of a key (a 64-bit hash of it).
    pub fn of(&self, key: &str) -> usize {
        (foldhash::quality::FixedState::with_seed(0x5eed).hash_one(key) % self.buffers.len() as u64) as usize
    }

    /// Whether items went to the temporary file.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }

    pub fn push(&mut self, partition: usize, item: &T) -> io::Result<()> {
        let buffer = &mut self.buffers[partition];
        let before = buffer.len();
        serde_json::to_writer(&mut *buffer, item).map_err(io::Error::other)?;
        buffer.push(b'\n');
        self.buffered += buffer.len() - before;
        if self.buffered > self.budget {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes every partition's buffer out as a chunk.
    fn flush(&mut self) -> io::Result<()> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(tempfile::tempfile()?),
        };
        for (buffer, chunks) in self.buffers.iter_mut().zip(&mut self.chunks) {
            if buffer.is_empty() {
                continue;
            }
            file.write_all(buffer)?;
            chunks.push((self.written, buffer.len()));
            self.written += buffer.len() as u64;
            *buffer = Vec::new();
        }
        self.buffered = 0;
        Ok(())
    }

    /// The items of `partition`, in the order they were pushed (its place is emptied).
    pub fn take(&mut self, partition: usize) -> io::Result<Vec<T>> {
        Self::parse(&self.take_bytes(partition)?)
    }

    /// The items of `partition` as they are kept (JSON lines, in the order they were pushed; its
    /// place is emptied), for [`Partitions::parse`] to read, on another thread if need be.
    pub fn take_bytes(&mut self, partition: usize) -> io::Result<Vec<u8>> {
        let chunks = std::mem::take(&mut self.chunks[partition]);
        let buffer = std::mem::take(&mut self.buffers[partition]);
        self.buffered -= buffer.len();
        if chunks.is_empty() {
            return Ok(buffer);
        }
        let file = self.file.as_ref().ok_or_else(|| io::Error::other("a chunk without its file"))?;
        let mut bytes = vec![0; chunks.iter().map(|(_, len)| len).sum::<usize>() + buffer.len()];
        let mut from = 0;
        for (at, len) in chunks {
            read_exact_at(file, &mut bytes[from..from + len], at)?;
            from += len;
        }
        bytes[from..].copy_from_slice(&buffer);
        Ok(bytes)
    }

    /// The items of what [`Partitions::take_bytes`] gave.
    pub fn parse(bytes: &[u8]) -> io::Result<Vec<T>> {
        let mut items = Vec::new();
        parse_lines(bytes, &mut items)?;
        Ok(items)
    }
}

fn parse_lines<T: DeserializeOwned>(bytes: &[u8], items: &mut Vec<T>) -> io::Result<()> {
    for item in serde_json::Deserializer::from_slice(bytes).into_iter::<T>() {
        items.push(item.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?);
    }
    Ok(())
}

/// Items sorted by a key (see the module's comment); [`Sorter::finish`] gives them in order.
pub struct Sorter<K, T> {
    pending: Vec<(K, Vec<u8>)>,
    pending_bytes: usize,
    budget: usize,
    file: Option<io::BufWriter<std::fs::File>>,
    runs: Vec<(u64, u64)>,
    written: u64,
    _items: PhantomData<T>,
}

impl<K: Ord + Serialize + DeserializeOwned, T: Serialize + DeserializeOwned> Sorter<K, T> {
    /// A sorter holding at most about `budget` bytes of items in memory.
    pub fn new(budget: usize) -> Self {
        Self {
            pending: Vec::new(),
            pending_bytes: 0,
            budget,
            file: None,
            runs: Vec::new(),
            written: 0,
            _items: PhantomData,
        }
    }

    pub fn push(&mut self, key: K, item: &T) -> io::Result<()> {
        self.push_json(key, serde_json::to_vec(item).map_err(io::Error::other)?)
    }

    /// [`Sorter::push`] of an item already written as JSON (`serde_json::to_vec` of a `T`), so
    /// that the writing can be done on another thread.
    pub fn push_json(&mut self, key: K, bytes: Vec<u8>) -> io::Result<()> {
        self.pending_bytes += bytes.len() + 64;
        self.pending.push((key, bytes));
        if self.pending_bytes > self.budget {
            self.write_run()?;
        }
        Ok(())
    }

    /// Sorts what is pending and writes it out as a run of `u32` length, record (key and item).
    fn write_run(&mut self) -> io::Result<()> {
        self.pending.sort_by(|a, b| a.0.cmp(&b.0));
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(io::BufWriter::with_capacity(256 * 1024, tempfile::tempfile()?)),
        };
        let start = self.written;
        for (key, item) in self.pending.drain(..) {
            let key = serde_json::to_vec(&key).map_err(io::Error::other)?;
            let record = key.len() + item.len();
            let len = u32::try_from(record).map_err(|_| io::Error::other("an item of more than 4 GiB"))?;
            let key_len = key.len() as u32;
            file.write_all(&len.to_le_bytes())?;
            file.write_all(&key_len.to_le_bytes())?;
            file.write_all(&key)?;
            file.write_all(&item)?;
            self.written += 8 + record as u64;
        }
        self.runs.push((start, self.written));
        self.pending_bytes = 0;
        self.pending = Vec::new();
        Ok(())
    }

    /// The items in key order (items of equal keys in no set order).
    pub fn finish(mut self) -> io::Result<Sorted<K, T>> {
        if self.file.is_none() {
            self.pending.sort_by(|a, b| a.0.cmp(&b.0));
            let memory = std::mem::take(&mut self.pending).into_iter();
            return Ok(Sorted {
                memory: Some(memory),
                file: None,
                runs: Vec::new(),
                heap: BinaryHeap::new(),
                _items: PhantomData,
            });
        }
        if !self.pending.is_empty() {
            self.write_run()?;
        }
        let file = match self.file.take() {
            Some(file) => file.into_inner().map_err(io::IntoInnerError::into_error)?,
            None => return Err(io::Error::other("no file of sorted runs")),
        };
        let mut runs: Vec<Run> =
            self.runs.iter().map(|&(at, end)| Run { at, end, buffer: Vec::new(), used: 0 }).collect();
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (r, run) in runs.iter_mut().enumerate() {
            if let Some((key, item)) = run.next(&file)? {
                heap.push(Reverse(Head { key, item, run: r }));
            }
        }
        Ok(Sorted { memory: None, file: Some(file), runs, heap, _items: PhantomData })
    }
}

struct Head<K> {
    key: K,
    item: Vec<u8>,
    run: usize,
}

impl<K: Ord> PartialEq for Head<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.run == other.run
    }
}
impl<K: Ord> Eq for Head<K> {}
impl<K: Ord> PartialOrd for Head<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Ord> Ord for Head<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.key, self.run).cmp(&(&other.key, other.run))
    }
}

/// The items of a [`Sorter`], in key order.
pub struct Sorted<K, T> {
    memory: Option<std::vec::IntoIter<(K, Vec<u8>)>>,
    file: Option<std::fs::File>,
    runs: Vec<Run>,
    heap: BinaryHeap<Reverse<Head<K>>>,
    _items: PhantomData<T>,
}

impl<K: Ord + DeserializeOwned, T: DeserializeOwned> Sorted<K, T> {
    /// The next item as the bytes it was pushed as ([`Sorter::push_json`]), not parsed.
    pub fn next_bytes(&mut self) -> io::Result<Option<(K, Vec<u8>)>> {
        if let Some(memory) = &mut self.memory {
            return Ok(memory.next());
        }
        let Some(Reverse(head)) = self.heap.pop() else { return Ok(None) };
        let file = self.file.as_ref().ok_or_else(|| io::Error::other("no file of sorted runs"))?;
        if let Some((key, item)) = self.runs[head.run].next(file)? {
            self.heap.push(Reverse(Head { key, item, run: head.run }));
        }
        Ok(Some((head.key, head.item)))
    }
}

impl<K: Ord + DeserializeOwned, T: DeserializeOwned> Iterator for Sorted<K, T> {
    type Item = io::Result<(K, T)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_bytes() {
            Ok(Some((key, bytes))) => Some(
                serde_json::from_slice(&bytes)
                    .map(|item| (key, item))
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            ),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// One sorted run of the file, read a little at a time.
struct Run {
    at: u64,
    end: u64,
    buffer: Vec<u8>,
    used: usize,
}

impl Run {
    /// Makes sure `n` unread bytes are buffered.
    fn fill(&mut self, file: &std::fs::File, n: usize) -> io::Result<()> {
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
        read_exact_at(file, &mut self.buffer[from..], self.at)?;
        self.at += want as u64;
        Ok(())
    }

    fn next<K: DeserializeOwned>(&mut self, file: &std::fs::File) -> io::Result<Option<(K, Vec<u8>)>> {
        if self.used == self.buffer.len() && self.at == self.end {
            return Ok(None);
        }
        self.fill(file, 8)?;
        let number = |at: usize| {
            let mut four = [0u8; 4];
            four.copy_from_slice(&self.buffer[at..at + 4]);
            u32::from_le_bytes(four) as usize
        };
        let (len, key_len) = (number(self.used), number(self.used + 4));
        self.fill(file, 8 + len)?;
        let start = self.used + 8;
        let key = serde_json::from_slice(&self.buffer[start..start + key_len])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let item = self.buffer[start + key_len..start + len].to_vec();
        self.used = start + len;
        Ok(Some((key, item)))
    }
}

/// Reads `bytes.len()` bytes of `file` from offset `at`, without moving a shared position (so
/// that the file can be read from several places at once).
#[cfg(unix)]
pub fn read_exact_at(file: &std::fs::File, bytes: &mut [u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, at)
}

/// See the Unix version.
#[cfg(windows)]
pub fn read_exact_at(file: &std::fs::File, mut bytes: &mut [u8], mut at: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, bytes, at)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                bytes = &mut bytes[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_give_back_what_was_pushed_in_memory_or_spilled() {
        for budget in [1 << 20, 64] {
            let mut parts: Partitions<(String, u32)> = Partitions::new(7, budget);
            for i in 0..500u32 {
                let key = format!("trace-{}-é", i % 37);
                parts.push(parts.of(&key), &(key, i)).unwrap();
            }
            assert_eq!(parts.spilled(), budget == 64);
            let mut all = Vec::new();
            for p in 0..parts.count() {
                let items = parts.take(p).unwrap();
                // One key, one partition; order kept within it.
                assert!(items.iter().all(|(k, _)| parts.of(k) == p));
                assert!(items.windows(2).all(|w| w[0].1 < w[1].1));
                all.extend(items);
            }
            all.sort_by_key(|(_, i)| *i);
            assert_eq!(all.len(), 500);
            assert!(all.iter().enumerate().all(|(n, (k, i))| *i == n as u32 && *k == format!("trace-{}-é", n % 37)));
        }
    }

    #[test]
    fn the_sorter_gives_items_in_key_order_in_memory_or_through_runs() {
        let keys: Vec<(u64, String)> =
            (0..3000u64).map(|i| (i.wrapping_mul(2_654_435_761) % 1000, format!("東京-{i}"))).collect();
        let mut expected = keys.clone();
        expected.sort();
        for budget in [1 << 24, 2000, 10] {
            let mut sorter: Sorter<(u64, String), String> = Sorter::new(budget);
            for key in &keys {
                sorter.push(key.clone(), &format!("item {}", key.1)).unwrap();
            }
            let spilled = sorter.file.is_some();
            let sorted: Vec<((u64, String), String)> = sorter.finish().unwrap().map(Result::unwrap).collect();
            assert_eq!(spilled, budget != 1 << 24);
            assert_eq!(sorted.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), expected, "budget {budget}");
            assert!(sorted.iter().all(|(k, item)| *item == format!("item {}", k.1)));
        }
        let empty: Sorter<u64, u64> = Sorter::new(10);
        assert_eq!(empty.finish().unwrap().count(), 0);
    }
}
