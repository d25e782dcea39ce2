//! API keys for the shared server: each opens one project, to read, to read and write, or (the
//! `admin` scope) also to purge cases (`casebook purge`).
//!
//! A token is `cb_<id>_<secret>`: the id (12 hex digits) finds the key's row, and only a keyed
//! BLAKE3 hash of the whole token is kept, under a key the store makes with its first API key
//! (the `secrets` row `api-keys`). The secret is 256 random bits, so the hash cannot be
//! reversed by guessing; the keyed hash also means a copied `api_keys` table is of no use
//! without the store's own secret. Randomness comes from the caller ([`KeyMaterial`]), as the
//! clock does.

use serde::Serialize;

use crate::{AnyStore, StoreError};

/// `id, project, scope, label, author, created, revoked`, as selected.
type KeyRow = (String, String, String, String, String, String, Option<String>);

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
    /// Write, and purge cases from a dataset's history (which cannot be undone).
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// Whether a key of this scope may write (push versions, tags, runs).
    pub fn may_write(self) -> bool {
        matches!(self, Scope::Write | Scope::Admin)
    }

    /// Whether a key of this scope may purge cases.
    pub fn may_purge(self) -> bool {
        self == Scope::Admin
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            other => Err(StoreError::Damaged(format!("an API key has the scope `{other}`"))),
        }
    }
}

/// A key as listed (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKey {
    pub id: String,
    pub project: String,
    pub scope: Scope,
    pub label: String,
    pub author: String,
    /// RFC 3339.
    pub created: String,
    /// When it was revoked (RFC 3339); `None` while it works.
    pub revoked: Option<String>,
}

/// The random bytes a new key is made of.
pub struct KeyMaterial {
    pub id: [u8; 6],
    pub secret: [u8; 32],
    /// The store's hashing key, used only if the store has none yet.
    pub store_secret: [u8; 32],
}

/// A key just made, with the token that is shown once and never stored.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: ApiKey,
    pub token: String,
}

/// Who a token lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub key: String,
    pub project: String,
    pub scope: Scope,
}

/// A project name: it is part of every API path, so it is kept to what needs no escaping.
pub fn check_project(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.')
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    if ok { Ok(()) } else { Err(StoreError::BadProject(name.to_owned())) }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The id part of a well-formed token.
fn token_id(token: &str) -> Option<&str> {
    let rest = token.strip_prefix("cb_")?;
    let (id, secret) = rest.split_once('_')?;
    let well_formed = id.len() == 12
        && secret.len() == 64
        && id.bytes().chain(secret.bytes()).all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then_some(id)
}

/// Runs `$body` with the store's pool as `$pool` (the body is the same for either backend;
/// [`AnyStore::sql`] spells its placeholders).
macro_rules! with_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match $store {
            AnyStore::Sqlite(s) => {
                let $pool = s.pool();
                $body
            }
            AnyStore::Postgres(s) => {
                let $pool = s.pool();
                $body
            }
        }
    };
}

impl AnyStore {
    /// `text` with its `?` placeholders as this backend writes them (`$1`, `$2`, … for
    /// PostgreSQL). For the statements of this file, which hold no `?` of their own.
    fn sql(&self, text: &str) -> String {
        match self {
            AnyStore::Sqlite(_) => text.to_owned(),
            AnyStore::Postgres(_) => {
                let mut n = 0;
                text.chars()
                    .map(|c| {
                        if c == '?' {
                            n += 1;
                            format!("${n}")
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            }
        }
    }

    /// Makes a key for `project` (a name [`check_project`] accepts). The token is in the
    /// result and nowhere else.
    pub async fn create_key(
        &self,
        project: &str,
        scope: Scope,
        label: &str,
        author: &str,
        time: &str,
        material: &KeyMaterial,
    ) -> Result<NewKey, StoreError> {
        check_project(project)?;
        let id = hex(&material.id);
        let token = format!("cb_{id}_{}", hex(&material.secret));
        let key = ApiKey {
            id: id.clone(),
            project: project.to_owned(),
            scope,
            label: label.to_owned(),
            author: author.to_owned(),
            created: time.to_owned(),
            revoked: None,
        };
        // A write: behind another process's lock on the store, it says so (`crate::waits`).
        let write = async {
            let secret = self.key_secret(&material.store_secret).await?;
            let hash = blake3::keyed_hash(&secret, token.as_bytes());
            let insert = self.sql(
                "INSERT INTO api_keys (id, project, scope, hash, label, author, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
            );
            with_pool!(self, |pool| {
                sqlx::query(sqlx::AssertSqlSafe(insert))
                    .bind(&id)
                    .bind(project)
                    .bind(scope.as_str())
                    .bind(hash.as_bytes().to_vec())
                    .bind(label)
                    .bind(author)
                    .bind(time)
                    .execute(pool)
                    .await?;
            });
            Ok::<_, StoreError>(())
        };
        crate::waits::watched(self.probe(None), write).await?;
        Ok(NewKey { key, token })
    }

    /// The store's hashing key, made from `fresh` the first time.
    async fn key_secret(&self, fresh: &[u8; 32]) -> Result<[u8; 32], StoreError> {
        let insert = self.sql("INSERT INTO secrets (name, value) VALUES ('api-keys', ?) ON CONFLICT DO NOTHING");
        let value: Vec<u8> = with_pool!(self, |pool| {
            sqlx::query(sqlx::AssertSqlSafe(insert)).bind(fresh.to_vec()).execute(pool).await?;
            sqlx::query_scalar("SELECT value FROM secrets WHERE name = 'api-keys'").fetch_one(pool).await?
        });
        value.try_into().map_err(|_| StoreError::Damaged("the store's API key secret is not 32 bytes".into()))
    }

    /// The keys of `project`, or of every project; oldest first.
    pub async fn keys(&self, project: Option<&str>) -> Result<Vec<ApiKey>, StoreError> {
        let select = self.sql(
            "SELECT id, project, scope, label, author, created, revoked FROM api_keys
             WHERE CAST(? AS TEXT) IS NULL OR project = ? ORDER BY created, id",
        );
        let rows: Vec<KeyRow> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(select)).bind(project).bind(project).fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|(id, project, scope, label, author, created, revoked)| {
                Ok(ApiKey { id, project, scope: Scope::parse(&scope)?, label, author, created, revoked })
            })
            .collect()
    }

    /// Revokes a key by its id (or its whole token); revoking it again changes nothing.
    pub async fn revoke_key(&self, id: &str, time: &str) -> Result<ApiKey, StoreError> {
        let id = token_id(id).unwrap_or(id);
        let update = self.sql("UPDATE api_keys SET revoked = ? WHERE id = ? AND revoked IS NULL");
        let write = async {
            with_pool!(self, |pool| {
                sqlx::query(sqlx::AssertSqlSafe(update)).bind(time).bind(id).execute(pool).await?;
            });
            Ok::<_, StoreError>(())
        };
        crate::waits::watched(self.probe(None), write).await?;
        self.keys(None).await?.into_iter().find(|k| k.id == id).ok_or_else(|| StoreError::NoKey(id.to_owned()))
    }

    /// The access a token gives: `None` for a token that is malformed, unknown or revoked.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Access>, StoreError> {
        let Some(id) = token_id(token) else { return Ok(None) };
        let select = self.sql(
            "SELECT k.project, k.scope, k.hash, s.value FROM api_keys k, secrets s
             WHERE k.id = ? AND k.revoked IS NULL AND s.name = 'api-keys'",
        );
        let row: Option<(String, String, Vec<u8>, Vec<u8>)> =
            with_pool!(self, |pool| sqlx::query_as(sqlx::AssertSqlSafe(select)).bind(id).fetch_optional(pool).await?);
        let Some((project, scope, stored, secret)) = row else { return Ok(None) };
        let secret: [u8; 32] =
            secret.try_into().map_err(|_| StoreError::Damaged("the store's API key secret is not 32 bytes".into()))?;
        let Ok(stored) = <[u8; 32]>::try_from(stored.as_slice()) else { return Ok(None) };
        // `blake3::Hash` compares in constant time.
        if blake3::keyed_hash(&secret, token.as_bytes()) != blake3::Hash::from(stored) {
            return Ok(None);
        }
        Ok(Some(Access { key: id.to_owned(), project, scope: Scope::parse(&scope)? }))
    }
}
