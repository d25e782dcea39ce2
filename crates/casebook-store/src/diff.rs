//! Field-level differences between two versions of a case, as JSON Pointers with old and new
//! values.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub pointer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// The leaves where `old` and `new` differ. Objects are compared key by key; arrays of the same
/// length item by item; anything else that differs is one change.
pub fn field_changes(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk(&mut String::new(), Some(old), Some(new), &mut out);
    out
}

fn walk(pointer: &mut String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(a), Some(b)) if a == b => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys.cloned().collect::<Vec<_>>() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                walk(pointer, a.get(&key), b.get(&key), out);
                pointer.truncate(len);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                walk(pointer, Some(x), Some(y), out);
                pointer.truncate(len);
            }
        }
        (old, new) => out.push(FieldChange { pointer: pointer.clone(), old: old.cloned(), new: new.cloned() }),
    }
}

/// One list of a diff ([`crate::Store::diff_page`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffList {
    Added,
    Removed,
    Modified,
    Moved,
}

impl DiffList {
    pub const ALL: [DiffList; 4] = [DiffList::Added, DiffList::Removed, DiffList::Modified, DiffList::Moved];

    /// Its name in URLs and JSON: `added`, `removed`, `modified`, `moved`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiffList::Added => "added",
            DiffList::Removed => "removed",
            DiffList::Modified => "modified",
            DiffList::Moved => "moved",
        }
    }

    /// The list a name names (`None` for any other text).
    pub fn parse(text: &str) -> Option<DiffList> {
        DiffList::ALL.into_iter().find(|l| l.as_str() == text)
    }

    /// The SQL condition on a case's body row at `from` (`a`) and at `to` (`b`), `NULL` where the
    /// version does not hold it, that puts the case in this list (same text for both backends).
    pub(crate) fn condition(self) -> &'static str {
        match self {
            DiffList::Added => "a IS NULL AND b IS NOT NULL",
            DiffList::Removed => "a IS NOT NULL AND b IS NULL",
            DiffList::Modified => "a <> b",
            DiffList::Moved => "a = b",
        }
    }
}

/// How many cases each list of a diff holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DiffTotals {
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    /// Same content, new place in the order.
    pub moved: u64,
}

impl DiffTotals {
    /// The count of one list.
    pub fn of(&self, list: DiffList) -> u64 {
        match list {
            DiffList::Added => self.added,
            DiffList::Removed => self.removed,
            DiffList::Modified => self.modified,
            DiffList::Moved => self.moved,
        }
    }
}

/// A page of one list of a diff, in case id order (bytes): each case with its field changes
/// (only a modified case has any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiffPage {
    pub cases: Vec<crate::ModifiedCase>,
    /// The last id of the page when the list goes on after it (a page read backwards: when the
    /// list has cases before it), else `None`.
    pub more: Option<String>,
}

/// Where a page of a diff's list starts: just after an id, or (backwards) just before one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFrom<'a> {
    Start,
    After(&'a str),
    Before(&'a str),
}

/// The rows a diff reads (those that begin or end between the two versions), grouped per case
/// id into the body row at `from` (`a`) and at `to` (`b`): SQL for both backends, whose
/// parameters are the dataset (1), the span's low and high versions (2, 3), `from` (4) and `to`
/// (5), and, with `bound`, a case id (6) the rows are restricted to (`>` or `<` it). Only these
/// rows are read: a diff of two versions that share almost everything reads little whatever
/// their size (the indexes on `from_v` and `to_v`).
pub(crate) fn grouped_sql(bound: Option<&str>) -> String {
    let bound = bound.map_or_else(String::new, |op| format!(" AND m.case_id {op} $6"));
    format!(
        "WITH ch AS (
           SELECT case_id, from_v, to_v, blob FROM members m
           WHERE m.dataset = $1 AND m.from_v > 1 AND m.from_v > $2 AND m.from_v <= $3{bound}
           UNION ALL
           SELECT case_id, from_v, to_v, blob FROM members m
           WHERE m.dataset = $1 AND m.to_v > $2 AND m.to_v <= $3 AND NOT (m.from_v > $2 AND m.from_v <= $3){bound}
         ), g AS (
           SELECT case_id,
                  max(CASE WHEN from_v <= $4 AND (to_v IS NULL OR to_v > $4) THEN blob END) AS a,
                  max(CASE WHEN from_v <= $5 AND (to_v IS NULL OR to_v > $5) THEN blob END) AS b
           FROM ch GROUP BY case_id
         )"
    )
}

/// The totals query over [`grouped_sql`] (both backends).
pub(crate) fn totals_sql() -> String {
    format!(
        "{} SELECT count(CASE WHEN a IS NULL AND b IS NOT NULL THEN 1 END),
                   count(CASE WHEN a IS NOT NULL AND b IS NULL THEN 1 END),
                   count(CASE WHEN a <> b THEN 1 END),
                   count(CASE WHEN a = b THEN 1 END) FROM g",
        grouped_sql(None)
    )
}

/// A page query over [`grouped_sql`] (both backends): `size + 1` rows (the last says there are
/// more), the limit as parameter 7 (or 6 from the start).
pub(crate) fn page_sql(list: DiffList, from: DiffFrom<'_>) -> String {
    let (bound, order, limit) = match from {
        DiffFrom::Start => (None, "ASC", "$6"),
        DiffFrom::After(_) => (Some(">"), "ASC", "$7"),
        DiffFrom::Before(_) => (Some("<"), "DESC", "$7"),
    };
    format!(
        "{} SELECT case_id, a, b FROM g WHERE {} ORDER BY case_id {order} LIMIT {limit}",
        grouped_sql(bound),
        list.condition()
    )
}

/// Cuts the rows of a page query (`size + 1` at most, in the query's order) to a page: in id
/// order, with `more` set when the extra row was there.
pub(crate) fn cut<T>(
    mut rows: Vec<T>,
    size: usize,
    from: DiffFrom<'_>,
    id: impl Fn(&T) -> String,
) -> (Vec<T>, Option<String>) {
    let more = rows.len() > size;
    rows.truncate(size);
    let last = if more { rows.last().map(&id) } else { None };
    if matches!(from, DiffFrom::Before(_)) {
        rows.reverse();
    }
    (rows, last)
}

/// A page's rows (case id, body row at `from`, at `to`) as entries: a modified case with the
/// field changes between its two bodies (`bodies`: body row → text, whole).
pub(crate) fn entries(
    rows: Vec<(String, Option<i64>, Option<i64>)>,
    bodies: &std::collections::HashMap<i64, String>,
) -> Result<Vec<crate::ModifiedCase>, crate::StoreError> {
    let parse = |row: i64| -> Result<Value, crate::StoreError> {
        let text = bodies.get(&row).ok_or_else(|| crate::StoreError::Corrupt(format!("case body {row} is missing")))?;
        serde_json::from_str(text).map_err(crate::damaged_body)
    };
    rows.into_iter()
        .map(|(id, a, b)| {
            let changes = match (a, b) {
                (Some(a), Some(b)) if a != b => field_changes(&parse(a)?, &parse(b)?),
                _ => Vec::new(),
            };
            Ok(crate::ModifiedCase { id, changes })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_to_what_changed() {
        let old = json!({"id": "a", "input": "q", "expected": {"output": "4"}, "labels": ["x", "y"], "gone": 1});
        let new = json!({"id": "a", "input": "q?", "expected": {"output": "4"}, "labels": ["x", "z"], "new/key": 2});
        let changes = field_changes(&old, &new);
        let pointers: Vec<&str> = changes.iter().map(|c| c.pointer.as_str()).collect();
        assert_eq!(pointers, ["/input", "/labels/1", "/gone", "/new~1key"]);
        assert_eq!(changes[0].old, Some(json!("q")));
        assert_eq!(changes[3].old, None);
        assert_eq!(changes[3].new, Some(json!(2)));
    }
}
