//! Who may do what: a bearer API key becomes a store handle that sees the key's project only.
//!
//! Handlers take [`Reader`] or [`Writer`] and get their store from it, so none can reach another
//! project's data or forget the check. A path naming another project than the key's answers
//! exactly as a project that does not exist (404), so a key learns nothing of other projects.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::StatusCode;
use axum::http::request::Parts;
use casebook_store::{Access, AnyStore};

use crate::AppState;
use crate::error::ApiError;

/// A request whose key may read the project in its path.
pub struct Reader {
    /// The store, seeing the key's project only.
    pub store: AnyStore,
    pub access: Access,
}

/// A request whose key may write the project in its path.
pub struct Writer {
    pub store: AnyStore,
    pub access: Access,
}

/// The key a request carries, checked against the store.
pub(crate) async fn access(parts: &Parts, state: &AppState) -> Result<Access, ApiError> {
    let unauthorized = |message: &str| {
        let mut e = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message);
        e.body.message.push_str(": send `Authorization: Bearer <key>` (`casebook keys create` makes one)");
        e
    };
    let Some(header) = parts.headers.get(axum::http::header::AUTHORIZATION) else {
        return Err(unauthorized("this request needs an API key"));
    };
    let token = header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| unauthorized("the `Authorization` header is not `Bearer <key>`"))?;
    match state.store.authenticate(token).await? {
        Some(access) => Ok(access),
        None => Err(unauthorized("the API key is unknown or revoked")),
    }
}

/// The key's access and a store handle for it, if the path's project is the key's.
async fn authorise(parts: &mut Parts, state: &AppState) -> Result<(AnyStore, Access), ApiError> {
    let access = access(parts, state).await?;
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::bad_request("the path is not valid UTF-8"))?;
    if let Some((_, project)) = params.iter().find(|(name, _)| *name == "project") {
        if project != access.project {
            return Err(ApiError::not_found(format!("no project `{project}`")));
        }
    }
    Ok((state.store.in_project(&access.project), access))
}

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let (store, access) = authorise(parts, state).await?;
        Ok(Reader { store, access })
    }
}

impl FromRequestParts<AppState> for Writer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let (store, access) = authorise(parts, state).await?;
        if !access.scope.may_write() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("the API key `{}` may only read: writing needs a key made with `--scope write`", access.key),
            ));
        }
        Ok(Writer { store, access })
    }
}

/// A request whose key may purge cases in the project in its path (the `admin` scope).
pub struct Admin {
    pub store: AnyStore,
    pub access: Access,
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let (store, access) = authorise(parts, state).await?;
        if !access.scope.may_purge() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "the API key `{}` has the scope `{}`: purging needs a key made with `--scope admin`",
                    access.key,
                    access.scope.as_str()
                ),
            ));
        }
        Ok(Admin { store, access })
    }
}
