//! The three-way rule that keeps a write made on an older version from undoing what was
//! committed since: a push of a file pulled at a base version, a console edit saved after
//! someone else's commit. Given the base version B, the head H and the incoming cases, per case
//! id:
//!
//! - changed only by the incoming side: the incoming case is taken;
//! - changed only since the base (B → H): the head's case is kept;
//! - changed on both sides to different content: a conflict; to the same content: fine.
//!
//! A removal is a change like any other: a case removed since the base and unchanged in the
//! file stays removed; one removed from the file and unchanged since the base is removed.
//! "Changed" compares content ids, and only the cases [`Store::diff`] lists between B and H can
//! have changed on the head's side, so the other cases cost nothing.

use std::collections::{HashMap, HashSet};

use crate::{AnyStore, Prepared, Store, StoreError, prepare};

/// What the rule says for one case id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// The incoming side's (a case, or its absence): the head's side did not change it, or
    /// changed it to the same content.
    Incoming,
    /// The head's: the incoming side did not change it since the base. `None` when the head
    /// has no such case (it was removed since the base).
    Head(Option<Box<Prepared>>),
    /// Changed on both sides, to different content.
    Conflict,
}

/// A case that changed on the head's side since the base.
#[derive(Debug, Clone)]
struct Changed {
    /// Its content id at the base; `None` when it was added since.
    base: Option<[u8; 32]>,
    /// The head's case; `None` when it was removed since the base.
    head: Option<Prepared>,
}

/// The cases of a dataset that changed between a base version and the head, ready to decide
/// each incoming case by the three-way rule.
#[derive(Debug, Clone)]
pub struct Changes {
    pub base: u64,
    pub head: u64,
    changed: HashMap<String, Changed>,
}

impl Changes {
    /// The cases changed from version `base` to version `head` of `dataset` (their content at
    /// both; nothing when they are the same version). Both are versions (v1 or later).
    pub async fn between(store: &AnyStore, dataset: &str, base: u64, head: u64) -> Result<Self, StoreError> {
        let mut changed = HashMap::new();
        if base != head {
            let diff = store.diff(dataset, base, head).await?;
            let ids = diff.added.into_iter().chain(diff.removed).chain(diff.modified.into_iter().map(|m| m.id));
            for id in ids {
                let at_base = store.case(dataset, base, &id).await?.map(|c| prepare(&c)).transpose()?;
                let at_head = store.case(dataset, head, &id).await?.map(|c| prepare(&c)).transpose()?;
                changed.insert(id, Changed { base: at_base.map(|p| p.content_id), head: at_head });
            }
        }
        Ok(Self { base, head, changed })
    }

    /// Whether nothing changed on the head's side: every incoming case is taken as it is.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }

    /// The rule for case `id`, whose incoming content id is `incoming` (`None`: the incoming
    /// side removed it, or, for a whole dataset, does not have it).
    pub fn choose(&self, id: &str, incoming: Option<&[u8; 32]>) -> Choice {
        let Some(changed) = self.changed.get(id) else { return Choice::Incoming };
        let head = changed.head.as_ref().map(|p| &p.content_id);
        if incoming == changed.base.as_ref() {
            Choice::Head(changed.head.clone().map(Box::new))
        } else if incoming == head {
            Choice::Incoming
        } else {
            Choice::Conflict
        }
    }

    /// Merges a whole dataset's cases, in batches as they are read, into the cases of the
    /// next version on the head; see [`WholeMerge`].
    pub fn whole(&self) -> WholeMerge<'_> {
        WholeMerge { changes: self, seen: HashSet::new(), conflicts: Vec::new(), kept: 0 }
    }
}

/// The three-way rule over a whole dataset (a pushed file): each batch of incoming cases is
/// turned into what the next version holds in their place, and [`WholeMerge::finish`] adds
/// the cases the head gained that the file does not have. Only the ids of changed cases are
/// remembered, so memory grows with what changed since the base, not with the dataset.
pub struct WholeMerge<'a> {
    changes: &'a Changes,
    /// Changed ids the incoming side has.
    seen: HashSet<String>,
    conflicts: Vec<String>,
    kept: u64,
}

impl WholeMerge<'_> {
    /// The cases of the next version for this batch of incoming cases, in their order.
    pub fn batch(&mut self, batch: Vec<Prepared>) -> Vec<Prepared> {
        let mut out = Vec::with_capacity(batch.len());
        for case in batch {
            if self.changes.changed.contains_key(&case.id) {
                self.seen.insert(case.id.clone());
            }
            match self.changes.choose(&case.id, Some(&case.content_id)) {
                Choice::Incoming => out.push(case),
                Choice::Head(head) => {
                    self.kept += 1;
                    out.extend(head.map(|h| *h));
                }
                Choice::Conflict => self.conflicts.push(case.id),
            }
        }
        out
    }

    /// Whether a case so far changed on both sides.
    pub fn has_conflicts(&self) -> bool {
        !self.conflicts.is_empty()
    }

    /// The result when the incoming cases are added or replace those with their ids (an
    /// upsert: the cases the incoming side lacks are left as the head has them).
    pub fn upserted(self) -> Merged {
        Merged { conflicts: self.conflicts, kept: self.kept }
    }

    /// The cases the head has that the incoming side lacks and keeps (added since the base),
    /// then the result: the ids in conflict, in the order found, and how many cases were
    /// taken from the head.
    pub fn finish(mut self) -> (Vec<Prepared>, Merged) {
        let mut rest: Vec<(&String, &Changed)> =
            self.changes.changed.iter().filter(|(id, _)| !self.seen.contains(*id)).collect();
        // In id order: the map's order is random, a version's must not be.
        rest.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = Vec::new();
        for (id, _) in rest {
            match self.changes.choose(id, None) {
                Choice::Incoming => {}
                Choice::Head(head) => {
                    self.kept += 1;
                    out.extend(head.map(|h| *h));
                }
                Choice::Conflict => self.conflicts.push(id.clone()),
            }
        }
        (out, Merged { conflicts: self.conflicts, kept: self.kept })
    }
}

/// What a three-way merge of a whole dataset found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merged {
    /// Ids changed on both sides to different content: nothing may be written.
    pub conflicts: Vec<String>,
    /// Cases changed only on the head's side since the base, kept as the head has them.
    pub kept: u64,
}

/// Ids as a message lists them: in backticks, the first 20, and how many more.
pub(crate) fn listed(ids: &[String]) -> String {
    let mut text: Vec<String> = ids.iter().take(20).map(|id| format!("`{}`", casebook_model::excerpt(id))).collect();
    if ids.len() > 20 {
        text.push(format!("and {} more", ids.len() - 20));
    }
    text.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(id: &str, n: u8) -> Prepared {
        Prepared {
            id: id.into(),
            content_id: [n; 32],
            body: String::new(),
            seeds: Vec::new(),
            labels: Vec::new(),
            facets: String::new(),
        }
    }

    /// Base: a=1 b=1 c=1 d=1 e=1; head: a=2 (modified) b removed, c=1, d=3, f=4 (added), e=1.
    fn changes() -> Changes {
        let mut changed = HashMap::new();
        changed.insert("a".into(), Changed { base: Some([1; 32]), head: Some(prepared("a", 2)) });
        changed.insert("b".into(), Changed { base: Some([1; 32]), head: None });
        changed.insert("d".into(), Changed { base: Some([1; 32]), head: Some(prepared("d", 3)) });
        changed.insert("f".into(), Changed { base: None, head: Some(prepared("f", 4)) });
        Changes { base: 1, head: 2, changed }
    }

    #[test]
    fn each_side_keeps_what_only_it_changed() {
        let changes = changes();
        // Unchanged in the file: the head's, removal included.
        assert_eq!(changes.choose("a", Some(&[1; 32])), Choice::Head(Some(Box::new(prepared("a", 2)))));
        assert_eq!(changes.choose("b", Some(&[1; 32])), Choice::Head(None));
        // Unchanged on the head: the file's, removal included.
        assert_eq!(changes.choose("c", Some(&[9; 32])), Choice::Incoming);
        assert_eq!(changes.choose("c", None), Choice::Incoming);
        // Both sides, the same content (a removal on both sides too): fine.
        assert_eq!(changes.choose("d", Some(&[3; 32])), Choice::Incoming);
        assert_eq!(changes.choose("b", None), Choice::Incoming);
        // Both sides, different content; a removal against a change.
        assert_eq!(changes.choose("d", Some(&[5; 32])), Choice::Conflict);
        assert_eq!(changes.choose("d", None), Choice::Conflict);
        assert_eq!(changes.choose("b", Some(&[5; 32])), Choice::Conflict);
        // Added on both sides with different content.
        assert_eq!(changes.choose("f", Some(&[5; 32])), Choice::Conflict);
    }

    #[test]
    fn a_whole_file_keeps_the_heads_changes_in_its_order() {
        let changes = changes();
        let mut merge = changes.whole();
        // The file: a as at the base, b as at the base, c edited, e as it was, g new.
        let out = merge.batch(vec![prepared("a", 1), prepared("b", 1), prepared("c", 7), prepared("e", 1)]);
        let out2 = merge.batch(vec![prepared("g", 8)]);
        let (rest, merged) = merge.finish();
        let ids: Vec<(String, u8)> =
            out.iter().chain(&out2).chain(&rest).map(|p| (p.id.clone(), p.content_id[0])).collect();
        let want = [("a", 2), ("c", 7), ("e", 1), ("g", 8), ("f", 4)];
        assert_eq!(ids, want.map(|(id, n)| (id.to_owned(), n)));
        // d: changed on the head, absent from the file (removed there): a conflict.
        assert_eq!(merged, Merged { conflicts: vec!["d".into()], kept: 3 });
    }
}
