//! Labels that look like typos of other labels: `Math` beside `math` (letter case), `regresion`
//! beside `regression` (spelling), `catgory:RCA` beside `category:…` (a label's key).
//!
//! Plain tags are compared with plain tags, the values of `key:value` labels with the values of
//! the same key (`difficulty:easy` and `difficulty:hard` are different on purpose), and keys
//! with keys. Of two look-alikes the rarer is reported, with the more common as the suggestion.
//! Labels that differ in their digits (`tier-1`, `tier-2`) are never typos of each other, and
//! short ones only differ by letter case: `bug` and `big` are both words.

use std::collections::HashMap;

use casebook_model::edit_distance;

/// Distinct labels kept at most; past it, new labels are not counted (and the check says so).
pub const MAX_LABELS: usize = 100_000;
/// Distinct spellings in one group compared pair by pair at most.
pub const MAX_GROUP: usize = 2_000;

/// A label and the first case that has it.
#[derive(Debug, Clone)]
pub struct LabelUse<P> {
    pub count: u64,
    /// Order of first appearance.
    pub seen: u64,
    /// The first case with the label, and the label's index in its list.
    pub first: P,
}

/// A label reported as a look-alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typo {
    /// The rare spelling, and the label where it first appears.
    pub label: String,
    pub suggestion: String,
    pub count: u64,
    pub suggestion_count: u64,
    /// Whether the two differ only in letter case.
    pub case_only: bool,
    /// Whether the key of `key:value` labels is what looks wrong (`label`, `suggestion` are keys).
    pub key: bool,
}

/// The labels of a dataset, counted.
#[derive(Debug)]
pub struct Labels<P> {
    uses: HashMap<String, LabelUse<P>>,
    seen: u64,
    /// Whether labels were left uncounted ([`MAX_LABELS`]).
    pub capped: bool,
}

impl<P: Clone> Default for Labels<P> {
    fn default() -> Self {
        Self { uses: HashMap::new(), seen: 0, capped: false }
    }
}

impl<P: Clone> Labels<P> {
    /// Counts `label`; `first` is called for a label not seen before.
    pub fn add(&mut self, label: &str, first: impl FnOnce() -> P) {
        if let Some(used) = self.uses.get_mut(label) {
            used.count += 1;
            return;
        }
        if self.uses.len() >= MAX_LABELS {
            self.capped = true;
            return;
        }
        self.seen += 1;
        self.uses.insert(label.to_owned(), LabelUse { count: 1, seen: self.seen, first: first() });
    }

    /// The look-alikes, each with the first use of its rare spelling (for a key, of the first
    /// label with that key), in order of first appearance; and the groups too large to compare.
    pub fn typos(&self) -> (Vec<(Typo, P)>, Vec<String>) {
        let mut plain = Vec::new();
        let mut values: HashMap<&str, Vec<Item<'_>>> = HashMap::new();
        let mut keys: HashMap<&str, Item<'_>> = HashMap::new();
        for (label, used) in &self.uses {
            let item = Item { text: label, count: used.count, seen: used.seen };
            match label.split_once(':') {
                Some((key, value)) if !key.is_empty() => {
                    values.entry(key).or_default().push(Item { text: value, ..item });
                    let entry = keys.entry(key).or_insert(Item { text: key, count: 0, seen: used.seen });
                    entry.count += used.count;
                    entry.seen = entry.seen.min(used.seen);
                }
                _ => plain.push(item),
            }
        }
        let mut found = Vec::new();
        let mut skipped = Vec::new();
        // The label where a spelling (of a plain tag, or of a value under `key`) first appears.
        let first_of = |key: Option<&str>, text: &str| -> Option<&LabelUse<P>> {
            match key {
                Some(key) => self.uses.get(&format!("{key}:{text}")),
                None => self.uses.get(text),
            }
        };
        let report = |key: Option<&str>, pair: Pair<'_>, found: &mut Vec<(Typo, P, u64)>| {
            let (label, suggestion) = match key {
                Some(key) => (format!("{key}:{}", pair.rare.text), format!("{key}:{}", pair.common.text)),
                None => (pair.rare.text.to_owned(), pair.common.text.to_owned()),
            };
            if let Some(used) = first_of(key, pair.rare.text) {
                let typo = Typo {
                    label,
                    suggestion,
                    count: pair.rare.count,
                    suggestion_count: pair.common.count,
                    case_only: pair.case_only,
                    key: false,
                };
                found.push((typo, used.first.clone(), used.seen));
            }
        };
        let mut all = Vec::new();
        match look_alikes(&plain) {
            Some(pairs) => pairs.into_iter().for_each(|pair| report(None, pair, &mut all)),
            None => skipped.push(format!("{} distinct plain labels", plain.len())),
        }
        for (key, items) in &values {
            match look_alikes(items) {
                Some(pairs) => pairs.into_iter().for_each(|pair| report(Some(key), pair, &mut all)),
                None => skipped.push(format!("{} distinct values of `{key}:`", items.len())),
            }
        }
        let keys: Vec<Item<'_>> = keys.into_values().collect();
        match look_alikes(&keys) {
            Some(pairs) => {
                for pair in pairs {
                    // The first label with the rare key.
                    let first = self
                        .uses
                        .iter()
                        .filter(|(label, _)| label.split_once(':').is_some_and(|(k, _)| k == pair.rare.text))
                        .min_by_key(|(_, used)| used.seen);
                    if let Some((_, used)) = first {
                        let typo = Typo {
                            label: pair.rare.text.to_owned(),
                            suggestion: pair.common.text.to_owned(),
                            count: pair.rare.count,
                            suggestion_count: pair.common.count,
                            case_only: pair.case_only,
                            key: true,
                        };
                        all.push((typo, used.first.clone(), used.seen));
                    }
                }
            }
            None => skipped.push(format!("{} distinct label keys", keys.len())),
        }
        all.sort_by_key(|(_, _, seen)| *seen);
        found.extend(all.into_iter().map(|(typo, first, _)| (typo, first)));
        (found, skipped)
    }
}

#[derive(Debug, Clone, Copy)]
struct Item<'a> {
    text: &'a str,
    count: u64,
    seen: u64,
}

struct Pair<'a> {
    rare: Item<'a>,
    common: Item<'a>,
    case_only: bool,
}

/// Whether `a` is more common than `b` (or as common and seen first).
fn before(a: &Item<'_>, b: &Item<'_>) -> bool {
    (a.count, std::cmp::Reverse(a.seen)) > (b.count, std::cmp::Reverse(b.seen))
}

/// The look-alikes among `items`, each rare spelling once with its best suggestion; `None` when
/// there are too many spellings to compare pair by pair.
fn look_alikes<'a>(items: &[Item<'a>]) -> Option<Vec<Pair<'a>>> {
    // Spellings that differ in letter case only: each but the most common is a look-alike.
    let mut folded: HashMap<String, Vec<Item<'a>>> = HashMap::new();
    for item in items {
        folded.entry(item.text.to_lowercase()).or_default().push(*item);
    }
    let mut pairs = Vec::new();
    let mut forms: Vec<(String, Item<'a>)> = Vec::with_capacity(folded.len());
    for (lower, mut group) in folded {
        group.sort_by_key(|item| (std::cmp::Reverse(item.count), item.seen));
        let canonical = group[0];
        for rare in &group[1..] {
            pairs.push(Pair { rare: *rare, common: canonical, case_only: true });
        }
        let total = group.iter().map(|i| i.count).sum();
        forms.push((lower, Item { count: total, ..canonical }));
    }
    if forms.len() > MAX_GROUP {
        return None;
    }
    // Spellings a typo apart: the rarer of each pair, with the most common of its look-alikes.
    let chars: Vec<Vec<char>> = forms.iter().map(|(lower, _)| lower.chars().collect()).collect();
    let mut best: Vec<Option<usize>> = vec![None; forms.len()];
    for i in 0..forms.len() {
        for j in i + 1..forms.len() {
            if !typo_apart(&forms[i].0, &chars[i], &forms[j].0, &chars[j]) {
                continue;
            }
            let (rare, common) = if before(&forms[i].1, &forms[j].1) { (j, i) } else { (i, j) };
            if best[rare].is_none_or(|b| before(&forms[common].1, &forms[b].1)) {
                best[rare] = Some(common);
            }
        }
    }
    for (rare, common) in best.iter().enumerate() {
        if let Some(common) = common {
            pairs.push(Pair { rare: forms[rare].1, common: forms[*common].1, case_only: false });
        }
    }
    Some(pairs)
}

/// Whether two lower-case spellings are a typo apart: one edit for five characters or more, two
/// for ten or more, and the same digits.
fn typo_apart(a: &str, a_chars: &[char], b: &str, b_chars: &[char]) -> bool {
    let shorter = a_chars.len().min(b_chars.len());
    let allowed = match shorter {
        10.. => 2,
        5.. => 1,
        _ => return false,
    };
    if a_chars.len().abs_diff(b_chars.len()) > allowed {
        return false;
    }
    if !a.chars().filter(char::is_ascii_digit).eq(b.chars().filter(char::is_ascii_digit)) {
        return false;
    }
    let distance = edit_distance(a, b);
    distance > 0 && distance <= allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typos(labels: &[(&str, u64)]) -> Vec<(String, String, bool, bool)> {
        let mut counted: Labels<usize> = Labels::default();
        for (i, (label, n)) in labels.iter().enumerate() {
            for _ in 0..*n {
                counted.add(label, || i);
            }
        }
        counted.typos().0.into_iter().map(|(t, _)| (t.label, t.suggestion, t.case_only, t.key)).collect()
    }

    fn t(label: &str, suggestion: &str, case_only: bool, key: bool) -> (String, String, bool, bool) {
        (label.to_owned(), suggestion.to_owned(), case_only, key)
    }

    #[test]
    fn the_rarer_spelling_is_the_typo() {
        assert_eq!(typos(&[("regression", 5), ("regresion", 2)]), [t("regresion", "regression", false, false)]);
        assert_eq!(typos(&[("Math", 1), ("math", 9)]), [t("Math", "math", true, false)]);
        // As common: the later one is reported.
        assert_eq!(typos(&[("colour", 1), ("color", 1)]), [t("color", "colour", false, false)]);
    }

    #[test]
    fn values_compare_within_their_key_and_keys_with_keys() {
        assert_eq!(
            typos(&[("difficulty:easy", 4), ("difficulty:hard", 4), ("category:latency", 3), ("category:latncy", 1)]),
            [t("category:latncy", "category:latency", false, false)]
        );
        assert_eq!(
            typos(&[("category:RCA", 8), ("catgory:RCA", 1), ("category:latency", 2)]),
            [t("catgory", "category", false, true)]
        );
    }

    #[test]
    fn different_digits_short_words_and_far_words_are_not_typos() {
        assert!(typos(&[("tier-1", 3), ("tier-2", 3), ("bug", 4), ("big", 1), ("input", 2), ("output", 2)]).is_empty());
        assert!(typos(&[("v2024-01", 3), ("v2024-02", 3), ("refunds", 3), ("billing", 2)]).is_empty());
    }

    #[test]
    fn too_many_distinct_values_are_skipped_and_said() {
        let mut counted: Labels<()> = Labels::default();
        for i in 0..MAX_GROUP + 1 {
            counted.add(&format!("user:u{i:05}x"), || ());
        }
        let (found, skipped) = counted.typos();
        assert!(found.is_empty());
        assert_eq!(skipped, [format!("{} distinct values of `user:`", MAX_GROUP + 1)]);
    }
}
