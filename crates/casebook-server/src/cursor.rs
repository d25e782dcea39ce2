//! Page cursors: opaque to clients, they say which version a walk is over and where its last
//! page ended, so a cursor gives the same next page whenever it is used (a version never
//! changes) and cannot move a walk onto another version.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use casebook_store::{AnyStore, Cursor, Ref, Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

#[derive(Serialize, Deserialize)]
struct Token {
    /// The version walked.
    v: u64,
    /// Where the last page ended (or, read backwards, where the page after began).
    o: f64,
    i: String,
    /// Read backwards: the page that ends just before the case.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    b: bool,
    /// How many selected cases come before the case (read forwards, before the page it leads
    /// to): for the position a page shows ("51–100 of 1,000"), never for finding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<u64>,
}

/// Where a cursor leads: which version, from which case, which way.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    pub version: u64,
    pub at: Cursor,
    /// The page just before `at` rather than just after it.
    pub backward: bool,
    /// Selected cases before `at` (forwards) or before the page after (backwards), when known.
    pub position: Option<u64>,
}

/// The opaque text of a cursor.
pub fn encode_place(place: &Place) -> String {
    let token =
        Token { v: place.version, o: place.at.ord, i: place.at.id.clone(), b: place.backward, n: place.position };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// Where a cursor leads, whichever way.
pub fn decode_place(text: &str) -> Result<Place, ApiError> {
    let bad = || ApiError::bad_request("`cursor` is not a cursor this server gave: start again without it");
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let token: Token = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok(Place { version: token.v, at: Cursor { ord: token.o, id: token.i }, backward: token.b, position: token.n })
}

/// Where a cursor leads, for `dataset`: a cursor is text a client sends back, so one naming a
/// version the dataset does not have is refused.
pub async fn decode_place_for(store: &AnyStore, dataset: &str, text: &str) -> Result<Place, ApiError> {
    let place = decode_place(text)?;
    let version = place.version;
    match store.resolve(dataset, &Ref::Number(version)).await {
        Ok(_) => Ok(place),
        Err(StoreError::NoVersion { .. }) => Err(ApiError::bad_request(format!(
            "`cursor` is not valid for `{dataset}`: it names v{version}, which the dataset does not have; start again without a cursor"
        ))),
        Err(err) => Err(err.into()),
    }
}

#[derive(Serialize, Deserialize)]
struct SortToken {
    v: u64,
    /// The sort walked (`-confidence`), which a cursor is good for only.
    s: String,
    /// The key of the case the page starts after (or, backwards, ends before).
    r: i64,
    x: f64,
    t: String,
    i: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    b: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<u64>,
}

/// Where a cursor of a sorted walk leads: which version, in which sort, from which case's key,
/// which way; and the position, as [`Place`] has it.
#[derive(Debug, Clone, PartialEq)]
pub struct SortedPlace {
    pub version: u64,
    pub sort: String,
    pub seek: casebook_store::SortSeek,
    pub position: Option<u64>,
}

/// The opaque text of a sorted walk's cursor.
pub fn encode_sorted(place: &SortedPlace) -> String {
    let key = &place.seek.key;
    let token = SortToken {
        v: place.version,
        s: place.sort.clone(),
        r: key.rank,
        x: key.num,
        t: key.text.clone(),
        i: key.id.clone(),
        b: place.seek.backward,
        n: place.position,
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// Where a sorted walk's cursor leads, for `dataset` and the sort `sort` (its text): a cursor
/// of another sort, of the version's order, or of a version the dataset does not have is
/// refused.
pub async fn decode_sorted_for(
    store: &AnyStore,
    dataset: &str,
    sort: &str,
    text: &str,
) -> Result<SortedPlace, ApiError> {
    let bad = || ApiError::bad_request("`cursor` is not a cursor this server gave: start again without it");
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let token: SortToken = serde_json::from_slice(&bytes).map_err(|_| {
        ApiError::bad_request(format!(
            "`cursor` is not a cursor of `sort={sort}`: start again without it (a cursor keeps the sort it was made for)"
        ))
    })?;
    if token.s != sort {
        return Err(ApiError::bad_request(format!(
            "`cursor` walks `sort={}`, not `sort={sort}`: start again without it",
            token.s
        )));
    }
    // The version must be the dataset's, as for any cursor.
    if let Err(err) = store.resolve(dataset, &Ref::Number(token.v)).await {
        return Err(match err {
            StoreError::NoVersion { .. } => ApiError::bad_request(format!(
                "`cursor` is not valid for `{dataset}`: it names v{}, which the dataset does not have; start again without a cursor",
                token.v
            )),
            err => err.into(),
        });
    }
    let key = casebook_store::SortKey { rank: token.r, num: token.x, text: token.t, id: token.i };
    Ok(SortedPlace {
        version: token.v,
        sort: token.s,
        seek: casebook_store::SortSeek { key, backward: token.b },
        position: token.n,
    })
}

#[derive(Serialize, Deserialize)]
struct DiffToken {
    /// The two versions compared.
    f: u64,
    t: u64,
    /// The list paged.
    l: casebook_store::DiffList,
    /// The last case id of the page before.
    i: String,
}

/// The cursor of the page of a diff's list after the case `after`.
pub fn encode_diff(from: u64, to: u64, list: casebook_store::DiffList, after: &str) -> String {
    let token = DiffToken { f: from, t: to, l: list, i: after.to_owned() };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// The versions, list and case id a diff cursor names.
pub fn decode_diff(text: &str) -> Result<(u64, u64, casebook_store::DiffList, String), ApiError> {
    let bad = || ApiError::bad_request("`cursor` is not a diff cursor this server gave: start again without it");
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let token: DiffToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok((token.f, token.t, token.l, token.i))
}

/// A cursor that names an entry of a list by its key (the console's compare pages: a case run).
pub fn encode_key<T: Serialize>(key: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(key).unwrap_or_default())
}

/// The key a cursor of [`encode_key`] names.
pub fn decode_key<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    let bad = || ApiError::bad_request("`after` or `before` is not a cursor this server gave: start again without it");
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    serde_json::from_slice(&bytes).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_go_and_come_back_and_older_cursors_lead_forwards() {
        let place =
            Place { version: 3, at: Cursor { ord: 1.5, id: "c/é".into() }, backward: true, position: Some(50) };
        assert_eq!(decode_place(&encode_place(&place)).unwrap(), place);
        // A cursor made before cursors had a direction and a position.
        let old = URL_SAFE_NO_PAD.encode(br#"{"v":2,"o":7.0,"i":"c1"}"#);
        let read = decode_place(&old).unwrap();
        assert_eq!((read.version, read.backward, read.position, read.at.id.as_str()), (2, false, None, "c1"));
        assert!(decode_place("not a cursor").unwrap_err().body.message.contains("start again without it"));
    }
}
