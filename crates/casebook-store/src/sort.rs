//! Orders of a version's cases other than the version's own: by id, or by the value at a path
//! (`metadata.difficulty`, `-confidence` for descending), walked by a keyset cursor on (the
//! value's key, the case id) in both directions.
//!
//! The key of a value puts kinds in a stated order: numbers (by value), then strings (by their
//! UTF-8 bytes), then booleans (false, true), then null, then lists and objects (equal among
//! themselves: by id); a case without the field comes last in either direction. Descending
//! reverses the whole order but keeps the missing last. The key is computed in each backend's
//! SQL ([`sqlite_key`], [`pg_key`]), so a store sorts with a top-N over the version (and its
//! filter) and never reads the whole version into memory.

use casebook_filter::FieldPath;

/// How to order a page of cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Sort {
    pub by: SortBy,
    pub descending: bool,
}

/// What a [`Sort`] orders by.
#[derive(Debug, Clone, PartialEq)]
pub enum SortBy {
    /// The case id (as bytes).
    Id,
    /// The value at a path (not a label: labels hold several values).
    Field(FieldPath),
}

/// Rank of a missing value ascending (after every kind) and descending (before every kind, so
/// that a descending order puts it last too).
const MISSING_UP: i64 = 9;
const MISSING_DOWN: i64 = -1;

impl Sort {
    /// Reads `id`, `metadata.difficulty`, `-confidence` (a leading `-` for descending); `Ok(None)`
    /// for an empty text (the version's order). The error says what a sort may name.
    pub fn parse(text: &str) -> Result<Option<Sort>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let (descending, path) = match text.strip_prefix('-') {
            Some(rest) => (true, rest.trim()),
            None => (false, text),
        };
        let field = FieldPath::parse(path).map_err(|e| format!("sort `{text}`:\n{}", e.render(path)))?;
        if field.reads_labels() {
            return Err(format!(
                "sort `{text}`: labels hold several values and cannot order cases; sort by `id` or a field such as \
                 `metadata.difficulty` or `-confidence`"
            ));
        }
        let by = if field.is_id() { SortBy::Id } else { SortBy::Field(field) };
        Ok(Some(Sort { by, descending }))
    }

    /// The sort as [`Sort::parse`] reads it.
    pub fn text(&self) -> String {
        let path = match &self.by {
            SortBy::Id => "id".to_owned(),
            SortBy::Field(path) => path.to_string(),
        };
        if self.descending { format!("-{path}") } else { path }
    }

    fn missing(&self) -> i64 {
        if self.descending { MISSING_DOWN } else { MISSING_UP }
    }

    /// Whether the rows come from the SQL in ascending key order: forwards in an ascending sort,
    /// or backwards in a descending one.
    pub(crate) fn ascending(&self, backward: bool) -> bool {
        backward == self.descending
    }
}

/// Where a case is in a [`Sort`]: its value's kind, its number (or 0/1 for a boolean) or text,
/// and its id. A cursor of a sorted walk.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub rank: i64,
    pub num: f64,
    pub text: String,
    pub id: String,
}

/// Where a sorted page starts: just after `key`, or (backwards) just before it.
#[derive(Debug, Clone, PartialEq)]
pub struct SortSeek {
    pub key: SortKey,
    pub backward: bool,
}

/// A page of cases in a [`Sort`]'s order, with the keys of the pages around it: `next` only when
/// a selected case follows the page, `previous` only when one comes before it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SortedPage {
    pub bodies: Vec<String>,
    pub next: Option<SortKey>,
    pub previous: Option<SortKey>,
}

/// The SQL of a key, in three columns (`k_rank`, `k_num`, `k_text`), and the parameters its
/// text names in order.
pub(crate) struct KeySql {
    pub columns: String,
    pub params: Vec<casebook_filter::SqlParam>,
}

/// The key columns in SQLite, over the members `m` and (for a field in the facets) `f.facets` or
/// (otherwise) `b.body`: unnumbered parameters, which come before the selection's.
pub(crate) fn sqlite_key(sort: &Sort) -> KeySql {
    use casebook_filter::SqlParam;
    match &sort.by {
        SortBy::Id => KeySql { columns: "0 AS k_rank, 0.0 AS k_num, m.case_id AS k_text".into(), params: Vec::new() },
        SortBy::Field(path) => {
            let source = if path.in_facets() { "f.facets" } else { "b.body" };
            let missing = sort.missing();
            let columns = format!(
                "CASE json_type({source}, ?) WHEN 'integer' THEN 0 WHEN 'real' THEN 0 WHEN 'text' THEN 1
                   WHEN 'true' THEN 2 WHEN 'false' THEN 2 WHEN 'null' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 4
                   ELSE {missing} END AS k_rank,
                 CASE json_type({source}, ?) WHEN 'integer' THEN CAST(json_extract({source}, ?) AS REAL)
                   WHEN 'real' THEN CAST(json_extract({source}, ?) AS REAL) WHEN 'true' THEN 1.0 ELSE 0.0 END AS k_num,
                 CASE json_type({source}, ?) WHEN 'text' THEN json_extract({source}, ?) ELSE '' END AS k_text"
            );
            let json_path = path.sqlite_json_path();
            KeySql { columns, params: vec![SqlParam::Text(json_path); 6] }
        }
    }
}

/// The key columns in PostgreSQL, over the members `m` and `f.facets` or `b.body` (JSON text),
/// the path as parameter `$n` (a `text[]`, see [`FieldPath::pg_steps`]); `k_text` is bytes
/// (`bytea` compares as bytes, as SQLite compares text and as case ids compare).
pub(crate) fn pg_key(sort: &Sort, n: usize) -> String {
    match &sort.by {
        SortBy::Id => "0::int8 AS k_rank, 0::float8 AS k_num, m.case_id AS k_text".into(),
        SortBy::Field(path) => {
            let source = if path.in_facets() { "f.facets" } else { "b.body" };
            let missing = sort.missing();
            let value = format!("({source}::json #> ${n}::text[])");
            let text = format!("({source}::json #>> ${n}::text[])");
            format!(
                "(CASE json_typeof({value}) WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2
                   WHEN 'null' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 4 ELSE {missing} END)::int8 AS k_rank,
                 (CASE json_typeof({value}) WHEN 'number' THEN {text}::float8
                   WHEN 'boolean' THEN (CASE WHEN {text} = 'true' THEN 1 ELSE 0 END)::float8 ELSE 0 END)::float8 AS k_num,
                 (CASE json_typeof({value}) WHEN 'string' THEN convert_to({text}, 'UTF8') ELSE ''::bytea END) AS k_text"
            )
        }
    }
}

/// `ORDER BY` of the key columns and the id, ascending or descending.
pub(crate) fn order_by(id: &str, ascending: bool) -> String {
    let dir = if ascending { "" } else { " DESC" };
    format!("ORDER BY k_rank{dir}, k_num{dir}, k_text{dir}, {id}{dir}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_read_back_and_refuse_labels() {
        for text in ["id", "-id", "metadata.difficulty", "-confidence", "input[0].content"] {
            assert_eq!(Sort::parse(text).unwrap().unwrap().text(), text);
        }
        assert_eq!(Sort::parse("  ").unwrap(), None);
        assert_eq!(Sort::parse("-id").unwrap().unwrap(), Sort { by: SortBy::Id, descending: true });
        assert!(Sort::parse("label.category").unwrap_err().contains("labels hold several values"));
        assert!(Sort::parse("metadata.").unwrap_err().starts_with("sort `metadata.`:"));
    }
}
