//! Spans the OTLP receiver has received and not yet made cases of (`pending_spans`), and the
//! traces made into cases whose spans are kept a while for late spans (`captured_traces`), in
//! both backends. The store keeps each span's JSON as it is given (the receiver's `Span`); it
//! does not look inside. Times are the receiving server's clock, in Unix milliseconds.

use sqlx::{AssertSqlSafe, Row};

use crate::{AnyStore, PostgresStore, SqliteStore, StoreError};

/// One span to keep: its trace and span ids, whether it has no parent, and its JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSpan {
    pub trace_id: String,
    pub span_id: String,
    pub root: bool,
    pub json: String,
}

/// A trace with kept spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTrace {
    pub project: String,
    pub trace_id: String,
    /// The dataset its cases go to (the one its first batch named; the greatest name if its
    /// batches named several).
    pub dataset: String,
    pub spans: u64,
    pub first_received: i64,
    pub last_received: i64,
    /// Whether a span without a parent (the trace's root) has come.
    pub root: bool,
    /// When it was made into cases, if it was; later spans rebuild them.
    pub captured: Option<i64>,
    /// The cases made then: a JSON object of case id -> content id.
    pub cases: Option<String>,
}

/// Rows an `INSERT` carries.
const ROWS: usize = 300;

const LIST: &str = "SELECT s.project, s.trace_id, max(s.dataset), count(*), min(s.received), max(s.received),
        max(s.root), c.captured, c.cases
    FROM pending_spans s LEFT JOIN captured_traces c ON c.project = s.project AND c.trace_id = s.trace_id";
const GROUP: &str = "GROUP BY s.project, s.trace_id, c.captured, c.cases ORDER BY min(s.received), s.trace_id";

fn trace_of<R: Row>(row: &R) -> PendingTrace
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    PendingTrace {
        project: row.get(0),
        trace_id: row.get(1),
        dataset: row.get(2),
        spans: row.get::<i64, _>(3) as u64,
        first_received: row.get(4),
        last_received: row.get(5),
        root: row.get::<i64, _>(6) > 0,
        captured: row.get(7),
        cases: row.get(8),
    }
}

impl SqliteStore {
    async fn pending_add(&self, dataset: &str, received: i64, spans: &[PendingSpan]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        for chunk in spans.chunks(ROWS) {
            let values = vec!["(?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
            let mut query = sqlx::query(AssertSqlSafe(format!(
                "INSERT OR REPLACE INTO pending_spans (project, trace_id, span_id, dataset, received, root, span)
                 VALUES {values}"
            )));
            for s in chunk {
                query = query
                    .bind(self.project())
                    .bind(&s.trace_id)
                    .bind(&s.span_id)
                    .bind(dataset)
                    .bind(received)
                    .bind(i64::from(s.root))
                    .bind(&s.json);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn pending_traces(&self, every_project: bool) -> Result<Vec<PendingTrace>, StoreError> {
        let rows = if every_project {
            sqlx::query(AssertSqlSafe(format!("{LIST} {GROUP}"))).fetch_all(self.pool()).await?
        } else {
            sqlx::query(AssertSqlSafe(format!("{LIST} WHERE s.project = ? {GROUP}")))
                .bind(self.project())
                .fetch_all(self.pool())
                .await?
        };
        Ok(rows.iter().map(trace_of).collect())
    }

    async fn pending_spans(&self, trace_id: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT span FROM pending_spans WHERE project = ? AND trace_id = ? ORDER BY received, span_id",
        )
        .bind(self.project())
        .bind(trace_id)
        .fetch_all(self.pool())
        .await?)
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_spans").fetch_one(self.pool()).await?;
        Ok(n as u64)
    }

    async fn trace_captured(&self, trace_id: &str, captured: i64, cases: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT OR REPLACE INTO captured_traces (project, trace_id, captured, cases) VALUES (?, ?, ?, ?)")
            .bind(self.project())
            .bind(trace_id)
            .bind(captured)
            .bind(cases)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    async fn forget_trace(&self, trace_id: &str) -> Result<(), StoreError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        for table in ["pending_spans", "captured_traces"] {
            sqlx::query(AssertSqlSafe(format!("DELETE FROM {table} WHERE project = ? AND trace_id = ?")))
                .bind(self.project())
                .bind(trace_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

impl PostgresStore {
    async fn pending_add(&self, dataset: &str, received: i64, spans: &[PendingSpan]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        for chunk in spans.chunks(ROWS) {
            let values = (0..chunk.len())
                .map(|i| {
                    let b = i * 7;
                    format!("(${}, ${}, ${}, ${}, ${}, ${}, ${})", b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7)
                })
                .collect::<Vec<_>>()
                .join(", ");
            let mut query = sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO pending_spans (project, trace_id, span_id, dataset, received, root, span) VALUES {values}
                 ON CONFLICT (project, trace_id, span_id) DO UPDATE SET dataset = EXCLUDED.dataset,
                     received = EXCLUDED.received, root = EXCLUDED.root, span = EXCLUDED.span"
            )));
            for s in chunk {
                query = query
                    .bind(self.project())
                    .bind(&s.trace_id)
                    .bind(&s.span_id)
                    .bind(dataset)
                    .bind(received)
                    .bind(i64::from(s.root))
                    .bind(&s.json);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn pending_traces(&self, every_project: bool) -> Result<Vec<PendingTrace>, StoreError> {
        let rows = if every_project {
            sqlx::query(AssertSqlSafe(format!("{LIST} {GROUP}"))).fetch_all(self.pool()).await?
        } else {
            sqlx::query(AssertSqlSafe(format!("{LIST} WHERE s.project = $1 {GROUP}")))
                .bind(self.project())
                .fetch_all(self.pool())
                .await?
        };
        Ok(rows.iter().map(trace_of).collect())
    }

    async fn pending_spans(&self, trace_id: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT span FROM pending_spans WHERE project = $1 AND trace_id = $2 ORDER BY received, span_id",
        )
        .bind(self.project())
        .bind(trace_id)
        .fetch_all(self.pool())
        .await?)
    }

    async fn pending_count(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_spans").fetch_one(self.pool()).await?;
        Ok(n as u64)
    }

    async fn trace_captured(&self, trace_id: &str, captured: i64, cases: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO captured_traces (project, trace_id, captured, cases) VALUES ($1, $2, $3, $4)
             ON CONFLICT (project, trace_id) DO UPDATE SET captured = EXCLUDED.captured, cases = EXCLUDED.cases",
        )
        .bind(self.project())
        .bind(trace_id)
        .bind(captured)
        .bind(cases)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn forget_trace(&self, trace_id: &str) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        for table in ["pending_spans", "captured_traces"] {
            sqlx::query(AssertSqlSafe(format!("DELETE FROM {table} WHERE project = $1 AND trace_id = $2")))
                .bind(self.project())
                .bind(trace_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

impl AnyStore {
    /// Keeps spans received at `received` for the project's `dataset`; a span kept already
    /// (same trace and span id) is replaced, so a batch sent twice keeps each span once.
    pub async fn pending_add(&self, dataset: &str, received: i64, spans: &[PendingSpan]) -> Result<(), StoreError> {
        each!(self, s => s.pending_add(dataset, received, spans).await)
    }

    /// The traces with kept spans: the project's, or every project's (the server's task that
    /// makes cases of them), oldest first.
    pub async fn pending_traces(&self, every_project: bool) -> Result<Vec<PendingTrace>, StoreError> {
        each!(self, s => s.pending_traces(every_project).await)
    }

    /// The JSON of a trace's kept spans, in the order received.
    pub async fn pending_spans(&self, trace_id: &str) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.pending_spans(trace_id).await)
    }

    /// How many spans are kept, in every project.
    pub async fn pending_count(&self) -> Result<u64, StoreError> {
        each!(self, s => s.pending_count().await)
    }

    /// Records that a trace became cases at `captured` (`cases`: JSON, case id -> content id).
    pub async fn trace_captured(&self, trace_id: &str, captured: i64, cases: &str) -> Result<(), StoreError> {
        each!(self, s => s.trace_captured(trace_id, captured, cases).await)
    }

    /// Deletes a trace's kept spans and its capture record.
    pub async fn forget_trace(&self, trace_id: &str) -> Result<(), StoreError> {
        each!(self, s => s.forget_trace(trace_id).await)
    }
}
