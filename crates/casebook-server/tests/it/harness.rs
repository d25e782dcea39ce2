//! A server over a seeded store, for one test: two projects, each with keys of both scopes.

use std::sync::atomic::{AtomicU32, Ordering};

use casebook_model::Case;
use casebook_store::{
    AnyStore, CommitMode, CommitOutcome, CommitRequest, KeyMaterial, PostgresStore, Scope, SqliteStore, Store,
    VersionInfo,
};
use serde_json::json;

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Generates one test per backend from `async fn name(backend: Backend)`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::harness::Backend::Sqlite).await }
        )*}
        mod postgres {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::harness::Backend::Postgres).await }
        )*}
    };
}

pub struct Server {
    pub url: String,
    pub store: AnyStore,
    pub client: reqwest::Client,
    /// Keys: `[project a read, a write, b read, b write]`.
    pub keys: Keys,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
}

pub struct Keys {
    pub a_read: String,
    pub a_write: String,
    pub b_read: String,
    pub b_write: String,
}

pub async fn store_of(backend: Backend) -> (AnyStore, Option<tempfile::TempDir>) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::create(&dir.path().join("store.db")).await.unwrap();
            (store.into(), Some(dir))
        }
        Backend::Postgres => {
            static COUNT: AtomicU32 = AtomicU32::new(0);
            let base = std::env::var("CASEBOOK_TEST_POSTGRES").unwrap_or_else(|_| {
                panic!(
                    "CASEBOOK_TEST_POSTGRES is not set: run the tests with `scripts/test.sh`, which starts PostgreSQL"
                )
            });
            let (server, _) = base.rsplit_once('/').unwrap();
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
            let name = format!("s_{}_{}_{nanos}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
            (PostgresStore::create(&format!("{server}/{name}")).await.unwrap().into(), None)
        }
    }
}

pub fn case(id: &str, input: &str) -> Case {
    serde_json::from_value(json!({"id": id, "input": input, "expected": {"output": format!("answer to {input}")}}))
        .unwrap()
}

/// Commits `cases` as the next version of `dataset` (replacing or adding).
pub async fn commit(store: &AnyStore, dataset: &str, mode: CommitMode, cases: Vec<Case>) -> VersionInfo {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let prepared: Vec<_> = cases.iter().map(|c| casebook_store::prepare(c).unwrap()).collect();
    tx.send(Ok(prepared)).await.unwrap();
    drop(tx);
    let request = CommitRequest {
        dataset: dataset.into(),
        header: None,
        mode,
        parent: None,
        author: "ana".into(),
        time: "2026-11-24T08:00:00Z".into(),
        message: format!("commit {dataset}"),
    };
    match store.commit(request, rx).await.unwrap() {
        CommitOutcome::Created(v) => v,
        CommitOutcome::Unchanged(_) => panic!("no version made"),
    }
}

impl Server {
    /// A server over a store of `backend` holding, in project `team-a`: `support` (v1 three
    /// cases, v2 one changed, v3 one added; tag `prod` on v2) and a run; in project `team-b`:
    /// `support` (its own, one case) and `secret-b`.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, casebook_server::Limits::default()).await
    }

    pub async fn start_with(backend: Backend, limits: casebook_server::Limits) -> Self {
        let (store, dir) = store_of(backend).await;
        let a = store.in_project("team-a");
        commit(&a, "support", CommitMode::Replace, vec![case("c1", "one"), case("c2", "two"), case("c3", "three")])
            .await;
        commit(&a, "support", CommitMode::Upsert, vec![case("c2", "two, again")]).await;
        commit(&a, "support", CommitMode::Upsert, vec![case("c4", "four")]).await;
        a.tag("support", 2, "prod", "ana", "2026-11-24T08:00:00Z").await.unwrap();
        a.begin_run("r-a-1", "smoke", "2026-11-24T08:00:00Z", "{\"dataset\":\"support@v3\"}").await.unwrap();
        let row = casebook_store::ResultRow { seq: 0, result: "{\"case_id\":\"c1\"}".into(), output: None };
        a.save_results("r-a-1", &[row]).await.unwrap();
        a.finish_run("r-a-1", "2026-11-24T08:01:00Z", "{\"pass_rate\":1.0}").await.unwrap();
        let b = store.in_project("team-b");
        commit(&b, "support", CommitMode::Replace, vec![case("b1", "bee")]).await;
        commit(&b, "secret-b", CommitMode::Replace, vec![case("s1", "hidden")]).await;
        b.begin_run("r-b-1", "smoke", "2026-11-24T08:00:00Z", "{}").await.unwrap();
        let mut n = 0u8;
        let mut key = |project: &str, scope: Scope| {
            n += 1;
            let store = store.clone();
            let project = project.to_owned();
            let material = KeyMaterial { id: [n; 6], secret: [n.wrapping_mul(7); 32], store_secret: [9; 32] };
            async move {
                store.create_key(&project, scope, "test", "ana", "2026-11-24T08:00:00Z", &material).await.unwrap().token
            }
        };
        let keys = Keys {
            a_read: key("team-a", Scope::Read).await,
            a_write: key("team-a", Scope::Write).await,
            b_read: key("team-b", Scope::Read).await,
            b_write: key("team-b", Scope::Write).await,
        };
        let (router, _) = casebook_server::app(store.clone(), limits.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(casebook_server::serve(listener, router, &limits, async move {
            let _ = stopped.await;
        }));
        Server { url, store, client: reqwest::Client::new(), keys, stop: Some(stop), task: Some(task), _dir: dir }
    }

    pub async fn get(&self, key: &str, path: &str) -> (u16, serde_json::Value) {
        let response = self.client.get(format!("{}{path}", self.url)).bearer_auth(key).send().await.unwrap();
        answer(response).await
    }

    /// Stops this server and starts another on the same store and address, with `limits`: what
    /// a restart of `casebook serve` does.
    pub async fn restart(&mut self, limits: casebook_server::Limits) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
        // On the same address, as exporters configured with it expect.
        let (router, _) = casebook_server::app(self.store.clone(), limits.clone());
        let listener = tokio::net::TcpListener::bind(self.url.trim_start_matches("http://")).await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.task = Some(tokio::spawn(casebook_server::serve(listener, router, &limits, async move {
            let _ = stopped.await;
        })));
        self.stop = Some(stop);
    }

    /// Stops accepting, lets requests in flight finish, and waits for the server to end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

/// A response's status and JSON body (`null` for a body that is not JSON).
pub async fn answer(response: reqwest::Response) -> (u16, serde_json::Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
}
