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
//! "Changed" compares content ids, and only the cases [`Store::changed`] lists between B and H
//! can have changed on the head's side, so the other cases cost nothing.
//!
//! The incoming side may say that it was made with other content than B's for some cases
//! ([`Exceptions`]): a file pushed onto a head that kept changes made on the server holds its
//! own older content for those cases, and its next push names the version made as its base
//! with the content the file still holds for them. For such a case that content X is the base
//! of the rule: the file unchanged from X takes the head's case, a file changed from X is
//! taken where the head's case is still X, and is a conflict where the head's case is neither X
//! nor the file's (a change made on the server that the file never had).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{AnyStore, Prepared, Store, StoreError, prepare};

/// Cases whose content on the incoming side was, when it was made, not the base version's: by
/// id, the content id it held (`None`: it did not have the case).
pub type Exceptions = BTreeMap<String, Option<[u8; 32]>>;

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

/// A case the rule must look at: changed on the head's side since the base, or one of the
/// incoming side's [`Exceptions`].
#[derive(Debug, Clone)]
struct Changed {
    /// The content id the incoming side started from: the base's (`None` when the case was
    /// added since), or the exception's.
    base: Option<[u8; 32]>,
    /// The head's case; `None` when the head does not hold it.
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
    /// both; nothing when they are the same version), and the `except`ions of the incoming
    /// side. Both are versions (v1 or later).
    pub async fn between(
        store: &AnyStore,
        dataset: &str,
        base: u64,
        head: u64,
        except: &Exceptions,
    ) -> Result<Self, StoreError> {
        let mut changed = HashMap::new();
        if base != head {
            for case in store.changed(dataset, base, head).await? {
                let head = case.after.as_ref().map(prepare).transpose()?;
                changed.insert(case.id, Changed { base: case.before, head });
            }
        }
        for (id, content) in except {
            match changed.get_mut(id) {
                Some(case) => case.base = *content,
                None => {
                    let head = store.case(dataset, head, id).await?.as_ref().map(prepare).transpose()?;
                    changed.insert(id.clone(), Changed { base: *content, head });
                }
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
        } else if incoming == head || head == changed.base.as_ref() {
            // (The head as the incoming side started: only an exception can be so.)
            Choice::Incoming
        } else {
            Choice::Conflict
        }
    }

    /// Merges a whole dataset's cases, in batches as they are read, into the cases of the
    /// next version on the head; see [`WholeMerge`].
    pub fn whole(&self) -> WholeMerge<'_> {
        WholeMerge { changes: self, seen: HashSet::new(), conflicts: Vec::new(), kept: Exceptions::new() }
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
    kept: Exceptions,
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
                    if head.as_ref().map(|h| h.content_id) != Some(case.content_id) {
                        self.kept.insert(case.id, Some(case.content_id));
                    }
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
    /// then the result: the ids in conflict, in the order found, and the cases taken from the
    /// head.
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
                    if let Some(head) = head {
                        self.kept.insert(id.clone(), None);
                        out.push(*head);
                    }
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
    /// Cases changed only on the head's side since the base, kept as the head has them where
    /// the incoming side has other content, by id, with the incoming side's content: the
    /// [`Exceptions`] of the incoming side to the version made.
    pub kept: Exceptions,
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
        // a and b as the file has them (as at the base), f absent from it.
        let kept = Exceptions::from([("a".into(), Some([1; 32])), ("b".into(), Some([1; 32])), ("f".into(), None)]);
        assert_eq!(merged, Merged { conflicts: vec!["d".into()], kept });
    }

    /// The file pushed onto v4 kept the server's 1 and 3 and still holds its own older 1 (7)
    /// and no 3; the server changed 2 to 4 since, and reverted 5 to what the file holds (6).
    /// Pushed again with v4 as its base, those exceptions are what it started from.
    #[test]
    fn an_exception_is_what_the_incoming_side_started_from() {
        let mut changed = HashMap::new();
        changed.insert("1".into(), Changed { base: Some([7; 32]), head: Some(prepared("1", 3)) });
        changed.insert("2".into(), Changed { base: Some([7; 32]), head: Some(prepared("2", 4)) });
        changed.insert("3".into(), Changed { base: None, head: Some(prepared("3", 5)) });
        changed.insert("5".into(), Changed { base: Some([6; 32]), head: Some(prepared("5", 6)) });
        let changes = Changes { base: 4, head: 5, changed };
        // Still as the file started: the head's.
        assert_eq!(changes.choose("1", Some(&[7; 32])), Choice::Head(Some(Box::new(prepared("1", 3)))));
        assert_eq!(changes.choose("2", Some(&[7; 32])), Choice::Head(Some(Box::new(prepared("2", 4)))));
        assert_eq!(changes.choose("3", None), Choice::Head(Some(Box::new(prepared("3", 5)))));
        // Edited in the file from what it started from, where the head has something else: a
        // conflict (the file never had the server's change), unless it is the head's content.
        assert_eq!(changes.choose("1", Some(&[8; 32])), Choice::Conflict);
        assert_eq!(changes.choose("3", Some(&[8; 32])), Choice::Conflict);
        assert_eq!(changes.choose("2", Some(&[4; 32])), Choice::Incoming);
        // Where the head has what the file started from: the file's edit.
        assert_eq!(changes.choose("5", Some(&[8; 32])), Choice::Incoming);
        // Another case: the file's.
        assert_eq!(changes.choose("9", Some(&[8; 32])), Choice::Incoming);

        // A whole file that edited only 2's neighbour 9: the exceptions are kept again.
        let mut merge = changes.whole();
        let out = merge.batch(vec![prepared("1", 7), prepared("2", 7), prepared("5", 6), prepared("9", 8)]);
        let (rest, merged) = merge.finish();
        let ids: Vec<(String, u8)> = out.iter().chain(&rest).map(|p| (p.id.clone(), p.content_id[0])).collect();
        assert_eq!(ids, [("1", 3), ("2", 4), ("5", 6), ("9", 8), ("3", 5)].map(|(id, n)| (id.to_owned(), n)));
        // (5 is the head's and the file's: nothing to except.)
        let kept = Exceptions::from([("1".into(), Some([7; 32])), ("2".into(), Some([7; 32])), ("3".into(), None)]);
        assert_eq!(merged, Merged { conflicts: Vec::new(), kept });
    }
}
