//! The SQL uses the label table's primary key rather than reading every body.

use casebook_filter::{Filter, LabelIndex, SqlContext, SqlParam};
use sqlx::{AssertSqlSafe, ConnectOptions, Row};

async fn plan(src: &str) -> String {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new().in_memory(true).with_regexp().connect().await.unwrap();
    for ddl in [
        "CREATE TABLE blobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        "CREATE TABLE case_labels (label TEXT, blob INTEGER, PRIMARY KEY (label, blob)) WITHOUT ROWID",
    ] {
        sqlx::query(ddl).execute(&mut conn).await.unwrap();
    }
    let ctx = SqlContext {
        body: "b.body",
        labels: Some(LabelIndex { blob_expr: "b.id" }),
        facets: None,
        seeds: None,
        tools: None,
    };
    let fragment = Filter::parse(src).unwrap().to_sqlite(&ctx);
    let sql = format!("EXPLAIN QUERY PLAN SELECT b.id FROM blobs b WHERE {}", fragment.sql);
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for param in fragment.params {
        query = match param {
            SqlParam::Integer(i) => query.bind(i),
            SqlParam::Real(r) => query.bind(r),
            SqlParam::Text(s) => query.bind(s),
            SqlParam::Bytes(b) => query.bind(b),
        };
    }
    let rows = query.fetch_all(&mut conn).await.unwrap();
    rows.iter().map(|r| r.get::<String, _>(3)).collect::<Vec<_>>().join("\n")
}

#[test]
fn label_tests_search_the_label_table_by_its_key() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for (src, search) in [
        (r#"labels contains "math""#, "(label=?)"),
        (r#"label.category == "RCA""#, "(label=?)"),
        (r#"label.category in ["a", "b"]"#, "(label=?)"),
        ("exists(label.category)", "(label>? AND label<?)"),
        (r#"label.level > "m""#, "(label>? AND label<?)"),
    ] {
        let plan = runtime.block_on(plan(src));
        assert!(plan.contains(&format!("SEARCH case_labels USING PRIMARY KEY {search}")), "{src}:\n{plan}");
        assert!(!plan.contains("SCAN"), "{src}:\n{plan}");
    }
}
