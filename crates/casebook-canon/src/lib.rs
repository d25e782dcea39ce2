//! Canonical JSON (RFC 8785) and BLAKE3 content ids: the one place where casebook decides what
//! "the same content" means. Every id is `BLAKE3(domain || 0x00 || canonical JSON)` in lowercase
//! hex, with a domain per kind of object so a case and a version can never share an id.

use serde::Serialize;

pub mod scan;
mod text;

/// What kind of object an id names. The domain string is hashed in front of the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Case,
    Task,
    Manifest,
    Version,
    /// What determines one run of a case against an agent (SPEC §8's run hash).
    Run,
    /// A seed file's document (its content as JSON), which a store keeps once however many
    /// cases name the file.
    Seed,
    /// The rest of a case whose row has no id (all but its id, task and provenance): what tells
    /// apart the rows of one task, in their derived ids.
    Variant,
}

impl Kind {
    /// The domain hashed in front of the content.
    pub fn domain(self) -> &'static str {
        match self {
            Kind::Case => "casebook/case/v1",
            Kind::Task => "casebook/task/v1",
            Kind::Manifest => "casebook/manifest/v1",
            Kind::Version => "casebook/version/v1",
            Kind::Run => "casebook/run/v1",
            Kind::Seed => "casebook/seed/v1",
            Kind::Variant => "casebook/variant/v1",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot canonicalize value: {0}")]
pub struct CanonError(String);

/// RFC 8785 canonical JSON text of `value`.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<String, CanonError> {
    serde_json_canonicalizer::to_string(value).map_err(|err| CanonError(err.to_string()))
}

/// The content id of `value` as an object of `kind`: 64 lowercase hex digits.
pub fn content_id<T: Serialize>(kind: Kind, value: &T) -> Result<String, CanonError> {
    Ok(hash(kind, &canonical_json(value)?))
}

/// RFC 8785 canonical form of the JSON text `text`: the same as [`canonical_json`] of the value
/// it denotes, at a sixth of the cost for text that `serde_json` wrote.
pub fn canonical_json_text(text: &str) -> Result<String, CanonError> {
    text::canonicalize(text)
}

/// The content id of the value that the JSON text `text` denotes: the same as [`content_id`] of
/// that value.
pub fn content_id_of_json(kind: Kind, text: &str) -> Result<String, CanonError> {
    Ok(id_hex(&content_id_bytes_of_json(kind, text)?))
}

/// [`content_id_of_json`] as 32 bytes.
pub fn content_id_bytes_of_json(kind: Kind, text: &str) -> Result<[u8; 32], CanonError> {
    Ok(hash_bytes(kind, &text::canonicalize(text)?))
}

fn hash(kind: Kind, canonical: &str) -> String {
    id_hex(&hash_bytes(kind, canonical))
}

fn hash_bytes(kind: Kind, canonical: &str) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(kind.domain().as_bytes());
    hasher.update(&[0]);
    hasher.update(canonical.as_bytes());
    *hasher.finalize().as_bytes()
}

/// The 32 bytes of a content id written as 64 hex digits, or `None` if it is not one.
pub fn id_bytes(id: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if id.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(id.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A content id's 32 bytes as 64 lowercase hex digits.
pub fn id_hex(bytes: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

/// The content id of a dataset version, fed its changes one by one so that a version of a
/// million cases is never held in memory:
/// `BLAKE3("casebook/version/v1" || 0x00 || canonical(head) || for each change: "\n" || canonical([case id, case content id]))`,
/// where `head` names the dataset, the parent version's id and the order (if it changed), and
/// the changes come in case-id order. A removed case's content id is the empty string (so the
/// store has always hashed it); `null` is for the order's list of ids.
pub struct VersionHasher(blake3::Hasher);

impl VersionHasher {
    pub fn new<T: Serialize>(head: &T) -> Result<Self, CanonError> {
        let mut hasher = blake3::Hasher::new();
        hasher.update(Kind::Version.domain().as_bytes());
        hasher.update(&[0]);
        hasher.update(canonical_json(head)?.as_bytes());
        Ok(Self(hasher))
    }

    pub fn change(&mut self, case_id: &str, content_id: Option<&str>) -> Result<(), CanonError> {
        // `canonical_json(&(case_id, content_id))`, written directly: a version of a million
        // cases makes a million calls. (serde_json escapes strings as RFC 8785 does.)
        let mut line = Vec::with_capacity(case_id.len() + 72);
        line.extend_from_slice(b"\n[");
        serde_json::to_writer(&mut line, case_id).map_err(|err| CanonError(err.to_string()))?;
        match content_id {
            Some(id) => {
                line.extend_from_slice(b",");
                serde_json::to_writer(&mut line, id).map_err(|err| CanonError(err.to_string()))?;
                line.extend_from_slice(b"]");
            }
            None => line.extend_from_slice(b",null]"),
        }
        self.0.update(&line);
        Ok(())
    }

    pub fn finish(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// The content id of the first version of dataset `dataset`: its cases as (case id, content id)
/// pairs, which must come in case-id order (byte order).
pub fn first_version_id<'a>(
    dataset: &str,
    cases: impl IntoIterator<Item = (&'a str, &'a [u8; 32])>,
) -> Result<String, CanonError> {
    let mut hasher = VersionHasher::new(&serde_json::json!({"dataset": dataset, "parent": null, "order": null}))?;
    for (id, cid) in cases {
        hasher.change(id, Some(&id_hex(cid)))?;
    }
    Ok(hasher.finish())
}

/// The id casebook gives a case whose source has none: `t-` and the first 16 hex digits of the
/// content id of its task half, so that re-ordering a file does not rename its cases.
pub fn derived_case_id<T: Serialize>(task: &T) -> Result<String, CanonError> {
    // Through JSON text and `canonical_json_text`, the same id as `content_id` at a fraction of
    // the cost: a third of a realistic file's rows have no id, and this was a fifth of reading it.
    let text = serde_json::to_string(task).map_err(|err| CanonError(err.to_string()))?;
    Ok(task_id(&content_id_bytes_of_json(Kind::Task, &text)?))
}

/// `t-` and the first 16 hex digits of a task's content id.
fn task_id(content_id: &[u8; 32]) -> String {
    let mut id = String::with_capacity(18);
    id.push_str("t-");
    push_hex(&mut id, &content_id[..8]);
    id
}

/// Appends `bytes` as lowercase hex digits.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
}

/// [`derived_case_id`] of the task `{"input": input}`, the whole task of most rows without an id
/// (letta's, for one), hashed in one call with its domain: its canonical form is the input as
/// `serde_json` writes a string (it escapes exactly what RFC 8785 escapes, the same way) inside
/// `{"input":…}` ([`scan::write_escaped`]).
pub fn derived_case_id_of_input(input: &str) -> String {
    let domain = Kind::Task.domain().as_bytes();
    let mut text = Vec::with_capacity(domain.len() + input.len() + 16);
    text.extend_from_slice(domain);
    text.push(0);
    text.extend_from_slice(b"{\"input\":");
    scan::write_escaped(input, &mut text);
    text.push(b'}');
    task_id(blake3::hash(&text).as_bytes())
}

/// What tells apart cases whose rows have no id and share a task: the content id
/// ([`Kind::Variant`]) of the rest of the case, taken as the case's JSON without its `id`, its
/// task's fields and its `provenance`. A row whose task an earlier row of the file has is named
/// after it, [`Variant::id`], so its id depends on its own content, not on its place among the
/// other rows of its task; only wholly identical rows are numbered. The default (all zero) is
/// for a rest that has no canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Variant([u8; 8]);

impl Variant {
    /// The variant of `rest`, the case's JSON without `id`, task fields and `provenance`.
    pub fn of<T: Serialize>(rest: &T) -> Result<Self, CanonError> {
        // Through JSON text, as `derived_case_id`: the same id as `content_id`, cheaper.
        let text = serde_json::to_string(rest).map_err(|err| CanonError(err.to_string()))?;
        let bytes = content_id_bytes_of_json(Kind::Variant, &text)?;
        let mut head = [0u8; 8];
        head.copy_from_slice(&bytes[..8]);
        Ok(Self(head))
    }

    /// The id of the `copy`th row of this content and task (1 for the first), `base` being the
    /// task's [`derived_case_id`]: `t-…-` and the first 8 hex digits of the variant's content
    /// id, then `-2`, `-3`, … for the second, third, … of wholly identical rows.
    pub fn id(&self, base: &str, copy: u64) -> String {
        let mut id = String::with_capacity(base.len() + 32);
        id.push_str(base);
        id.push('-');
        push_hex(&mut id, &self.0[..4]);
        if copy > 1 {
            id.push('-');
            id.push_str(&copy.to_string());
        }
        id
    }

    /// The first 8 bytes of the variant's content id, a number to tell identical rows by.
    pub fn key(&self) -> u64 {
        u64::from_be_bytes(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_number_spelling_do_not_change_the_id() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1.0,"a":{"y":"é","x":[1,2]}}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"a":{"x":[1,2],"y":"é"},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a).unwrap(), r#"{"a":{"x":[1,2],"y":"é"},"b":1}"#);
        assert_eq!(content_id(Kind::Case, &a).unwrap(), content_id(Kind::Case, &b).unwrap());
    }

    #[test]
    fn ids_go_to_bytes_and_back() {
        let id = content_id(Kind::Case, &json!({"input": "hi"})).unwrap();
        assert_eq!(id_hex(&id_bytes(&id).unwrap()), id);
        assert_eq!(id_bytes("abc"), None);
        assert_eq!(id_bytes(&"g".repeat(64)), None);
        assert_eq!(id_bytes(&format!("{}é", &id[..62])), None);
    }

    #[test]
    fn kinds_are_separate_domains() {
        let value = json!({"input": "hi"});
        assert_ne!(content_id(Kind::Case, &value).unwrap(), content_id(Kind::Task, &value).unwrap());
        assert_ne!(content_id(Kind::Case, &value).unwrap(), content_id(Kind::Seed, &value).unwrap());
    }
}
