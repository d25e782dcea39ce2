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
