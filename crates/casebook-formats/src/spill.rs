//! Bounded memory for work on more items than memory should hold: [`Partitions`] keeps items
//! by partition (in memory up to a budget, then in chunks of one unnamed temporary file) so that
//! each partition can be worked on alone; [`Sorter`] sorts items by a key, in memory up to a
//! budget, else as sorted runs in a temporary file merged back at the end (an external sort).
//! [`Lookup`] finds items by a string key in a temporary file (an open-addressing hash table
//! on disk), for indexes of a whole dataset version that memory should not hold.
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

/// Bytes of new records kept in memory before they are written to the records file.
const LOOKUP_BUFFER: usize = 1 << 20;
/// Bytes of one slot of a [`Lookup`]'s table: the key's hash (never 0: 0 is an empty slot) and
/// where its record is.
const SLOT: usize = 16;

/// Items of type `T` by a string key, on disk: a table of slots (hash, record offset) in one
/// unnamed temporary file, probed linearly and kept at most half full, and the records (key and
/// item as JSON, each length-prefixed) appended to another. Memory holds the write buffer only,
/// whatever the number of items; a lookup reads a slot or two and one record. A key inserted
/// again replaces its item.
pub struct Lookup<T> {
    table: std::fs::File,
    slots: u64,
    len: u64,
    records: std::fs::File,
    /// Records not yet written, which begin at offset `flushed`.
    buffer: Vec<u8>,
    flushed: u64,
    _items: PhantomData<T>,
}

impl<T: Serialize + DeserializeOwned> Lookup<T> {
    /// An empty lookup sized for about `capacity` items (it grows past that).
    pub fn new(capacity: u64) -> io::Result<Self> {
        let slots = capacity.saturating_mul(2).max(16).next_power_of_two();
        let table = tempfile::tempfile()?;
        table.set_len(slots * SLOT as u64)?;
        let records = tempfile::tempfile()?;
        Ok(Self { table, slots, len: 0, records, buffer: Vec::new(), flushed: 0, _items: PhantomData })
    }

    /// Items held.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A 64-bit hash of `key` that is never 0 (its low bit set; slots are chosen by the others).
    fn hash(key: &str) -> u64 {
        foldhash::quality::FixedState::with_seed(0x100c).hash_one(key) | 1
    }

    fn slot(&self, at: u64) -> io::Result<(u64, u64)> {
        let mut bytes = [0u8; SLOT];
        read_exact_at(&self.table, &mut bytes, at * SLOT as u64)?;
        let (hash, offset) = bytes.split_at(8);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
        Ok((word(hash), word(offset)))
    }

    fn set_slot(&self, at: u64, hash: u64, offset: u64) -> io::Result<()> {
        let mut bytes = [0u8; SLOT];
        bytes[..8].copy_from_slice(&hash.to_le_bytes());
        bytes[8..].copy_from_slice(&offset.to_le_bytes());
        write_all_at(&self.table, &bytes, at * SLOT as u64)
    }

    /// The key and item JSON of the record at `offset`.
    fn record(&self, offset: u64) -> io::Result<(Vec<u8>, Vec<u8>)> {
        let mut lengths = [0u8; 8];
        self.read(&mut lengths, offset)?;
        let key_len = u32::from_le_bytes([lengths[0], lengths[1], lengths[2], lengths[3]]) as usize;
        let item_len = u32::from_le_bytes([lengths[4], lengths[5], lengths[6], lengths[7]]) as usize;
        let mut bytes = vec![0u8; key_len + item_len];
        self.read(&mut bytes, offset + 8)?;
        let item = bytes.split_off(key_len);
        Ok((bytes, item))
    }

    /// Reads from the records, written or still in the buffer.
    fn read(&self, bytes: &mut [u8], at: u64) -> io::Result<()> {
        if at >= self.flushed {
            let start = (at - self.flushed) as usize;
            let held = self.buffer.get(start..start + bytes.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
            bytes.copy_from_slice(held);
            Ok(())
        } else {
            read_exact_at(&self.records, bytes, at)
        }
    }

    /// Where `key` is in the table: its slot and record offset, or the empty slot it would take.
    fn find(&self, key: &str, hash: u64) -> io::Result<(u64, Option<u64>)> {
        let mask = self.slots - 1;
        let mut at = (hash >> 1) & mask;
        loop {
            let (held, offset) = self.slot(at)?;
            if held == 0 {
                return Ok((at, None));
            }
            if held == hash && self.record(offset)?.0 == key.as_bytes() {
                return Ok((at, Some(offset)));
            }
            at = (at + 1) & mask;
        }
    }

    pub fn insert(&mut self, key: &str, item: &T) -> io::Result<()> {
        if (self.len + 1) * 2 > self.slots {
            self.grow()?;
        }
        let hash = Self::hash(key);
        let (at, found) = self.find(key, hash)?;
        let item = serde_json::to_vec(item).map_err(io::Error::other)?;
        let too_long = || io::Error::new(io::ErrorKind::InvalidInput, "a key or item over 4 GiB");
        let offset = self.flushed + self.buffer.len() as u64;
        self.buffer.extend_from_slice(&u32::try_from(key.len()).map_err(|_| too_long())?.to_le_bytes());
        self.buffer.extend_from_slice(&u32::try_from(item.len()).map_err(|_| too_long())?.to_le_bytes());
        self.buffer.extend_from_slice(key.as_bytes());
        self.buffer.extend_from_slice(&item);
        self.set_slot(at, hash, offset)?;
        if found.is_none() {
            self.len += 1;
        }
        if self.buffer.len() >= LOOKUP_BUFFER {
            write_all_at(&self.records, &self.buffer, self.flushed)?;
            self.flushed += self.buffer.len() as u64;
            self.buffer.clear();
        }
        Ok(())
    }

    /// The item of `key`, if there is one.
    pub fn get(&self, key: &str) -> io::Result<Option<T>> {
        match self.find(key, Self::hash(key))? {
            (_, Some(offset)) => {
                let item = self.record(offset)?.1;
                serde_json::from_slice(&item).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            }
            (_, None) => Ok(None),
        }
    }

    /// Twice the slots: every slot moved to a new table, read a block at a time.
    fn grow(&mut self) -> io::Result<()> {
        let old = std::mem::replace(&mut self.table, tempfile::tempfile()?);
        let old_slots = self.slots;
        self.slots *= 2;
        self.table.set_len(self.slots * SLOT as u64)?;
        let mask = self.slots - 1;
        let mut block = vec![0u8; 4096 * SLOT];
        let mut first = 0u64;
        while first < old_slots {
            let n = (old_slots - first).min(4096) as usize;
            read_exact_at(&old, &mut block[..n * SLOT], first * SLOT as u64)?;
            for slot in block[..n * SLOT].chunks_exact(SLOT) {
                let hash = u64::from_le_bytes(slot[..8].try_into().unwrap_or_default());
                if hash == 0 {
                    continue;
                }
                let offset = u64::from_le_bytes(slot[8..].try_into().unwrap_or_default());
                let mut at = (hash >> 1) & mask;
                while self.slot(at)?.0 != 0 {
                    at = (at + 1) & mask;
                }
                self.set_slot(at, hash, offset)?;
            }
            first += n as u64;
        }
        Ok(())
    }
}

/// Writes `bytes` to `file` at offset `at`, without moving a shared position.
#[cfg(unix)]
pub fn write_all_at(file: &std::fs::File, bytes: &[u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, at)
}

/// See the Unix version.
#[cfg(windows)]
pub fn write_all_at(file: &std::fs::File, mut bytes: &[u8], mut at: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, bytes, at)? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => {
                bytes = &bytes[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
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
    fn a_lookup_finds_every_key_past_its_capacity_and_its_buffer() {
        // A capacity far too small (the table grows) and items past the write buffer.
        let mut lookup: Lookup<(u64, String)> = Lookup::new(10).unwrap();
        let long = "x".repeat(600);
        for i in 0..5000u64 {
            lookup.insert(&format!("case-{i}-é"), &(i, format!("{i}{long}"))).unwrap();
        }
        assert_eq!(lookup.len(), 5000);
        assert!(lookup.flushed > 0, "records were written to the file");
        for i in (0..5000u64).step_by(7) {
            assert_eq!(lookup.get(&format!("case-{i}-é")).unwrap(), Some((i, format!("{i}{long}"))));
        }
        assert_eq!(lookup.get("case-5000-é").unwrap(), None);
        assert_eq!(lookup.get("").unwrap(), None);
        // Inserted again: replaced, not counted twice.
        lookup.insert("case-3-é", &(33, String::new())).unwrap();
        assert_eq!((lookup.len(), lookup.get("case-3-é").unwrap()), (5000, Some((33, String::new()))));
    }

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
