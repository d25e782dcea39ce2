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
    /// Where the last page ended.
    o: f64,
    i: String,
}

pub fn encode(version: u64, at: &Cursor) -> String {
    let token = Token { v: version, o: at.ord, i: at.id.clone() };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// The version and position a cursor names.
pub fn decode(text: &str) -> Result<(u64, Cursor), ApiError> {
    let bad = || ApiError::bad_request("`cursor` is not a cursor this server gave: start again without it");
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let token: Token = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok((token.v, Cursor { ord: token.o, id: token.i }))
}

/// The version and position a cursor names, for `dataset`: a cursor is text a client sends
/// back, so one naming a version the dataset does not have is refused.
pub async fn decode_for(store: &AnyStore, dataset: &str, text: &str) -> Result<(u64, Cursor), ApiError> {
    let (version, at) = decode(text)?;
    match store.resolve(dataset, &Ref::Number(version)).await {
        Ok(_) => Ok((version, at)),
        Err(StoreError::NoVersion { .. }) => Err(ApiError::bad_request(format!(
            "`cursor` is not valid for `{dataset}`: it names v{version}, which the dataset does not have; start again without a cursor"
        ))),
        Err(err) => Err(err.into()),
    }
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
