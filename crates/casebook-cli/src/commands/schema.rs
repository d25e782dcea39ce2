//! `casebook schema`: the JSON Schema of the native dataset document, for editors.

use casebook_model::{Case, DatasetHeader};
use schemars::JsonSchema;

use crate::Outcome;
use crate::args::SchemaArgs;
use crate::settings::Global;

/// A casebook dataset: a header and its cases.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Dataset {
    #[serde(flatten)]
    header: DatasetHeader,
    cases: Vec<Case>,
}

pub fn run(settings: &Global, _args: SchemaArgs) -> anyhow::Result<Outcome> {
    let mut schema = schemars::schema_for!(Dataset);
    schema.insert("$id".into(), "https://casebook.dev/schema/dataset.json".into());
    // Indented for people and editors; on one line with `--format json`, as every single answer.
    let text = if settings.json { serde_json::to_string(&schema)? } else { serde_json::to_string_pretty(&schema)? };
    crate::write_stdout(&(text + "\n"))?;
    Ok(Outcome::Ok)
}
