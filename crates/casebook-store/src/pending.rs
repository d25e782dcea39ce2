//! Spans the OTLP receiver has received and not yet made cases of (`pending_spans`), with the
//! GenAI log records of their traces (`kind` 1), the traces made into cases whose spans are kept
//! a while for late spans (`captured_traces`), and the warnings of those captures
//! (`capture_warnings`), in both backends. The store keeps each span's and record's JSON as it is
//! given (the receiver's `Span` and `Record`); it does not look inside. Times are the receiving
//! server's clock, in Unix milliseconds.
//!
//! The SQL is the same text for both backends (SQLite reads `$1` as the first parameter, as
//! PostgreSQL does, and has the same upsert), so the [`Store`](crate::Store) methods are written
//! once, in [`pending_methods`], and expanded in each backend's `impl Store`.

/// One span (or log record) to keep: its trace and span ids, whether it has no parent, and its
/// JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSpan {
    pub trace_id: String,
    /// The span's id; a log record's is its span's id, `/` and a digest of the record, so a
    /// record sent twice is kept once.
    pub span_id: String,
    pub root: bool,
    /// A GenAI log record of the span rather than the span itself.
    pub record: bool,
    pub json: String,
}

/// A trace with kept spans or log records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTrace {
    pub project: String,
    pub trace_id: String,
    /// The dataset its cases go to (the one its spans' first batch named; the greatest name if
    /// its batches named several; a records' one only when no span has come).
    pub dataset: String,
    pub spans: u64,
    /// GenAI log records kept for its spans.
    pub records: u64,
    pub first_received: i64,
    pub last_received: i64,
    /// Whether a span without a parent (the trace's root) has come.
    pub root: bool,
    /// When it was made into cases, if it was; later spans rebuild them.
    pub captured: Option<i64>,
    /// The cases made then: a JSON object of case id -> content id.
    pub cases: Option<String>,
}

/// A warning of a capture the server made in the background (a trace captured without its root,
/// log records whose spans never came), kept for the user to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureWarning {
    pub dataset: String,
    /// The trace it concerns.
    pub trace_id: String,
    /// When it was made (Unix milliseconds, the server's clock).
    pub at: i64,
    pub message: String,
}

/// The warnings kept per dataset: the most recent ones.
pub const CAPTURE_WARNINGS_KEPT: i64 = 100;

/// Rows an `INSERT` carries.
pub(crate) const ROWS: usize = 300;

pub(crate) const ADD: &str =
    "INSERT INTO pending_spans (project, trace_id, span_id, dataset, received, root, kind, span)
    VALUES {values}
    ON CONFLICT (project, trace_id, span_id) DO UPDATE SET dataset = excluded.dataset,
        received = excluded.received, root = excluded.root, kind = excluded.kind, span = excluded.span";

/// The `VALUES` rows of [`ADD`] for `n` rows.
pub(crate) fn add_values(n: usize) -> String {
    (0..n)
        .map(|i| {
            let b = i * 8;
            format!("(${}, ${}, ${}, ${}, ${}, ${}, ${}, ${})", b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7, b + 8)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) const LIST: &str = "SELECT s.project, s.trace_id,
        COALESCE(max(CASE WHEN s.kind = 0 THEN s.dataset END), max(s.dataset)),
        CAST(sum(1 - s.kind) AS BIGINT), CAST(sum(s.kind) AS BIGINT), min(s.received), max(s.received),
        max(s.root), c.captured, c.cases
    FROM pending_spans s LEFT JOIN captured_traces c ON c.project = s.project AND c.trace_id = s.trace_id";
pub(crate) const GROUP: &str =
    "GROUP BY s.project, s.trace_id, c.captured, c.cases ORDER BY min(s.received), s.trace_id";
pub(crate) const SPANS: &str = "SELECT trace_id, span_id, root, kind, span FROM pending_spans
    WHERE project = $1 AND trace_id = $2 ORDER BY received, span_id";
pub(crate) const CAPTURED: &str =
    "INSERT INTO captured_traces (project, trace_id, captured, cases) VALUES ($1, $2, $3, $4)
    ON CONFLICT (project, trace_id) DO UPDATE SET captured = excluded.captured, cases = excluded.cases";
pub(crate) const WARN: &str =
    "INSERT INTO capture_warnings (project, dataset, trace_id, at, message) VALUES ($1, $2, $3, $4, $5)";
/// Deletes a dataset's warnings older than the [`CAPTURE_WARNINGS_KEPT`] most recent.
pub(crate) const PRUNE: &str = "DELETE FROM capture_warnings WHERE project = $1 AND dataset = $2 AND id <= (
    SELECT id FROM capture_warnings WHERE project = $1 AND dataset = $2 ORDER BY id DESC LIMIT 1 OFFSET $3)";
pub(crate) const CLEAR_WARNINGS: &str = "DELETE FROM capture_warnings WHERE project = $1 AND trace_id = $2";
pub(crate) const WARNINGS: &str =
    "SELECT dataset, trace_id, at, message FROM capture_warnings WHERE project = $1 ORDER BY dataset, id DESC";

/// The `Store` methods of pending spans, for a backend whose transactions begin with `$begin`
/// (SQLite's `BEGIN IMMEDIATE` takes the write lock at once).
macro_rules! pending_methods {
    ($begin:literal) => {
        async fn pending_add(
            &self,
            dataset: &str,
            received: i64,
            spans: &[$crate::PendingSpan],
        ) -> Result<(), StoreError> {
            use $crate::pending::{ADD, ROWS, add_values};
            let mut tx = self.pool().begin_with($begin).await?;
            for chunk in spans.chunks(ROWS) {
                let text = ADD.replace("{values}", &add_values(chunk.len()));
                let mut query = sqlx::query(sqlx::AssertSqlSafe(text));
                for s in chunk {
                    query = query
                        .bind(self.project())
                        .bind(&s.trace_id)
                        .bind(&s.span_id)
                        .bind(dataset)
                        .bind(received)
                        .bind(i64::from(s.root))
                        .bind(i64::from(s.record))
                        .bind(&s.json);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn pending_traces(&self, every_project: bool) -> Result<Vec<$crate::PendingTrace>, StoreError> {
            use sqlx::Row;
            use $crate::pending::{GROUP, LIST};
            let rows = if every_project {
                sqlx::query(sqlx::AssertSqlSafe(format!("{LIST} {GROUP}"))).fetch_all(self.pool()).await?
            } else {
                sqlx::query(sqlx::AssertSqlSafe(format!("{LIST} WHERE s.project = $1 {GROUP}")))
                    .bind(self.project())
                    .fetch_all(self.pool())
                    .await?
            };
            Ok(rows
                .iter()
                .map(|row| $crate::PendingTrace {
                    project: row.get(0),
                    trace_id: row.get(1),
                    dataset: row.get(2),
                    spans: row.get::<i64, _>(3) as u64,
                    records: row.get::<i64, _>(4) as u64,
                    first_received: row.get(5),
                    last_received: row.get(6),
                    root: row.get::<i64, _>(7) > 0,
                    captured: row.get(8),
                    cases: row.get(9),
                })
                .collect())
        }

        async fn pending_spans(&self, trace_id: &str) -> Result<Vec<$crate::PendingSpan>, StoreError> {
            use sqlx::Row;
            let rows =
                sqlx::query($crate::pending::SPANS).bind(self.project()).bind(trace_id).fetch_all(self.pool()).await?;
            Ok(rows
                .iter()
                .map(|row| $crate::PendingSpan {
                    trace_id: row.get(0),
                    span_id: row.get(1),
                    root: row.get::<i64, _>(2) > 0,
                    record: row.get::<i64, _>(3) > 0,
                    json: row.get(4),
                })
                .collect())
        }

        async fn pending_count(&self) -> Result<u64, StoreError> {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_spans").fetch_one(self.pool()).await?;
            Ok(n as u64)
        }

        async fn trace_captured(&self, trace_id: &str, captured: i64, cases: &str) -> Result<(), StoreError> {
            sqlx::query($crate::pending::CAPTURED)
                .bind(self.project())
                .bind(trace_id)
                .bind(captured)
                .bind(cases)
                .execute(self.pool())
                .await?;
            Ok(())
        }

        async fn forget_trace(&self, trace_id: &str) -> Result<(), StoreError> {
            let mut tx = self.pool().begin_with($begin).await?;
            for text in [
                "DELETE FROM pending_spans WHERE project = $1 AND trace_id = $2",
                "DELETE FROM captured_traces WHERE project = $1 AND trace_id = $2",
            ] {
                sqlx::query(text).bind(self.project()).bind(trace_id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn capture_warn(&self, dataset: &str, trace_id: &str, at: i64, message: &str) -> Result<(), StoreError> {
            let mut tx = self.pool().begin_with($begin).await?;
            sqlx::query($crate::pending::WARN)
                .bind(self.project())
                .bind(dataset)
                .bind(trace_id)
                .bind(at)
                .bind(message)
                .execute(&mut *tx)
                .await?;
            sqlx::query($crate::pending::PRUNE)
                .bind(self.project())
                .bind(dataset)
                .bind($crate::pending::CAPTURE_WARNINGS_KEPT)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }

        async fn capture_warnings(&self) -> Result<Vec<$crate::CaptureWarning>, StoreError> {
            use sqlx::Row;
            let rows = sqlx::query($crate::pending::WARNINGS).bind(self.project()).fetch_all(self.pool()).await?;
            Ok(rows
                .iter()
                .map(|row| $crate::CaptureWarning {
                    dataset: row.get(0),
                    trace_id: row.get(1),
                    at: row.get(2),
                    message: row.get(3),
                })
                .collect())
        }

        async fn capture_warnings_clear(&self, trace_id: &str) -> Result<(), StoreError> {
            sqlx::query($crate::pending::CLEAR_WARNINGS)
                .bind(self.project())
                .bind(trace_id)
                .execute(self.pool())
                .await?;
            Ok(())
        }
    };
}

pub(crate) use pending_methods;
