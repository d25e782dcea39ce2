//! How a commit to the embedded store finds and stores case bodies by content id: looked up in
//! `blob_cids` (migration 0011), skipped when a filter of the stored content ids says they are
//! not there, stored when not found, and entered into `blob_cids` in content-id order once the
//! load is over.

use std::collections::{HashMap, HashSet};

use futures_util::TryStreamExt;
use sqlx::{AssertSqlSafe, Row, Sqlite, Transaction};

use crate::sqlite::{Listing, ROWS};
use crate::{Prepared, StoreError};

/// The bodies a commit stores, whose content ids it enters into `blob_cids` when its load is
/// over ([`NewBodies::enter`]): sorted, they go into the table's pages in one pass, where a
/// million bodies entered as they came, at random places, took half of the second import of a
/// large dataset (each dirtied a page of the table that the page cache could not keep).
///
/// A body stored by a commit is not looked up by its later chunks: within one commit bodies do
/// not repeat (each holds its case's id, and a commit that lists an id twice is refused; were
/// one to repeat, entering it twice would fail and the commit with it).
pub(crate) struct NewBodies {
    look_up: LookUp,
    /// Each new body's row id, with where its content id is in `keys`.
    blobs: Vec<i64>,
    keys: Keys,
}

/// Where [`NewBodies`] finds the content ids of the bodies it enters.
enum Keys {
    /// The places of their cases in the commit's [`Listing`] (a first version lists every case
    /// with its content id already: 4 bytes a body instead of 32).
    Listed(Vec<u32>),
    /// Their content ids.
    Own(Vec<[u8; 32]>),
}

/// How the cases' content ids are looked up.
enum LookUp {
    /// In a store that held no body when the commit began: never.
    Never,
    /// In `blob_cids`, each case's until [`StoredFilter`] is worth building, then only the
    /// cases the filter does not rule out.
    Table { stored: u64, looked: u64, filter: Option<StoredFilter> },
}

impl NewBodies {
    /// For a commit into a store that holds about `stored` bodies (the largest row id will do),
    /// whose new bodies' content ids are in the commit's [`Listing`] when `listed`.
    pub(crate) fn new(stored: i64, listed: bool) -> Self {
        let look_up = match stored {
            0 => LookUp::Never,
            n => LookUp::Table { stored: n as u64, looked: 0, filter: None },
        };
        let keys = if listed { Keys::Listed(Vec::new()) } else { Keys::Own(Vec::new()) };
        Self { look_up, blobs: Vec::new(), keys }
    }

    /// The row ids of the bodies of `chunk` (cases `first`, `first + 1`, … of the commit), each
    /// looked up by content id in `blob_cids` and stored if it is not there, and which cases'
    /// bodies were stored (the first case of each). `lengths`: the length each body must have
    /// if it is stored already (`None`: any, see `load`).
    pub(crate) async fn store(
        &mut self,
        tx: &mut Transaction<'_, Sqlite>,
        chunk: &mut [Prepared],
        lengths: &[Option<i64>],
        first: i64,
    ) -> Result<(Vec<i64>, Vec<usize>), StoreError> {
        let mut ids: HashMap<[u8; 32], i64> = HashMap::new();
        if let LookUp::Table { stored, looked, filter } = &mut self.look_up {
            // Scanning the table costs about what looking up an eighth of its rows does (the
            // lookups read pages at random): built once that many were looked up, the filter
            // at most doubles what a commit spends on lookups, and spares a large one most.
            if filter.is_none() && *looked >= (*stored / 8).max(10_000) {
                *filter = Some(StoredFilter::read(tx, *stored).await?);
            }
            let candidates: Vec<usize> = (0..chunk.len())
                .filter(|&i| filter.as_ref().is_none_or(|f| f.may_hold(&chunk[i].content_id)))
                .collect();
            if filter.is_none() {
                *looked += chunk.len() as u64;
            }
            if !candidates.is_empty() {
                ids = look_up(tx, chunk, lengths, &candidates).await?;
            }
        }
        // The others, once each.
        let mut stored = Vec::new();
        let mut seen = HashSet::new();
        for (i, case) in chunk.iter().enumerate() {
            if !ids.contains_key(&case.content_id) && seen.insert(case.content_id) {
                stored.push(i);
            }
        }
        if !stored.is_empty() {
            let last: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM blobs").fetch_one(&mut **tx).await?;
            let values = vec!["(?, ?)"; stored.len()].join(", ");
            let sql = format!("INSERT OR FAIL INTO blobs (cid, body) VALUES {values}");
            let mut query = sqlx::query(AssertSqlSafe(sql));
            // The bodies are moved into the statement (sqlx copies what it is lent).
            for &i in &stored {
                query = query.bind(&chunk[i].content_id[..]).bind(std::mem::take(&mut chunk[i].body));
            }
            query.execute(&mut **tx).await?;
            // SQLite gives new rows the ids after the last one, in order, unless the last is the
            // largest id there can be.
            let max: i64 = sqlx::query_scalar("SELECT max(id) FROM blobs").fetch_one(&mut **tx).await?;
            if max != last + stored.len() as i64 {
                return Err(StoreError::Corrupt(format!(
                    "the store's case bodies have row ids up to {last}: there is no room for more"
                )));
            }
            for (&i, blob) in stored.iter().zip(last + 1..) {
                ids.insert(chunk[i].content_id, blob);
                self.blobs.push(blob);
                match &mut self.keys {
                    Keys::Listed(places) => places.push(u32::try_from(first + i as i64).map_err(|_| too_many())?),
                    Keys::Own(cids) => cids.push(chunk[i].content_id),
                }
            }
        }
        Ok((chunk.iter().map(|case| ids[&case.content_id]).collect(), stored))
    }

    /// Enters the new bodies' content ids into `blob_cids`, in order; `listing` is the commit's,
    /// when the bodies were made [`NewBodies::new`] as listed.
    pub(crate) async fn enter(
        self,
        tx: &mut Transaction<'_, Sqlite>,
        listing: Option<&Listing>,
    ) -> Result<(), StoreError> {
        let cid = |k: usize| -> &[u8; 32] {
            match (&self.keys, listing) {
                (Keys::Listed(places), Some(listing)) => listing.content_id(places[k] as usize),
                (Keys::Own(cids), _) => &cids[k],
                (Keys::Listed(_), None) => unreachable!("listed new bodies are entered with their listing"),
            }
        };
        let mut order: Vec<u32> = (0..self.blobs.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| cid(a as usize).cmp(cid(b as usize)));
        for part in order.chunks(ROWS) {
            let values = vec!["(?, ?)"; part.len()].join(", ");
            let sql = format!("INSERT OR FAIL INTO blob_cids (cid, blob) VALUES {values}");
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for &k in part {
                query = query.bind(&cid(k as usize)[..]).bind(self.blobs[k as usize]);
            }
            query.execute(&mut **tx).await?;
        }
        Ok(())
    }
}

fn too_many() -> StoreError {
    StoreError::Corrupt("a commit of more than 4 billion cases".into())
}

/// The row ids of the cases `candidates` of `chunk` whose bodies are stored. A body stored
/// before is reused as it is: its row must be there, be JSON, name the same content id and have
/// the body's length, or the new version would be built on a damaged page (SQLite reads a row
/// only when asked for its columns).
async fn look_up(
    tx: &mut Transaction<'_, Sqlite>,
    chunk: &[Prepared],
    lengths: &[Option<i64>],
    candidates: &[usize],
) -> Result<HashMap<[u8; 32], i64>, StoreError> {
    let values = vec!["(?, ?)"; candidates.len()].join(", ");
    let sql = format!(
        "SELECT c.cid, c.blob, b.cid IS c.cid AND (v.column2 IS NULL OR octet_length(b.body) = v.column2)
                               AND json_valid(b.body)
         FROM (VALUES {values}) AS v CROSS JOIN blob_cids c ON c.cid = v.column1 LEFT JOIN blobs b ON b.id = c.blob"
    );
    let mut query = sqlx::query_as::<_, (Vec<u8>, i64, Option<bool>)>(AssertSqlSafe(sql));
    for &i in candidates {
        query = query.bind(&chunk[i].content_id[..]).bind(lengths[i]);
    }
    let found = query.fetch_all(&mut **tx).await?;
    let damaged = found.iter().filter(|(cid, _, sound)| cid.len() != 32 || *sound != Some(true)).count();
    if damaged > 0 {
        return Err(StoreError::Damaged(format!(
            "{damaged} of the case bodies this commit reuses are missing or not what was stored"
        )));
    }
    Ok(found.into_iter().filter_map(|(cid, blob, _)| Some((<[u8; 32]>::try_from(cid).ok()?, blob))).collect())
}

/// A Bloom filter of the content ids in `blob_cids`: a content id it does not hold is not
/// stored, and need not be looked up. About 10 bits a stored body (1.2 MiB a million, under 1 %
/// of new bodies looked up in vain), at most 16 MiB (a store of more than 13 million bodies gets
/// more false hits). Content ids are BLAKE3 hashes: their own bytes are the filter's hashes.
pub(crate) struct StoredFilter {
    bits: Vec<u64>,
    hashes: u32,
}

/// The filter's largest size, in bits.
const MAX_BITS: u64 = 16 * 8 * 1024 * 1024;

impl StoredFilter {
    /// Reads the content ids of `blob_cids`, which holds about `stored`.
    async fn read(tx: &mut Transaction<'_, Sqlite>, stored: u64) -> Result<Self, StoreError> {
        let mut filter = Self::with_room(stored);
        let mut rows = sqlx::query("SELECT cid FROM blob_cids").fetch(&mut **tx);
        while let Some(row) = rows.try_next().await? {
            // A content id that is not 32 bytes long matches no case's: left out.
            if let Ok(cid) = <[u8; 32]>::try_from(row.try_get::<&[u8], _>(0)?) {
                filter.insert(&cid);
            }
        }
        Ok(filter)
    }

    fn with_room(keys: u64) -> Self {
        let bits = (keys.max(1) * 10).next_multiple_of(64).min(MAX_BITS);
        // The number of hashes that makes false hits rarest: bits per key × ln 2.
        let hashes = ((bits as f64 / keys.max(1) as f64) * std::f64::consts::LN_2).round().clamp(1.0, 8.0) as u32;
        Self { bits: vec![0; (bits / 64) as usize], hashes }
    }

    /// The filter's bits for `cid`: from two of its 64-bit words, `a + i·b` (Kirsch and
    /// Mitzenmacher's double hashing).
    fn places(&self, cid: &[u8; 32]) -> impl Iterator<Item = usize> + use<> {
        let word = |i: usize| u64::from_le_bytes(cid[i..i + 8].try_into().unwrap_or_default());
        let (a, b) = (word(0), word(8) | 1);
        let size = self.bits.len() as u64 * 64;
        (0..u64::from(self.hashes)).map(move |i| (a.wrapping_add(i.wrapping_mul(b)) % size) as usize)
    }

    fn insert(&mut self, cid: &[u8; 32]) {
        for place in self.places(cid) {
            self.bits[place / 64] |= 1 << (place % 64);
        }
    }

    fn may_hold(&self, cid: &[u8; 32]) -> bool {
        self.places(cid).all(|place| self.bits[place / 64] & (1 << (place % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cid(n: u64) -> [u8; 32] {
        *blake3::hash(&n.to_le_bytes()).as_bytes()
    }

    #[test]
    fn the_filter_holds_every_content_id_put_in_and_few_others() {
        let mut filter = StoredFilter::with_room(100_000);
        for n in 0..100_000 {
            filter.insert(&cid(n));
        }
        assert!((0..100_000).all(|n| filter.may_hold(&cid(n))));
        let false_hits = (100_000..200_000).filter(|&n| filter.may_hold(&cid(n))).count();
        assert!(false_hits < 2_000, "{false_hits} false hits in 100,000");
    }

    #[test]
    fn a_filter_too_small_for_its_store_still_holds_every_content_id() {
        let mut filter = StoredFilter::with_room(1);
        for n in 0..1_000 {
            filter.insert(&cid(n));
        }
        assert!((0..1_000).all(|n| filter.may_hold(&cid(n))));
    }
}
