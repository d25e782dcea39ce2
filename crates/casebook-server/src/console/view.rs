//! A case laid out for reading: the half the agent sees, the half it must never see, and what
//! is about the case (labels, metadata, review), as text the templates show as it is.

use casebook_model::{Case, MemorySeeds, Role};
use serde_json::Value;

/// A value as a person reads it: a string as itself, anything else as indented JSON.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A value on one short line, for lists.
pub fn preview(value: &Value, most: usize) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        // A list of messages: the first message's content.
        Value::Array(items) => match items.first().and_then(|m| m.get("content")) {
            Some(Value::String(s)) => s.clone(),
            _ => value.to_string(),
        },
        other => other.to_string(),
    };
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(most) {
        Some((end, _)) => format!("{}…", &flat[..end]),
        None => flat,
    }
}

/// One message of a conversation.
pub struct Message {
    pub role: String,
    /// An operator stepping in (human in the loop).
    pub hitl: bool,
    pub content: String,
}

pub struct Item {
    pub title: String,
    pub detail: String,
    pub body: String,
}

/// A named part of a case and its text.
pub struct Field {
    pub name: String,
    pub text: String,
}

pub struct CaseView {
    /// The input as a conversation when it is a list of messages.
    pub input_messages: Vec<Message>,
    /// The input otherwise.
    pub input: String,
    pub turns: Vec<Message>,
    pub context: Vec<Item>,
    pub tools: Vec<Item>,
    pub seeds: Vec<Item>,
    /// The other task fields (memory seed file, session id, agent arguments).
    pub task_other: Vec<Field>,
    /// The expectations, field by field.
    pub expected: Vec<Field>,
    /// Labels, metadata, confidence, review, provenance.
    pub about: Vec<Field>,
    pub labels: Vec<String>,
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Hitl => "operator (hitl)",
        Role::System => "system",
    }
}

fn messages(input: &Value) -> Option<Vec<Message>> {
    let items = input.as_array()?;
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|m| {
            let role = m.get("role")?.as_str()?;
            let content = m.get("content")?;
            Some(Message { role: role.to_owned(), hitl: role == "hitl", content: show(content) })
        })
        .collect()
}

impl CaseView {
    pub fn new(case: &Case) -> Self {
        let task = &case.task;
        let input_messages = messages(&task.input).unwrap_or_default();
        let input = if input_messages.is_empty() { show(&task.input) } else { String::new() };
        let turns = task
            .turns
            .iter()
            .flatten()
            .map(|t| Message {
                role: role_name(t.role).to_owned(),
                hitl: t.role == Role::Hitl,
                content: t.content.clone(),
            })
            .collect();
        let context = task
            .context
            .iter()
            .flatten()
            .map(|c| Item {
                title: c.kind.clone().unwrap_or_else(|| "context".into()),
                detail: c.source.clone().unwrap_or_default(),
                body: {
                    let mut body = show(&c.content);
                    if let Some(meta) = &c.metadata {
                        body.push_str("\n\nmetadata: ");
                        body.push_str(&show(&Value::Object(meta.clone())));
                    }
                    body
                },
            })
            .collect();
        let tools = task
            .tools
            .iter()
            .flatten()
            .map(|t| Item {
                title: t.name.clone(),
                detail: t.description.clone().unwrap_or_default(),
                body: t.parameters.as_ref().map(show).unwrap_or_default(),
            })
            .collect();
        let mut task_other = Vec::new();
        let mut seeds = Vec::new();
        match &task.memory_seeds {
            Some(MemorySeeds::Inline(list)) => {
                seeds = list
                    .iter()
                    .map(|s| Item {
                        title: s.source.clone(),
                        detail: s.target_agent.as_ref().map(|a| format!("for {a}")).unwrap_or_default(),
                        body: s.content.clone(),
                    })
                    .collect();
            }
            Some(other) => task_other.push(Field {
                name: "memory seeds".into(),
                text: show(&serde_json::to_value(other).unwrap_or_default()),
            }),
            None => {}
        }
        if let Some(id) = &task.session_id {
            task_other.push(Field { name: "session id".into(), text: id.clone() });
        }
        if let Some(args) = &task.agent_args {
            task_other.push(Field { name: "agent arguments".into(), text: show(&Value::Object(args.clone())) });
        }
        let expected = match serde_json::to_value(&case.expected) {
            Ok(Value::Object(map)) => {
                map.iter().map(|(k, v)| Field { name: k.replace('_', " "), text: show(v) }).collect()
            }
            _ => Vec::new(),
        };
        let mut about = Vec::new();
        if let Some(name) = &case.name {
            about.push(Field { name: "name".into(), text: name.clone() });
        }
        if let Some(description) = &case.description {
            about.push(Field { name: "description".into(), text: description.clone() });
        }
        if let Some(review) = &case.review {
            about.push(Field { name: "review".into(), text: show(&serde_json::to_value(review).unwrap_or_default()) });
        }
        if let Some(confidence) = case.confidence {
            about.push(Field { name: "confidence".into(), text: confidence.to_string() });
        }
        if let Some(metadata) = &case.metadata {
            about.push(Field { name: "metadata".into(), text: show(&Value::Object(metadata.clone())) });
        }
        if let Some(provenance) = &case.provenance {
            if let Ok(value) = serde_json::to_value(provenance) {
                if value.as_object().is_some_and(|m| !m.is_empty()) {
                    about.push(Field { name: "provenance".into(), text: show(&value) });
                }
            }
        }
        Self {
            input_messages,
            input,
            turns,
            context,
            tools,
            seeds,
            task_other,
            expected,
            about,
            labels: case.labels.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_halves_are_apart() {
        let case: Case = serde_json::from_value(json!({
            "id": "c1", "input": "what is 2+2?", "labels": ["math"],
            "turns": [{"role": "hitl", "content": "use a calculator"}],
            "expected": {"output": "4", "acceptable": ["four"]},
            "metadata": {"source": "gsm8k"}
        }))
        .unwrap();
        let view = CaseView::new(&case);
        assert_eq!(view.input, "what is 2+2?");
        assert!(view.turns[0].hitl);
        let expected: Vec<_> = view.expected.iter().map(|f| (f.name.as_str(), f.text.as_str())).collect();
        assert_eq!(expected, [("output", "4"), ("acceptable", "[\n  \"four\"\n]")]);
        assert!(view.about.iter().any(|f| f.name == "metadata" && f.text.contains("gsm8k")));
    }

    #[test]
    fn previews_are_one_short_line() {
        assert_eq!(preview(&json!("a\n  b   c"), 10), "a b c");
        assert_eq!(preview(&json!("héllo wörld"), 5), "héllo…");
        assert_eq!(preview(&json!([{"role": "user", "content": "hi there"}]), 50), "hi there");
    }
}
