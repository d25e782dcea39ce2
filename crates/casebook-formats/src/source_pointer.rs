//! Where a place in a case read from a file is in the file's record: the JSON Pointer a
//! diagnostic about the case's content gives (`casebook lint`), beside the casebook path
//! (`/expected/output` of a letta row is its `/ground_truth`). Relative to the record (the row,
//! test or item) that the diagnostic's line and column locate.
//!
//! Each reader's mapping is undone here from the case and its layout; a place a format has no
//! field for (`/expected` of a case with no expectations) is the record itself, `""`. `None`
//! when the way back is not known (CSV files, whose columns a map names; a path a reader never
//! fills).

use casebook_model::{Case, Map};

use crate::Format;
use crate::layout;

/// The pointer into the source record of `format` that `path`, a JSON Pointer into `case` as
/// casebook holds it, came from.
pub fn source_pointer(format: Format, case: &Case, path: &str) -> Option<String> {
    let segments: Vec<&str> = if path.is_empty() { Vec::new() } else { path.strip_prefix('/')?.split('/').collect() };
    let layout = case.provenance.as_ref().map(|p| &p.layout);
    match format {
        Format::Casebook => Some(path.to_owned()),
        Format::Letta => letta(layout, &segments),
        Format::AgentHealth => agenthealth(case, layout, &segments),
        Format::Promptfoo => promptfoo(layout, &segments),
        Format::OpenaiEvals => answer_and_input(layout, &segments, "ideal"),
        Format::Inspect => answer_and_input(layout, &segments, "target"),
        Format::Maslab | Format::Voltagent | Format::Csv => None,
    }
}

/// `/first/rest…`.
fn join(first: &str, rest: &[&str]) -> String {
    let mut out = String::from(first);
    for s in rest {
        out.push('/');
        out.push_str(s);
    }
    out
}

/// The place of what the case keeps in `metadata`: a top-level field of the source that the
/// reader lifted into it, or the source's own `metadata`.
fn metadata(layout: Option<&Map>, rest: &[&str]) -> Option<String> {
    let (key, _) = rest.split_first()?;
    let lifted = layout
        .and_then(|l| l.get("top_level"))
        .and_then(|v| v.as_array())
        .is_some_and(|keys| keys.iter().any(|k| k.as_str() == Some(&key.replace("~1", "/").replace("~0", "~"))));
    Some(if lifted { join("", rest) } else { join("/metadata", rest) })
}

fn letta(layout: Option<&Map>, segments: &[&str]) -> Option<String> {
    let input = format!("/{}", layout::text(layout, "input_key").unwrap_or("input"));
    let listed = layout::flag(layout, "input_list");
    Some(match segments {
        [] | ["expected"] => String::new(),
        ["id"] => format!("/{}", layout::text(layout, "id_key").unwrap_or("id")),
        ["input", rest @ ..] if listed => join(&format!("{input}/0"), rest),
        ["input", rest @ ..] => join(&input, rest),
        // Every message after the first is a turn.
        ["turns", n, "content", ..] if listed => format!("{input}/{}", n.parse::<usize>().ok()? + 1),
        ["turns", n] if listed => format!("{input}/{}", n.parse::<usize>().ok()? + 1),
        ["expected", "output" | "per_turn", rest @ ..] => join("/ground_truth", rest),
        ["expected", field @ ("rubric" | "rubric_path" | "rubric_vars" | "extra_vars"), rest @ ..] => {
            join(&format!("/{field}"), rest)
        }
        ["labels", rest @ ..] => join("/tags", rest),
        ["agent_args", rest @ ..] => join("/agent_args", rest),
        ["metadata", rest @ ..] => metadata(layout, rest)?,
        _ => return None,
    })
}

fn agenthealth(case: &Case, layout: Option<&Map>, segments: &[&str]) -> Option<String> {
    Some(match segments {
        [] | ["expected"] => String::new(),
        [field @ ("id" | "name" | "description")] => format!("/{field}"),
        ["input"] => "/initialPrompt".to_owned(),
        // The shipped shape's context items are `{description, value}`.
        ["context", n, field, rest @ ..] if layout::text(layout, "context_shape") == Some("shipped") => {
            let field = match *field {
                "content" => "value",
                "source" => "description",
                other => other,
            };
            join(&format!("/context/{n}/{field}"), rest)
        }
        ["context" | "tools", ..] => join("", segments),
        ["expected", "outcomes", rest @ ..] => join("/expectedOutcomes", rest),
        ["expected", "trajectory", rest @ ..] => join("/expectedTrajectory", rest),
        // The `labels` list first, then one label a field (`category:RCA`), in `label_fields` order.
        ["labels", n, ..] => {
            let n: usize = n.parse().ok()?;
            let fields: Vec<&str> = layout
                .and_then(|l| l.get("label_fields"))
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
                .unwrap_or_default();
            let listed = case.labels.as_ref().map_or(0, Vec::len).checked_sub(fields.len())?;
            match n.checked_sub(listed) {
                Some(field) => format!("/{}", fields.get(field)?),
                None => format!("/labels/{n}"),
            }
        }
        ["metadata", rest @ ..] => metadata(layout, rest)?,
        _ => return None,
    })
}

fn promptfoo(layout: Option<&Map>, segments: &[&str]) -> Option<String> {
    Some(match segments {
        [] | ["expected"] => String::new(),
        ["id" | "description"] => join("", segments),
        // One variable of text is the input; else the input is the variables.
        ["input", rest @ ..] => match layout::text(layout, "var") {
            Some(var) => join(&format!("/vars/{}", var.replace('~', "~0").replace('/', "~1")), rest),
            None if layout::flag(layout, "no_vars") => String::new(),
            None => join("/vars", rest),
        },
        ["expected", field @ ("assert" | "threshold"), rest @ ..] => join(&format!("/{field}"), rest),
        ["metadata", rest @ ..] => metadata(layout, rest)?,
        _ => return None,
    })
}

/// OpenAI evals (`ideal`) and Inspect (`target`) samples: the input as it is (a prompt or
/// messages), one answer or a list of them.
fn answer_and_input(layout: Option<&Map>, segments: &[&str], answer: &str) -> Option<String> {
    Some(match segments {
        [] | ["expected"] => String::new(),
        ["id"] => "/id".to_owned(),
        ["input", rest @ ..] => {
            let key = if layout::flag(layout, "messages") { "/messages" } else { "/input" };
            join(key, rest)
        }
        ["expected", "output", rest @ ..] | ["expected", "acceptable", rest @ ..] => join(&format!("/{answer}"), rest),
        ["metadata", rest @ ..] => join("", rest),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A case as casebook holds one read from `format`, with `layout`.
    fn case(value: serde_json::Value, format: &str, layout: serde_json::Value) -> Case {
        let mut case: Case = serde_json::from_value(value).expect("a case");
        let provenance = json!({"format": format, "layout": layout});
        case.provenance = Some(serde_json::from_value(provenance).expect("a provenance"));
        case
    }

    #[test]
    fn letta_rows_name_prompt_messages_sample_ids_and_lifted_fields_as_the_row_does() {
        let row = case(
            json!({"id": "7", "input": "hi", "turns": [{"role": "user", "content": "and?"}], "metadata": {"team": "a", "metadata_key": 1}}),
            "letta",
            json!({"input_key": "prompt", "input_list": true, "id_key": "sample_id", "top_level": ["team"]}),
        );
        let at = |path: &str| source_pointer(Format::Letta, &row, path);
        assert_eq!(at("/input").as_deref(), Some("/prompt/0"));
        assert_eq!(at("/turns/0/content").as_deref(), Some("/prompt/1"));
        assert_eq!(at("/id").as_deref(), Some("/sample_id"));
        assert_eq!(at("/metadata/team").as_deref(), Some("/team"));
        assert_eq!(at("/metadata/metadata_key").as_deref(), Some("/metadata/metadata_key"));
        assert_eq!(at("/expected/per_turn/1").as_deref(), Some("/ground_truth/1"));
        assert_eq!(at("/expected").as_deref(), Some(""));
        assert_eq!(at("/tools/0"), None);
    }

    #[test]
    fn agent_health_labels_come_from_the_list_then_from_their_fields() {
        let item = case(
            json!({"id": "a", "input": "why?", "labels": ["team:db", "category:RCA", "difficulty:Easy"]}),
            "agenthealth",
            json!({"labels": true, "label_fields": ["category", "difficulty"]}),
        );
        let at = |path: &str| source_pointer(Format::AgentHealth, &item, path);
        assert_eq!(at("/labels/0").as_deref(), Some("/labels/0"));
        assert_eq!(at("/labels/1").as_deref(), Some("/category"));
        assert_eq!(at("/labels/2").as_deref(), Some("/difficulty"));
        assert_eq!(at("/input").as_deref(), Some("/initialPrompt"));
        assert_eq!(at("/expected/outcomes/1").as_deref(), Some("/expectedOutcomes/1"));
    }

    #[test]
    fn promptfoo_variables_keep_their_names_escaped() {
        let test = case(json!({"id": "t", "input": "q"}), "promptfoo", json!({"var": "a/b"}));
        assert_eq!(source_pointer(Format::Promptfoo, &test, "/input").as_deref(), Some("/vars/a~1b"));
        let vars = case(json!({"id": "t", "input": {"q": "x"}}), "promptfoo", json!({}));
        assert_eq!(source_pointer(Format::Promptfoo, &vars, "/input/q").as_deref(), Some("/vars/q"));
        assert_eq!(source_pointer(Format::Casebook, &vars, "/input/q").as_deref(), Some("/input/q"));
        assert_eq!(source_pointer(Format::Maslab, &vars, "/input"), None);
    }
}
