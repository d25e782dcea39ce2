//! `llm_judge`: renders a rubric prompt from the case and the run (minijinja, strict undefined,
//! bounded by fuel), sends it to a chat-completions endpoint, and reads the model's JSON verdict.
//!
//! Every way the judge can fail to give a verdict — HTTP error, timeout, a reply without a
//! readable `{"score", "rationale"}` object, a score outside 0..1 — is a `judge` failure, never a
//! score of 0. A template that uses a variable the case does not give is a `config` failure.
//!
//! The case's `rubric` may use letta's `{name}` placeholders; they are filled from
//! `rubric_vars` before the rubric reaches the template.
//!
//! The judge sees what the agent did: the built-in prompt lists the run's steps, each tool call
//! with its arguments and the answer it got (and how the snapshot served it: `matched`,
//! `default`, `unmatched`…), cut to a readable length so that large recorded answers (logs,
//! noise) keep the prompt bounded. Templates get the same as `steps` (lines) and `tool_calls`
//! (objects), and the whole trajectory as `trajectory`.

use std::time::Duration;

use casebook_model::{Case, Map};
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::{Value, json};

use super::spec::{ApiKey, LlmJudgeOptions, score_threshold, seconds};
use super::{clip, error_chain, json::fenced, read_verdict, text_of};
use crate::protocol::{Serving, Speaker, Step};
use crate::record::{Failure, Grade, RunOutput};

const TEMPLATE: &str = "judge";

/// Bounds the work one rendering may do, so a template cannot loop forever.
const FUEL: u64 = 2_000_000;

/// The variables every case gives the template.
const VARIABLES: [&str; 10] =
    ["input", "output", "expected", "outcomes", "rubric", "rubric_vars", "trajectory", "turns", "steps", "tool_calls"];

/// How much of a call's arguments, of an answer and of a message the judge is shown (in
/// characters), and how many steps: enough to judge by, bounded whatever the run did.
const ARGUMENTS_SHOWN: usize = 300;
const ANSWER_SHOWN: usize = 1_000;
const MESSAGE_SHOWN: usize = 1_000;
const STEPS_SHOWN: usize = 100;

const SYSTEM_PROMPT: &str = "You are a strict, fair evaluator of AI agents. Grade only what the user message asks. \
     Reply with a single JSON object and nothing else: \
     {\"score\": <number from 0 to 1>, \"pass\": <true or false>, \"rationale\": \"<one or two sentences>\"}.";

/// The prompt used when the grader has no `template`.
pub const DEFAULT_JUDGE_TEMPLATE: &str = "\
Grade the answer an AI agent gave to the task below.

# Task
{{ input if input is string else input | tojson }}
{% if turns | length > 1 %}
# The agent's answer at each turn
{% for turn in turns %}{{ loop.index }}. {{ turn if turn is string else turn | tojson }}
{% endfor %}{% endif %}
# The agent's final answer
{{ output if output is string else output | tojson }}
{% if expected is not none %}
# Reference answer
{{ expected if expected is string else expected | tojson }}
{% endif %}{% if outcomes %}
# Behaviour the agent should show
{% for outcome in outcomes %}- {{ outcome }}
{% endfor %}{% endif %}{% if rubric %}
# Rubric
{{ rubric }}
{% endif %}{% if rubric_vars %}
# Rubric variables
{{ rubric_vars | tojson }}
{% endif %}{% if steps %}
# What the agent did (its trajectory: messages, and each tool call with the answer it got)
{% for step in steps %}{{ loop.index }}. {{ step }}
{% endfor %}{% endif %}
Score from 0 (wrong or harmful) to 1 (fully meets the task{% if rubric %} and the rubric{% endif %}). \
Reply with only a JSON object: {\"score\": <0..1>, \"pass\": <true|false>, \"rationale\": \"<why>\"}.
";

#[derive(Debug)]
pub(super) struct Judge {
    url: reqwest::Url,
    model: String,
    api_key: Option<ApiKey>,
    env: Environment<'static>,
    pass_score: f64,
    timeout: Duration,
    temperature: Option<f64>,
    client: reqwest::Client,
}

impl Judge {
    pub(super) fn build(options: &LlmJudgeOptions) -> Result<Self, String> {
        let endpoint = options.endpoint.trim_end_matches('/');
        let url = if endpoint.ends_with("/chat/completions") {
            endpoint.to_owned()
        } else {
            format!("{endpoint}/chat/completions")
        };
        let url = reqwest::Url::parse(&url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .ok_or_else(|| format!("`endpoint` must be an http(s) URL, not `{}`", options.endpoint))?;
        if options.model.trim().is_empty() {
            return Err("`model` is empty".to_owned());
        }
        let api_key = match (&options.api_key, &options.api_key_env) {
            (Some(key), _) => Some(key.clone()),
            (None, Some(var)) => {
                return Err(format!("the environment variable `{var}` named by `api_key_env` is not set"));
            }
            (None, None) => None,
        };
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_fuel(Some(FUEL));
        env.add_filter("tojson", to_json);
        let template = options.template.clone().unwrap_or_else(|| DEFAULT_JUDGE_TEMPLATE.to_owned());
        env.add_template_owned(TEMPLATE, template).map_err(|e| format!("the `template` does not parse: {e}"))?;
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| format!("cannot set up an HTTP client: {}", error_chain(&e)))?;
        Ok(Judge {
            url,
            model: options.model.clone(),
            api_key,
            env,
            pass_score: score_threshold(options.pass_score, "pass_score")?,
            timeout: seconds(options.timeout_secs, "timeout_secs")?,
            temperature: match options.temperature {
                Some(t) if !(0.0..=2.0).contains(&t) => {
                    return Err(format!(
                        "`temperature` must be between 0 and 2 (or null for the model's own), not {t}"
                    ));
                }
                t => t,
            },
            client,
        })
    }

    pub(super) async fn grade(&self, case: &Case, run: &RunOutput) -> Result<Grade, Failure> {
        let prompt = self.render(case, run)?;
        let failure = |message: String| Failure::new("judge", format!("case `{}`: {message}", case.id));
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt},
            ],
        });
        if let Some(temperature) = self.temperature {
            body["temperature"] = json!(temperature);
        }
        let mut request = self.client.post(self.url.clone()).json(&body).timeout(self.timeout);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        let sent = async {
            let response = request.send().await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.text().await?))
        };
        let (status, text) = sent.await.map_err(|e| {
            if e.is_timeout() {
                failure(format!("the judge at {} did not answer within {:?}", self.url, self.timeout))
            } else {
                failure(format!("cannot reach the judge at {}: {}", self.url, error_chain(&e)))
            }
        })?;
        if !status.is_success() {
            return Err(failure(format!("the judge answered HTTP {status}: {}", clip(text.trim(), 300))));
        }
        let reply: Value = serde_json::from_str(&text)
            .map_err(|e| failure(format!("the judge's reply is not JSON ({e}): {}", clip(text.trim(), 300))))?;
        let content = reply
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| failure("the judge's reply has no `choices[0].message.content` text".to_owned()))?;
        let verdict = verdict_object(content).ok_or_else(|| {
            failure(format!("the judge's answer holds no JSON verdict object: {}", clip(content.trim(), 300)))
        })?;
        read_verdict(&verdict, self.pass_score).map_err(|e| failure(format!("the judge's verdict is unusable: {e}")))
    }

    /// The user message for this case and run.
    pub(super) fn render(&self, case: &Case, run: &RunOutput) -> Result<String, Failure> {
        let config = |message: String| Failure::new("config", format!("case `{}`: {message}", case.id));
        let context = context(case, run).map_err(config)?;
        let template = self.env.get_template(TEMPLATE).map_err(|e| config(format!("judge template: {e}")))?;
        template.render(&context).map_err(|e| match e.kind() {
            ErrorKind::UndefinedError => {
                let globals: Vec<&str> = self.env.globals().map(|(name, _)| name).collect();
                let mut unknown: Vec<String> = template
                    .undeclared_variables(false)
                    .into_iter()
                    .filter(|name| !context.contains_key(name) && !globals.contains(&name.as_str()) && name != "loop")
                    .collect();
                unknown.sort();
                if unknown.is_empty() {
                    config(format!("the judge template uses an undefined value: {e}"))
                } else {
                    let names = unknown.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
                    config(format!(
                        "the judge template uses the undefined variable {names} (it knows {}, and the case's \
                         `rubric_vars`)",
                        VARIABLES.map(|v| format!("`{v}`")).join(", ")
                    ))
                }
            }
            ErrorKind::OutOfFuel => config("the judge template ran too long (out of fuel)".to_owned()),
            _ => config(format!("the judge template failed: {e}")),
        })
    }
}

/// The template's variables (see [`super::LlmJudgeOptions::template`]).
fn context(case: &Case, run: &RunOutput) -> Result<Map, String> {
    let expected = &case.expected;
    let vars = expected.rubric_vars.clone().unwrap_or_default();
    let rubric = match (&expected.rubric, &expected.rubric_path) {
        (Some(rubric), _) => Value::String(fill_placeholders(rubric, &vars)),
        (None, Some(path)) => {
            return Err(format!(
                "`expected.rubric_path` (`{path}`) must be read into `expected.rubric` before judging"
            ));
        }
        (None, None) => Value::Null,
    };
    let trajectory = serde_json::to_value(&run.trajectory).map_err(|e| format!("trajectory: {e}"))?;
    let mut context = Map::new();
    context.insert("input".into(), case.task.input.clone());
    context.insert("output".into(), run.output.clone());
    context.insert("expected".into(), expected.output.clone().unwrap_or(Value::Null));
    context.insert(
        "outcomes".into(),
        expected.outcomes.iter().flatten().map(|outcome| Value::String(outcome.text().to_owned())).collect(),
    );
    context.insert("rubric".into(), rubric);
    context.insert("trajectory".into(), trajectory);
    context.insert("turns".into(), Value::Array(run.per_turn.clone()));
    context.insert("steps".into(), steps(&run.trajectory).into_iter().map(Value::String).collect());
    context.insert("tool_calls".into(), tool_calls(&run.trajectory));
    for (key, value) in &vars {
        if !VARIABLES.contains(&key.as_str()) {
            context.insert(key.clone(), value.clone());
        }
    }
    context.insert("rubric_vars".into(), Value::Object(vars));
    Ok(context)
}

/// A value as one line of text for the prompt: a string as itself, anything else as compact
/// JSON; cut after `max` characters.
fn shown(value: &Value, max: usize) -> String {
    clip(&text_of(value), max)
}

/// How the snapshot served a call, as written in results (`matched`, `default`, `unmatched`, …).
fn how(serving: &Serving) -> String {
    serde_json::to_value(serving.how).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Each step of `trajectory` as one line: `user: …`, `assistant: …`, or a call with its
/// arguments and answer: ``call `logs` {"q":"x"} → [matched #0] ["timeout"]``. Past
/// [`STEPS_SHOWN`] steps, the first and the last are kept and a line says how many are left out.
fn steps(trajectory: &[Step]) -> Vec<String> {
    let line = |step: &Step| match step {
        Step::Message { role, content, operator } => {
            let who = match role {
                _ if *operator => "operator",
                Speaker::User => "user",
                Speaker::Hitl => "operator",
                Speaker::System => "system",
                Speaker::Assistant => "assistant",
                Speaker::Tool => "tool",
            };
            format!("{who}: {}", shown(content, MESSAGE_SHOWN))
        }
        Step::ToolCall { name, arguments, result, served } => {
            let arguments = clip(&arguments.to_string(), ARGUMENTS_SHOWN);
            let answer = result.as_ref().map(|r| shown(r, ANSWER_SHOWN));
            match (served, answer) {
                (Some(serving), answer) => {
                    let mut tag = how(serving);
                    if let Some(entry) = serving.entry {
                        tag.push_str(&format!(" #{entry}"));
                    }
                    if serving.error {
                        tag.push_str(", error");
                    }
                    format!("call `{name}` {arguments} → [{tag}] {}", answer.unwrap_or_default())
                }
                (None, Some(answer)) => format!("call `{name}` {arguments} → {answer}"),
                (None, None) => format!("call `{name}` {arguments} (no answer recorded)"),
            }
        }
        Step::Other { detail } => {
            let kind = detail.get("type").and_then(Value::as_str).unwrap_or("step");
            format!("{kind}: {}", clip(&Value::Object(detail.clone()).to_string(), MESSAGE_SHOWN))
        }
    };
    if trajectory.len() <= STEPS_SHOWN {
        return trajectory.iter().map(line).collect();
    }
    let tail = STEPS_SHOWN / 5;
    let head = STEPS_SHOWN - tail;
    let mut lines: Vec<String> = trajectory[..head].iter().map(line).collect();
    lines.push(format!("… {} steps left out …", trajectory.len() - head - tail));
    lines.extend(trajectory[trajectory.len() - tail..].iter().map(line));
    lines
}

/// The run's tool calls for templates: `{name, arguments, answer, served, entry, error}`, with
/// the arguments and answer as text cut as in [`steps`]; `served` is `null` for a call the agent
/// made with its own tools.
fn tool_calls(trajectory: &[Step]) -> Value {
    trajectory
        .iter()
        .filter_map(|step| match step {
            Step::ToolCall { name, arguments, result, served } => Some(json!({
                "name": name,
                "arguments": clip(&arguments.to_string(), ARGUMENTS_SHOWN),
                "answer": result.as_ref().map(|r| shown(r, ANSWER_SHOWN)),
                "served": served.as_ref().map(how),
                "entry": served.as_ref().and_then(|s| s.entry),
                "error": served.as_ref().is_some_and(|s| s.error),
            })),
            _ => None,
        })
        .collect()
}

/// Replaces each `{name}` whose name is a key of `vars` by that value's text; other braces stay.
fn fill_placeholders(text: &str, vars: &Map) -> String {
    let mut filled = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        filled.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}').and_then(|close| vars.get(&after[..close]).map(|value| (close, value))) {
            Some((close, value)) => {
                filled.push_str(&text_of(value));
                rest = &after[close + 1..];
            }
            None => {
                filled.push('{');
                rest = after;
            }
        }
    }
    filled.push_str(rest);
    filled
}

/// The `tojson` filter: pretty JSON, without the HTML escaping of minijinja's own (prompts are
/// not HTML).
fn to_json(value: minijinja::Value) -> Result<String, minijinja::Error> {
    serde_json::to_string_pretty(&value)
        .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("cannot write JSON: {e}")))
}

/// The verdict object in a model's answer: the whole answer, the inside of a code fence, or the
/// text from the first `{` to the last `}`.
fn verdict_object(content: &str) -> Option<Map> {
    let braces = content.find('{').zip(content.rfind('}')).and_then(|(a, b)| content.get(a..=b));
    [Some(content.trim()), fenced(content), braces].into_iter().flatten().find_map(|text| {
        match serde_json::from_str(text.trim()) {
            Ok(Value::Object(object)) => Some(object),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use casebook_model::{Expectations, Outcome, Task};

    use super::*;

    fn options() -> LlmJudgeOptions {
        LlmJudgeOptions {
            endpoint: "http://127.0.0.1:9/v1/".into(),
            model: "m".into(),
            api_key_env: None,
            api_key: None,
            template: None,
            pass_score: 0.5,
            timeout_secs: 1.0,
            temperature: Some(0.0),
        }
    }

    #[test]
    fn a_temperature_out_of_range_is_refused() {
        let err = Judge::build(&LlmJudgeOptions { temperature: Some(3.0), ..options() }).err().unwrap_or_default();
        assert!(err.contains("`temperature` must be between 0 and 2"), "{err}");
        assert!(Judge::build(&LlmJudgeOptions { temperature: None, ..options() }).is_ok());
    }

    fn judge(template: Option<&str>) -> Judge {
        Judge::build(&LlmJudgeOptions { template: template.map(str::to_owned), ..options() }).unwrap()
    }

    fn case() -> Case {
        let vars = json!({"reference": "def fib(n)", "max_words": 50});
        Case {
            id: "c9".into(),
            name: None,
            description: None,
            labels: None,
            task: Task::new(json!("Write fib")),
            expected: Expectations {
                output: Some(json!("fib code")),
                outcomes: Some(vec![Outcome::Text("uses recursion".into())]),
                rubric: Some("Compare with {reference}; at most {max_words} words. Keep {braces}.".into()),
                rubric_vars: serde_json::from_value(vars).unwrap(),
                ..Expectations::default()
            },
            metadata: None,
            confidence: None,
            review: None,
            provenance: None,
        }
    }

    fn run() -> RunOutput {
        RunOutput {
            output: json!("def fib(n): ..."),
            per_turn: vec![json!("def fib(n): ...")],
            trajectory: vec![Step::ToolCall {
                name: "python".into(),
                arguments: json!({"code": "fib(10)"}),
                result: Some(json!(55)),
                served: None,
            }],
            millis: 3,
            ..RunOutput::default()
        }
    }

    #[test]
    fn endpoint_gets_the_chat_completions_path() {
        assert_eq!(judge(None).url.as_str(), "http://127.0.0.1:9/v1/chat/completions");
    }

    #[test]
    fn default_template_shows_everything_the_judge_needs() {
        let prompt = judge(None).render(&case(), &run()).unwrap();
        for part in [
            "Write fib",
            "def fib(n): ...",
            "fib code",
            "- uses recursion",
            "Compare with def fib(n); at most 50 words. Keep {braces}.",
            "\"max_words\": 50",
            "1. call `python` {\"code\":\"fib(10)\"} → 55",
        ] {
            assert!(prompt.contains(part), "missing {part:?} in:\n{prompt}");
        }
    }

    #[test]
    fn steps_show_each_call_with_its_served_answer_cut_to_length() {
        use casebook_model::snapshot::Served;
        let call = |name: &str, arguments: Value, result: Value, how: Served, entry: Option<usize>, error: bool| {
            Step::ToolCall {
                name: name.into(),
                arguments,
                result: Some(result),
                served: Some(Serving { how, entry, error }),
            }
        };
        let trajectory = vec![
            Step::Message { role: Speaker::User, content: json!("Pourquoi la caisse est lente ?"), operator: false },
            call(
                "métriques",
                json!({"service": "caisse-épicerie"}),
                json!({"pool": "100/100"}),
                Served::Matched,
                Some(0),
                false,
            ),
            call("tas", json!({}), json!("there is no tool `tas`"), Served::UnknownTool, None, true),
            call("journaux", json!({"q": "é".repeat(400)}), json!(["東京".repeat(800)]), Served::Default, None, false),
            Step::Message { role: Speaker::Hitl, content: json!("continue"), operator: true },
            Step::Message { role: Speaker::Assistant, content: json!("le pool est plein"), operator: false },
        ];
        let lines = steps(&trajectory);
        assert_eq!(lines[0], "user: Pourquoi la caisse est lente ?");
        assert_eq!(
            lines[1],
            "call `métriques` {\"service\":\"caisse-épicerie\"} → [matched #0] {\"pool\":\"100/100\"}"
        );
        assert_eq!(lines[2], "call `tas` {} → [unknown_tool, error] there is no tool `tas`");
        // Long arguments and answers are cut on characters, each with `…`.
        let (arguments, answer) = lines[3].split_once(" → [default] ").unwrap();
        assert!(arguments.starts_with("call `journaux` {\"q\":\"éé") && arguments.ends_with("é…"), "{arguments}");
        assert_eq!(arguments.chars().count(), "call `journaux` ".len() + ARGUMENTS_SHOWN + 1);
        assert!(answer.starts_with("[\"東京東京") && answer.ends_with('…'), "{answer}");
        assert_eq!(answer.chars().count(), ANSWER_SHOWN + 1);
        assert_eq!(&lines[4..], ["operator: continue", "assistant: le pool est plein"]);
        let calls = tool_calls(&trajectory);
        assert_eq!(
            calls[0],
            json!({"name": "métriques", "arguments": "{\"service\":\"caisse-épicerie\"}",
                                    "answer": "{\"pool\":\"100/100\"}", "served": "matched", "entry": 0, "error": false})
        );
        assert_eq!(calls[1]["served"], "unknown_tool");
        // A long run keeps its first and last steps and says how many are left out.
        let long: Vec<Step> =
            (0..250).map(|i| Step::Message { role: Speaker::User, content: json!(i), operator: false }).collect();
        let lines = steps(&long);
        assert_eq!(lines.len(), STEPS_SHOWN + 1);
        assert_eq!(
            (lines[79].as_str(), lines[80].as_str(), lines[81].as_str()),
            ("user: 79", "… 150 steps left out …", "user: 230")
        );
    }

    #[test]
    fn rubric_vars_are_also_top_level_variables() {
        let prompt = judge(Some("{{ reference }} / {{ rubric_vars.max_words }} / {{ outcomes | join(',') }}"))
            .render(&case(), &run())
            .unwrap();
        assert_eq!(prompt, "def fib(n) / 50 / uses recursion");
    }

    #[test]
    fn an_undefined_variable_is_a_config_error_naming_it() {
        let err = judge(Some("Rubric: {{ rubrik }}")).render(&case(), &run()).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(
            err.message.starts_with("case `c9`: the judge template uses the undefined variable `rubrik`"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_runaway_template_runs_out_of_fuel() {
        let err = judge(Some("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"))
            .render(&case(), &run())
            .unwrap_err();
        assert!(err.message.contains("out of fuel"), "{}", err.message);
    }

    #[test]
    fn an_unread_rubric_path_is_a_config_error() {
        let mut case = case();
        case.expected.rubric = None;
        case.expected.rubric_path = Some("rubric.txt".into());
        let err = judge(None).render(&case, &run()).unwrap_err();
        assert!(err.message.contains("`expected.rubric_path` (`rubric.txt`) must be read"), "{}", err.message);
    }

    #[test]
    fn verdict_is_found_in_fences_and_prose() {
        let fenced = "Sure.\n```json\n{\"score\": 1, \"rationale\": \"ok\"}\n```";
        assert_eq!(verdict_object(fenced).unwrap()["score"], json!(1));
        let inline = "My verdict: {\"score\": 0.2, \"rationale\": \"{nested} braces\"} -- done";
        assert_eq!(verdict_object(inline).unwrap()["score"], json!(0.2));
        assert!(verdict_object("The answer looks good, 9/10.").is_none());
    }
}
