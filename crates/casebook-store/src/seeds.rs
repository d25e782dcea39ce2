//! Seed documents kept once: what every backend calls to store a case that carries a seed file
//! ([`MemorySeeds::File`](casebook_model::MemorySeeds::File)) or a tool's snapshot file
//! ([`Responses::File`](casebook_model::Responses::File)) without storing the file's document
//! with each such case. A snapshot file's place is `tools[i].responses`; it is kept exactly as
//! a seed file's, described below for `memory_seeds`.
//!
//! A case's body as stored (*compact*) holds `"memory_seeds": {"file": F, "content_id": ID}`
//! where the case itself has `{"file": F, "content": DOCUMENT}`; `ID` is the document's content
//! id (`casebook_canon::Kind::Seed`, 64 hex digits), and the backend keeps one row
//! `(ID, DOCUMENT)` however many cases name that document. Everything else in the body is the
//! case's JSON text as it was, byte for byte, so the *expanded* body (the reference replaced by
//! the document again) is exactly `serde_json::to_string(&case)`, and the case's content id is
//! computed from it as before: ids of cases and versions do not depend on how bodies are kept.
//!
//! A backend
//! - writes [`Prepared::body`](crate::Prepared) (compact when the case has a seed file) and,
//!   for [`Prepared::seed`](crate::Prepared), a row `(content_id, document)` unless it has one;
//! - after reading bodies, asks [`SeedDocuments::missing`] which documents they refer to that it
//!   has not fetched yet, gives them to [`SeedDocuments::insert`], and returns
//!   [`SeedDocuments::expand`] of each body. A body without a reference (no seed file, or one
//!   stored whole before seed documents were kept apart) comes back as it is, at the cost of a
//!   substring search.

use std::collections::HashMap;

use casebook_canon::{Kind, content_id_bytes_of_json, id_bytes, id_hex};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::StoreError;

/// A seed file's document as a store keeps it: once, by content id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedDocument {
    /// The document's content id (`casebook_canon::Kind::Seed`), as bytes.
    pub content_id: [u8; 32],
    /// The document as JSON text (as `serde_json` writes it inside the case's body).
    pub document: String,
}

/// The key of the case's top-level object that holds the seeds.
const SEEDS_KEY: &str = "memory_seeds";
/// The key of the case's top-level object that holds its tools, and of a tool's snapshot.
const TOOLS_KEY: &str = "tools";
const RESPONSES_KEY: &str = "responses";
/// What every body with a seed file holds, compact or not (keys quoted, as JSON text has them;
/// quotes inside strings are escaped, so this is structure, not text). Looked for in every body
/// read, hence a searcher built once.
static MARKER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""memory_seeds":{"file":"#));
/// What every body with a tool's snapshot file holds ([`Responses::File`], kept apart as seed
/// files are).
///
/// [`Responses::File`]: casebook_model::Responses::File
static SNAPSHOT_MARKER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""responses":{"file":"#));
/// Whether JSON text (one body or many) may refer to a document kept apart.
pub(crate) fn may_refer(text: &[u8]) -> bool {
    MARKER.find(text).is_some() || SNAPSHOT_MARKER.find(text).is_some()
}

/// Documents kept by [`SeedDocuments`] before it forgets them all (it fetches them again).
const CACHE_BYTES: usize = 64 << 20;

/// A document's place in a full body, the content left as its text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Whole<'a> {
    file: String,
    #[serde(borrow)]
    content: &'a RawValue,
}

/// A document's place in a compact body.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    file: String,
    content_id: String,
}

/// The members of a JSON object in order, each value as its text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    out.push((key, value));
                }
                Ok(Members(out))
            }
        }
        deserializer.deserialize_map(Each)
    }
}

impl Members<'_> {
    fn parse(body: &str) -> Result<Members<'_>, StoreError> {
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt(format!("a case body is not a JSON object: {e}")))
    }

    /// The object again, each member whose `replaced` entry is given written as that text: the
    /// same text as the object was parsed from where nothing is replaced (`serde_json` writes
    /// compact JSON, and keys as it read them).
    fn write(&self, capacity: usize, replaced: &[Option<String>]) -> Result<String, StoreError> {
        let mut out = String::with_capacity(capacity);
        out.push('{');
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key).map_err(|e| StoreError::Corrupt(e.to_string()))?);
            out.push(':');
            match replaced.get(i).and_then(Option::as_deref) {
                Some(text) => out.push_str(text),
                None => out.push_str(value.get()),
            }
        }
        out.push('}');
        Ok(out)
    }
}

/// Rewrites the places of a case's body where a document kept apart may sit (`memory_seeds`,
/// and each tool's `responses`): `each` gets the JSON text of one and returns what replaces
/// it, or `None` to keep it. `None` when nothing was replaced.
fn rewrite(
    body: &str,
    each: &mut dyn FnMut(&str) -> Result<Option<String>, StoreError>,
) -> Result<Option<String>, StoreError> {
    if !may_refer(body.as_bytes()) {
        return Ok(None);
    }
    let members = Members::parse(body)?;
    let mut replaced: Vec<Option<String>> = vec![None; members.0.len()];
    for (i, (key, value)) in members.0.iter().enumerate() {
        replaced[i] = match key.as_str() {
            SEEDS_KEY if MARKER.find(body.as_bytes()).is_some() => each(value.get())?,
            TOOLS_KEY if SNAPSHOT_MARKER.find(value.get().as_bytes()).is_some() => rewrite_tools(value.get(), each)?,
            _ => None,
        };
    }
    if replaced.iter().all(Option::is_none) {
        return Ok(None);
    }
    Ok(Some(members.write(body.len(), &replaced)?))
}

/// [`rewrite`] of the `responses` of each tool of a `tools` list.
fn rewrite_tools(
    tools: &str,
    each: &mut dyn FnMut(&str) -> Result<Option<String>, StoreError>,
) -> Result<Option<String>, StoreError> {
    let list: Vec<&RawValue> =
        serde_json::from_str(tools).map_err(|e| StoreError::Corrupt(format!("a case's tools are not a list: {e}")))?;
    let mut out = String::with_capacity(tools.len());
    let mut changed = false;
    out.push('[');
    for (i, tool) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let text = tool.get();
        let mut written = None;
        if SNAPSHOT_MARKER.find(text.as_bytes()).is_some() {
            let members = Members::parse(text)?;
            let mut replaced: Vec<Option<String>> = vec![None; members.0.len()];
            for (j, (key, value)) in members.0.iter().enumerate() {
                if key == RESPONSES_KEY {
                    replaced[j] = each(value.get())?;
                }
            }
            if replaced.iter().any(Option::is_some) {
                written = Some(members.write(text.len(), &replaced)?);
            }
        }
        match written {
            Some(w) => {
                changed = true;
                out.push_str(&w);
            }
            None => out.push_str(text),
        }
    }
    out.push(']');
    Ok(changed.then_some(out))
}

/// The compact body of a case whose full body (`serde_json::to_string(&case)`) is `body`, and
/// the documents it refers to (its seed file's, its tools' snapshot files'); `None` when the
/// case carries no such file (its body is stored as it is). Called by [`crate::prepare`].
pub fn compact(body: &str) -> Result<Option<(String, Vec<SeedDocument>)>, StoreError> {
    let mut documents = Vec::new();
    let compact = rewrite(body, &mut |place| {
        let Ok(whole) = serde_json::from_str::<Whole<'_>>(place) else { return Ok(None) };
        let document = whole.content.get();
        let content_id = document_id(document)?;
        let reference = Reference { file: whole.file, content_id: id_hex(&content_id) };
        let reference = serde_json::to_string(&reference).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        if !documents.iter().any(|d: &SeedDocument| d.content_id == content_id) {
            documents.push(SeedDocument { content_id, document: document.to_owned() });
        }
        Ok(Some(reference))
    })?;
    Ok(compact.map(|compact| (compact, documents)))
}

/// The content id of a seed document. Cases that share a seed file come one after another, and
/// its document may be large: each thread remembers the last document it hashed.
fn document_id(document: &str) -> Result<[u8; 32], StoreError> {
    thread_local! {
        static LAST: std::cell::RefCell<(String, [u8; 32])> = const { std::cell::RefCell::new((String::new(), [0; 32])) };
    }
    if let Some(id) = LAST.with_borrow(|(text, id)| (!text.is_empty() && text == document).then_some(*id)) {
        return Ok(id);
    }
    let id = content_id_bytes_of_json(Kind::Seed, document)?;
    LAST.with_borrow_mut(|last| {
        last.0.clear();
        last.0.push_str(document);
        last.1 = id;
    });
    Ok(id)
}

/// The content ids of the documents a stored body refers to, each once, in the body's order.
pub fn seed_references(body: &str) -> Result<Vec<[u8; 32]>, StoreError> {
    let mut ids = Vec::new();
    rewrite(body, &mut |place| {
        // A full body (stored before documents were kept apart) or a list inline: no reference.
        if let Ok(reference) = serde_json::from_str::<Reference>(place) {
            let id = reference_id(&reference)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(None)
    })?;
    Ok(ids)
}

fn reference_id(reference: &Reference) -> Result<[u8; 32], StoreError> {
    id_bytes(&reference.content_id).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "a case body refers to the document `{}`, which is not a content id",
            reference.content_id
        ))
    })
}

/// The full body of the stored body `body`, each reference replaced by the document `lookup`
/// gives for its content id; a body without a reference comes back as it is.
fn expand_with<'d>(body: String, lookup: impl Fn(&[u8; 32]) -> Option<&'d str>) -> Result<String, StoreError> {
    let expanded = rewrite(&body, &mut |place| {
        let Ok(reference) = serde_json::from_str::<Reference>(place) else { return Ok(None) };
        let id = reference_id(&reference)?;
        let Some(document) = lookup(&id) else {
            return Err(StoreError::Corrupt(format!(
                "a case body refers to the seed document {}, which is not in the store \
                 (`casebook store check` lists what is damaged)",
                &id_hex(&id)[..12]
            )));
        };
        let file = serde_json::to_string(&reference.file).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Some(format!("{{\"file\":{file},\"content\":{document}}}")))
    })?;
    Ok(expanded.unwrap_or(body))
}

/// The full body of the stored body `body`, which refers to the one document `document` (see
/// [`seed_references`]); a body without a reference comes back as it is.
pub fn expand(body: &str, document: &str) -> Result<String, StoreError> {
    expand_with(body.to_owned(), |_| Some(document))
}

/// The content id of a seed document kept as `document` (to check it).
pub fn seed_content_id(document: &str) -> Result<[u8; 32], StoreError> {
    Ok(content_id_bytes_of_json(Kind::Seed, document)?)
}

/// The seed documents a reader has fetched, by content id, to expand the bodies it reads.
#[derive(Debug, Default)]
pub struct SeedDocuments {
    documents: HashMap<[u8; 32], String>,
    bytes: usize,
}

impl SeedDocuments {
    pub fn new() -> Self {
        Self::default()
    }

    /// The documents `bodies` refer to that are not here yet, each once: fetch them and
    /// [`insert`](Self::insert) them before [`expand`](Self::expand). Empty (and cheap) when
    /// no body refers to one.
    pub fn missing<S: AsRef<str>>(&self, bodies: &[S]) -> Result<Vec<[u8; 32]>, StoreError> {
        let mut out = Vec::new();
        for body in bodies {
            for id in seed_references(body.as_ref())? {
                if !self.documents.contains_key(&id) && !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// Keeps a fetched document.
    pub fn insert(&mut self, content_id: [u8; 32], document: String) {
        // Bounded: a reader of many large documents fetches some again rather than keep all.
        if self.bytes + document.len() > CACHE_BYTES {
            self.documents.clear();
            self.bytes = 0;
        }
        self.bytes += document.len();
        self.documents.insert(content_id, document);
    }

    /// The full body of a stored body; [`StoreError::Corrupt`] if it refers to a document that
    /// was not inserted (the store lost it).
    pub fn expand(&self, body: String) -> Result<String, StoreError> {
        expand_with(body, |id| self.documents.get(id).map(String::as_str))
    }

    /// [`expand`](Self::expand) each body in place.
    pub fn expand_all(&self, bodies: &mut [String]) -> Result<(), StoreError> {
        for body in bodies {
            if may_refer(body.as_bytes()) {
                *body = self.expand(std::mem::take(body))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use casebook_model::{Case, MemorySeeds, Task};
    use serde_json::json;

    use super::*;

    fn seeded(content: serde_json::Value) -> Case {
        let mut case: Case = serde_json::from_value(json!({
            "id": "a", "labels": ["x"], "input": {"memory_seeds": {"file": "decoy", "content_id": "0"}},
            "metadata": {"memory_seeds": {"file": "also a decoy", "content": 1}, "n": 1.5e300}
        }))
        .unwrap();
        case.task = Task {
            memory_seeds: Some(MemorySeeds::File { file: "./seeds/\"bob\".yaml".into(), content }),
            ..case.task
        };
        case
    }

    #[test]
    fn compact_then_expand_gives_the_body_back_byte_for_byte() {
        let case = seeded(json!({"entries": [{"key": "k", "content": "Zürich → 東京 \u{1}"}], "n": 1e-7}));
        let body = serde_json::to_string(&case).unwrap();
        let (compact, mut seeds) = compact(&body).unwrap().expect("a seed file");
        assert_eq!(seeds.len(), 1);
        let seed = seeds.remove(0);
        assert!(!compact.contains("Zürich"), "{compact}");
        assert!(compact.contains(r#""input":{"memory_seeds":{"file":"decoy","content_id":"0"}}"#), "{compact}");
        assert_eq!(
            seed.document,
            serde_json::to_string(&json!({"entries": [{"key": "k", "content": "Zürich → 東京 \u{1}"}], "n": 1e-7}))
                .unwrap()
        );
        assert_eq!(seed_references(&compact).unwrap(), [seed.content_id]);
        assert_eq!(
            seed.content_id,
            casebook_canon::id_bytes(
                &casebook_canon::content_id(
                    Kind::Seed,
                    &json!({"n": 1e-7, "entries": [{"content": "Zürich → 東京 \u{1}", "key": "k"}]})
                )
                .unwrap()
            )
            .unwrap()
        );
        assert_eq!(expand(&compact, &seed.document).unwrap(), body);
        let mut documents = SeedDocuments::new();
        assert_eq!(documents.missing(&[&compact, &body]).unwrap(), vec![seed.content_id]);
        assert!(matches!(documents.expand(compact.clone()), Err(StoreError::Corrupt(_))));
        documents.insert(seed.content_id, seed.document);
        assert!(documents.missing(&[&compact]).unwrap().is_empty());
        assert_eq!(documents.expand(compact).unwrap(), body);
    }

    #[test]
    fn bodies_without_a_seed_file_stay_as_they_are() {
        let mut inline = seeded(json!(null));
        inline.task.memory_seeds = Some(serde_json::from_value(json!([{"source": "s", "content": "c"}])).unwrap());
        let mut plain = inline.clone();
        plain.task.memory_seeds = None;
        for case in [inline, plain] {
            let body = serde_json::to_string(&case).unwrap();
            assert_eq!(compact(&body).unwrap(), None);
            assert!(seed_references(&body).unwrap().is_empty());
            assert_eq!(SeedDocuments::new().expand(body.clone()).unwrap(), body);
        }
        // A full body stored before documents were kept apart reads as it is.
        let body = serde_json::to_string(&seeded(json!([1]))).unwrap();
        assert!(seed_references(&body).unwrap().is_empty());
        assert_eq!(SeedDocuments::new().expand(body.clone()).unwrap(), body);
    }
}
