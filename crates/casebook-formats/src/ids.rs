//! The set of case ids seen so far in a file, for duplicate detection: 12 bytes a case (a
//! 64-bit hash of the id and the line it was first seen on) in an open-addressing table that
//! grows by half, so a million ids take about 16 MB and never twice that while growing.
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
    /// 0 marks an empty slot; a hash of 0 is stored as 1.
    keys: Vec<u64>,
    lines: Vec<u32>,
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
        if self.keys.is_empty() {
            return None;
        }
        let mut i = self.slot(key);
        loop {
            match self.keys[i] {
                0 => return None,
                k if k == key => return Some(self.lines[i]),
                _ => i = if i + 1 == self.keys.len() { 0 } else { i + 1 },
            }
        }
    }

    /// Records `key` on `line` unless it is there already.
    pub fn insert(&mut self, key: u64, line: u32) {
        if (self.len + 1) * 8 > self.keys.len() * 7 {
            self.grow();
        }
        let mut i = self.slot(key);
        loop {
            match self.keys[i] {
                0 => {
                    self.keys[i] = key;
                    self.lines[i] = line;
                    self.len += 1;
                    return;
                }
                k if k == key => return,
                _ => i = if i + 1 == self.keys.len() { 0 } else { i + 1 },
            }
        }
    }

    /// The home slot of a key (the keys are uniform hashes: scale, don't mask).
    fn slot(&self, key: u64) -> usize {
        ((u128::from(key) * self.keys.len() as u128) >> 64) as usize
    }

    fn grow(&mut self) {
        let capacity = (self.keys.len() * 3 / 2).max(1024);
        let keys = std::mem::replace(&mut self.keys, vec![0; capacity]);
        let lines = std::mem::replace(&mut self.lines, vec![0; capacity]);
        self.len = 0;
        for (key, line) in keys.into_iter().zip(lines).filter(|(k, _)| *k != 0) {
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
}
