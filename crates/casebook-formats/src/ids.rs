//! The set of case ids seen so far in a file, for duplicate detection: 16 bytes a slot (a
//! 64-bit hash of the id and the line it was first seen on) in an open-addressing table that
//! grows by half, or is sized once from an estimate ([`IdTable::reserve`]): a million ids take
//! about 18 MB sized once, up to 27 MB grown, and never twice that while growing.
//!
//! The hashes are foldhash's quality hash with fixed seeds ([`key`], [`Hash64`]): they live only
//! as long as one read, are never stored and name nothing, so they need not be cryptographic
//! (BLAKE3 of every id and of every id-less row's rest was a tenth of `validate`'s time). Two
//! ids with the same 64-bit hash (about one chance in 10^7 among a million ids) would be
//! reported as a duplicate, as they were with BLAKE3's first 8 bytes; a fixed seed keeps that
//! reproducible.

use std::hash::{BuildHasher, Hasher};

/// Hashes of ids and their first lines.
#[derive(Debug, Default)]
pub struct IdTable {
    /// A hash and its line side by side, so that a probe of a table far bigger than the caches
    /// costs one miss, not two. A key of 0 marks an empty slot; a hash of 0 is stored as 1.
    slots: Vec<(u64, u32)>,
    len: usize,
}

impl IdTable {
    /// The hash of an id (never 0).
    pub fn key(id: &str) -> u64 {
        let mut hasher = Hash64::Id.hasher();
        hasher.write(id.as_bytes());
        hasher.finish().max(1)
    }

    /// The line `key` was first seen on, if it was.
    pub fn get(&self, key: u64) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = self.slot(key);
        loop {
            match self.slots[i] {
                (0, _) => return None,
                (k, line) if k == key => return Some(line),
                _ => i = if i + 1 == self.slots.len() { 0 } else { i + 1 },
            }
        }
    }

    /// Records `key` on `line` unless it is there already.
    pub fn insert(&mut self, key: u64, line: u32) {
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            self.grow((self.slots.len() * 3 / 2).max(1024));
        }
        let mut i = self.slot(key);
        loop {
            match self.slots[i] {
                (0, _) => {
                    self.slots[i] = (key, line);
                    self.len += 1;
                    return;
                }
                (k, _) if k == key => return,
                _ => i = if i + 1 == self.slots.len() { 0 } else { i + 1 },
            }
        }
    }

    /// The home slot of a key (the keys are uniform hashes: scale, don't mask).
    fn slot(&self, key: u64) -> usize {
        ((u128::from(key) * self.slots.len() as u128) >> 64) as usize
    }

    /// Makes room for `more` keys beyond those held, at once: a table grown by half again and
    /// again moves every key it holds each time, and at a million keys each move is a cache miss.
    pub fn reserve(&mut self, more: usize) {
        let wanted = (self.len + more).saturating_mul(8) / 7 + 1;
        if wanted > self.slots.len() {
            self.grow(wanted);
        }
    }

    fn grow(&mut self, capacity: usize) {
        let slots = std::mem::replace(&mut self.slots, vec![(0, 0); capacity]);
        self.len = 0;
        for (key, line) in slots.into_iter().filter(|(k, _)| *k != 0) {
            self.insert(key, line);
        }
    }
}

/// The in-memory hashes of a read, each with a seed of its own so that they are independent
/// (a row's content is named by the exclusive or of its task's id hash and its rest's hash).
#[derive(Debug, Clone, Copy)]
pub enum Hash64 {
    /// Case ids ([`IdTable::key`]).
    Id,
    /// The rest of a case whose row has no id ([`crate::layout::rest_key`]).
    Rest,
}

impl Hash64 {
    /// A hasher to feed bytes to.
    pub fn hasher(self) -> foldhash::quality::FoldHasher<'static> {
        let seed = match self {
            Hash64::Id => 0x6361_7365_6964_7331,
            Hash64::Rest => 0x6361_7365_7273_7432,
        };
        foldhash::quality::FixedState::with_seed(seed).build_hasher()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_holds_across_growth() {
        let mut table = IdTable::default();
        for i in 0..100_000u32 {
            let key = IdTable::key(&format!("case-{i}"));
            assert_eq!(table.get(key), None);
            table.insert(key, i + 1);
        }
        for i in (0..100_000u32).step_by(997) {
            assert_eq!(table.get(IdTable::key(&format!("case-{i}"))), Some(i + 1));
        }
        // The first line is kept.
        let key = IdTable::key("case-5");
        table.insert(key, 999_999);
        assert_eq!(table.get(key), Some(6));
        assert_eq!(table.get(IdTable::key("never")), None);
    }

    #[test]
    fn a_reserved_table_holds_what_it_was_given_before() {
        let mut table = IdTable::default();
        table.insert(IdTable::key("first"), 1);
        table.reserve(50_000);
        let slots = table.slots.len();
        assert!(slots * 7 >= 50_001 * 8, "{slots} slots");
        assert_eq!(table.get(IdTable::key("first")), Some(1));
        for i in 0..50_000u32 {
            table.insert(IdTable::key(&format!("case-{i}")), i + 2);
        }
        // No growth for what was reserved, and everything is found.
        assert_eq!(table.slots.len(), slots);
        assert_eq!(table.get(IdTable::key("case-49999")), Some(50_001));
        assert_eq!(table.get(IdTable::key("first")), Some(1));
    }
}
