//! The JSON Schema of the agent protocol (request and reply), generated from the types in
//! [`crate::protocol`]; `docs/agent-protocol.schema.json` is this, checked in.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::protocol::{AgentReply, AgentRequest};

/// One schema document whose `$defs` hold `AgentRequest` (what casebook sends: the serialising
/// side of the types) and `AgentReply` (what it accepts: the deserialising side); the document
/// itself accepts either.
pub fn agent_protocol_schema() -> Value {
    let mut send = SchemaSettings::draft2020_12().for_serialize().into_generator();
    let request = send.subschema_for::<AgentRequest>().to_value();
    let mut receive = SchemaSettings::draft2020_12().for_deserialize().into_generator();
    let mut reply = receive.subschema_for::<AgentReply>().to_value();
    let mut defs = send.take_definitions(true);
    let mut reply_defs = receive.take_definitions(true);
    // A type both sides use is described once, unless the two sides differ (a field with a
    // default is optional to receive): then the reply's version is `{name}Reply`, and so is any
    // reply-side type that refers to one renamed, until nothing differs.
    let mut renamed: Vec<String> = Vec::new();
    loop {
        let differing: Vec<String> = reply_defs
            .iter()
            .filter(|(name, schema)| !renamed.contains(name) && defs.get(*name).is_some_and(|sent| sent != *schema))
            .map(|(name, _)| name.clone())
            .collect();
        if differing.is_empty() {
            break;
        }
        for name in differing {
            rename_refs(&mut reply, &name);
            for schema in reply_defs.values_mut() {
                rename_refs(schema, &name);
            }
            renamed.push(name);
        }
    }
    for (name, schema) in reply_defs {
        let name = if renamed.contains(&name) { format!("{name}Reply") } else { name };
        defs.insert(name, schema);
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "casebook agent protocol",
        "description": "A turn's request (`#/$defs/AgentRequest`), POSTed by casebook to an `http` target or written as \
                        one line to a `command` target, and the agent's reply (`#/$defs/AgentReply`). \
                        See docs/agent-protocol.md.",
        "anyOf": [request, reply],
        "$defs": defs,
    })
}

/// Points the `$ref`s to `name` in `schema` at `{name}Reply`.
fn rename_refs(schema: &mut Value, name: &str) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(target) if key == "$ref" && *target == format!("#/$defs/{name}") => {
                        *target = format!("#/$defs/{name}Reply");
                    }
                    _ => rename_refs(value, name),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rename_refs(item, name)),
        _ => {}
    }
}
