//! The client side of the team server, for `login`, `push`, `pull` and runs (`runs.rs`): where the server is and
//! which key to send (`CASEBOOK_URL` and `CASEBOOK_TOKEN`, else what `casebook login` saved),
//! requests, and the server's errors as one-line messages.

use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// What `casebook login` saves, in the user's config folder (mode 0600).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Credentials {
    pub url: String,
    pub token: String,
}

/// `$XDG_CONFIG_HOME/casebook/credentials.json`, else `~/.config/casebook/credentials.json`.
pub fn credentials_path() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no config folder: set `HOME` or `XDG_CONFIG_HOME`, or use `CASEBOOK_URL` and `CASEBOOK_TOKEN`"
            )
        })?;
    Ok(base.join("casebook").join("credentials.json"))
}

/// Saves credentials readable by the user alone, replacing the file whole.
pub fn save_credentials(credentials: &Credentials) -> anyhow::Result<PathBuf> {
    let path = credentials_path()?;
    let dir = path.parent().unwrap_or(&path);
    fs_err::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir).context("cannot write the credentials")?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.as_file().set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    use std::io::Write;
    file.write_all(serde_json::to_string_pretty(credentials)?.as_bytes())?;
    file.persist(&path).map_err(|e| anyhow::anyhow!("cannot save `{}`: {}", path.display(), e.error))?;
    Ok(path)
}

/// What `casebook login` saved, if anything (an unreadable file counts as nothing saved).
pub fn saved_credentials() -> Option<Credentials> {
    let text = fs_err::read_to_string(credentials_path().ok()?).ok()?;
    serde_json::from_str(&text).ok()
}

/// Removes what `casebook login` saved; the path removed, if there was a file.
pub fn forget_credentials() -> anyhow::Result<Option<PathBuf>> {
    let path = credentials_path()?;
    match fs_err::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// A connection to the server, on behalf of one key (and so one project).
pub struct Remote {
    pub url: String,
    token: String,
    /// The key's project, as the server says.
    pub project: String,
    client: reqwest::Client,
}

pub use casebook_server::path_segment as segment;

/// An error answer of the server, as its body says it.
#[derive(Debug, Deserialize)]
pub struct ServerError {
    /// The stable code (`conflict`, `merge-conflict`, …).
    #[serde(default)]
    pub code: String,
    pub message: String,
    /// On a `merge-conflict`: the ids changed on both sides.
    #[serde(default)]
    pub conflicts: Vec<String>,
    #[serde(default)]
    pub head: Option<u64>,
    #[serde(default)]
    pub request_id: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(
        "cannot reach the server at {url}: {why}; is `casebook serve` running there? (`CASEBOOK_URL` or `casebook login URL` names it)"
    )]
    Unreachable { url: String, why: String },
    #[error(
        "the server refused the key ({message}): run `casebook login` with a key of `casebook keys create`, or set `CASEBOOK_TOKEN`"
    )]
    Unauthorized { message: String },
    #[error("{}", .1.message)]
    Refused(u16, ServerError),
    #[error("the server answered {0} with a body that is not casebook's: {1}")]
    Garbled(u16, String),
}

/// The server [`Remote::connect`] connects to: `CASEBOOK_URL`, else the one `saved` names.
pub fn configured_url(saved: Option<&Credentials>) -> Option<String> {
    std::env::var("CASEBOOK_URL").ok().filter(|u| !u.is_empty()).or_else(|| saved.map(|c| c.url.clone()))
}

/// The root cause of a transport error, for a one-line message.
fn why(err: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(err);
    let mut last = err.to_string();
    while let Some(e) = source {
        last = e.to_string();
        source = e.source();
    }
    last
}

impl Remote {
    /// Connects with `CASEBOOK_URL` / `CASEBOOK_TOKEN`, else the saved credentials, and asks
    /// the server which project the key opens.
    pub async fn connect() -> anyhow::Result<Self> {
        let saved = saved_credentials();
        let url = configured_url(saved.as_ref());
        let token = std::env::var("CASEBOOK_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| saved.as_ref().map(|c| c.token.clone()));
        let Some(url) = url else {
            anyhow::bail!("no server: set `CASEBOOK_URL`, or run `casebook login URL`");
        };
        let Some(token) = token else {
            anyhow::bail!("no API key for {url}: set `CASEBOOK_TOKEN`, or run `casebook login {url}`");
        };
        Ok(Self::with(url, token).await?)
    }

    /// Connects to `url` with `token`, learning the key's project.
    pub async fn with(url: String, token: String) -> Result<Self, RemoteError> {
        let url = url.trim_end_matches('/').to_owned();
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            // The server closes a connection that sends no request head within its header
            // timeout (10 s by default), idle keep-alive connections included: one reused after
            // that long (a push whose file took longer to check) could be closed as the request
            // is sent. Connections idle for 4 s are not reused.
            .pool_idle_timeout(std::time::Duration::from_secs(4))
            .build()
            .map_err(|e| RemoteError::Unreachable { url: url.clone(), why: why(&e) })?;
        let mut remote = Self { url, token, project: String::new(), client };
        let projects: Vec<serde_json::Value> = remote.get_json("/api/v1/projects").await?;
        remote.project = projects
            .first()
            .and_then(|p| p["name"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| RemoteError::Garbled(200, "no project for this key".into()))?;
        Ok(remote)
    }

    /// `/api/v1/projects/{project}/datasets/{name}` and what follows.
    pub fn dataset_path(&self, name: &str, rest: &str) -> String {
        format!("/api/v1/projects/{}/datasets/{}{rest}", segment(&self.project), segment(name))
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.url)).bearer_auth(&self.token)
    }

    /// Sends a request; an error answer becomes a [`RemoteError`].
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, RemoteError> {
        let response =
            request.send().await.map_err(|e| RemoteError::Unreachable { url: self.url.clone(), why: why(&e) })?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        #[derive(Deserialize)]
        struct Envelope {
            error: ServerError,
        }
        match serde_json::from_str::<Envelope>(&text) {
            Ok(e) if status == 401 => Err(RemoteError::Unauthorized { message: e.error.message }),
            Ok(e) => Err(RemoteError::Refused(status, e.error)),
            Err(_) => Err(RemoteError::Garbled(status, text.chars().take(200).collect())),
        }
    }

    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, RemoteError> {
        self.json(self.request(reqwest::Method::GET, path)).await
    }

    /// Walks the pages of version `number` of `dataset` that `filter` selects (`size` cases a
    /// page), handing each page's cases, as native JSON lines checked to be one line each, to
    /// `each` (which returns `false` to stop).
    pub fn each_page(
        &self,
        runtime: &tokio::runtime::Runtime,
        dataset: &str,
        number: u64,
        filter: Option<&str>,
        size: usize,
        each: &mut dyn FnMut(Vec<String>) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let path = self.dataset_path(dataset, &format!("/versions/v{number}/cases"));
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("limit", size.to_string())];
            query.extend(filter.map(|f| ("where", f.to_owned())));
            query.extend(cursor.take().map(|c| ("cursor", c)));
            let request = self.request(reqwest::Method::GET, &path).query(&query);
            let page: casebook_server::api::CasePage = runtime.block_on(self.json(request))?;
            let bodies: Vec<String> = page.cases.iter().map(|c| c.get().to_owned()).collect();
            if bodies.iter().any(|b| memchr::memchr2(b'\n', b'\r', b.as_bytes()).is_some()) {
                anyhow::bail!("the server sent a case that is not one line of JSON: nothing was written");
            }
            if !each(bodies)? {
                return Ok(());
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Sends a request and reads its JSON answer.
    pub async fn json<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, RemoteError> {
        let response = self.send(request).await?;
        let status = response.status().as_u16();
        let bytes =
            response.bytes().await.map_err(|e| RemoteError::Unreachable { url: self.url.clone(), why: why(&e) })?;
        serde_json::from_slice(&bytes).map_err(|e| RemoteError::Garbled(status, e.to_string()))
    }
}
