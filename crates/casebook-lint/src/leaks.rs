//! Leaked ground truth: expectation text found in the half of a case the agent sees.
//!
//! The answers looked for are the expected output, the per-turn expectations, the acceptable
//! answers (each a string or a number; for a structured value, its strings of four letters or
//! more, as `"ok"` inside a JSON answer says little), the expected outcomes, and the values of
//! promptfoo asserts that hold the answer's text (`equals`, `contains` and the like). They are looked
//! for, normalised and as whole tokens, in every string of the task half: the input, the
//! turns, context items, tools (with the results and errors their recorded answers and
//! defaults give), memory seeds and agent arguments.
//!
//! In the conversation, an answer is looked for in the message it answers: a per-turn
//! expectation in its own message, the expected output and acceptable answers in the last one.
//! An answer said in an earlier message is what a memory test is made of ("my order is 4411",
//! then "which order did I mention?"), not a leak. Outcomes are looked for in every message.
//!
//! Multiple choice: the options a task offers are its choices (the `choices` context item), or
//! the lines of one of its texts that list them (`A. Paris`, `B) Berlin`, `(C) Rome`, at least
//! an `A` and a `B` line, as OpenAI evals multiple-choice prompts list them). An answer that is
//! the label of an offered option (`A`, `(A)`, `A.`) is not looked for as such (the agent is
//! meant to see the label, and a lone letter matches the word "a"): the text of the option it
//! names is looked for instead. An answer that is the text of an offered option (or stands for
//! one) is not looked for among the options (the choices item, the option lines), but still in
//! the rest: the right choice's text in the question itself is a leak.

use casebook_model::{Expectations, Task, choices};
use serde_json::Value;

use crate::text::{Token, has_word, normalize};

/// One answer found in the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// Where the answer is in the case (`/expected/output`).
    pub answer_at: String,
    /// The answer as written (cut when long, see `casebook_model::excerpt`).
    pub answer: String,
    /// Where it was found (`/context/0/content`).
    pub found_at: String,
}

/// Leaks reported per case at most: a case that leaks more says so once more.
pub const MAX_PER_CASE: usize = 8;

/// One expectation text to look for.
pub(crate) struct Answer {
    /// The message it answers (see [`Answer::sees`]).
    turn: Answers,
    at: String,
    written: String,
    normal: String,
    token: Token,
    /// The text of one of the options the task offers: not looked for among them.
    pub(crate) option: bool,
}

impl Answer {
    /// Whether the answer is looked for in `message` (0 the input, `j + 1` turn `j`; `None` for
    /// what the agent has from the start), `last` being the last message.
    pub(crate) fn sees(&self, message: Option<usize>, last: usize) -> bool {
        match (message, self.turn) {
            (None, _) | (Some(_), Answers::Anything) => true,
            (Some(message), Answers::Message(turn)) => message == turn,
            (Some(message), Answers::Last) => message == last,
        }
    }

    pub(crate) fn is_in(&self, normalised: &str) -> bool {
        self.token.is_in(normalised)
    }

    pub(crate) fn leak(&self, found_at: &str) -> Leak {
        Leak {
            answer_at: self.at.clone(),
            answer: casebook_model::excerpt(&self.written).into_owned(),
            found_at: found_at.to_owned(),
        }
    }
}

/// The message an answer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answers {
    /// A per-turn expectation's own.
    Message(usize),
    /// The expected output's and the acceptable answers': the last.
    Last,
    /// An outcome: behaviour over the whole conversation.
    Anything,
}

fn push_answer(answers: &mut Vec<Answer>, turn: Answers, at: String, written: String) {
    let normal = normalize(&written);
    if has_word(&normal) && !answers.iter().any(|a| a.normal == normal && a.turn == turn) {
        let token = Token::new(&normal);
        answers.push(Answer { turn, at, written, normal, token, option: false });
    }
}

/// The options a task offers (see the module docs): label and text of each, and the texts
/// normalised.
#[derive(Debug, Default)]
struct Offered<'t> {
    options: Vec<(String, &'t str)>,
    normal: Vec<String>,
}

impl<'t> Offered<'t> {
    fn of(task: &'t Task) -> Offered<'t> {
        let mut offered = Offered::default();
        if let Some(choices) = choices::of(task) {
            offered.options.extend(choices.iter().enumerate().map(|(i, c)| (choices::letter(i), *c)));
        }
        let mut texts = Vec::new();
        strings_of(&task.input, &mut String::new(), &mut texts);
        let turns = task.turns.iter().flatten().map(|t| t.content.as_str());
        for text in texts.into_iter().map(|(_, text)| text).chain(turns) {
            for line in option_lines(text) {
                offered.options.push((line.label.to_owned(), line.text));
            }
        }
        offered.normal = offered.options.iter().map(|(_, text)| normalize(text)).collect();
        offered
    }

    /// The text of the offered option an answer is the label of (`A`, `(A)`, `A.`, `A)`).
    fn text_of_label(&self, written: &str) -> Option<&'t str> {
        let label = written.trim();
        let label = label.strip_prefix('(').and_then(|l| l.strip_suffix(')')).unwrap_or(label);
        let label = label.strip_suffix(['.', ')', ':']).unwrap_or(label).trim();
        self.options.iter().find(|(l, _)| l == label).map(|(_, text)| *text)
    }
}

/// One line of a text that lists an option: its label and its text.
pub(crate) struct OptionLine<'t> {
    pub label: &'t str,
    pub text: &'t str,
    /// The line's byte range in the text.
    pub range: std::ops::Range<usize>,
}

/// The lines of `text` that list options (`A. …`, `B) …`, `(C) …`, `D: …`), when they are a list:
/// at least an `A` line and a `B` line.
pub(crate) fn option_lines(text: &str) -> Vec<OptionLine<'_>> {
    let mut lines = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let range = start..start + line.len();
        start = range.end;
        let body = line.trim();
        let (label, rest) = match body.strip_prefix('(') {
            Some(rest) => match rest.as_bytes() {
                [c, b')', ..] if c.is_ascii_uppercase() => (&rest[..1], &rest[2..]),
                _ => continue,
            },
            None => match body.as_bytes() {
                [c, b'.' | b')' | b':', ..] if c.is_ascii_uppercase() => (&body[..1], &body[2..]),
                _ => continue,
            },
        };
        if rest.starts_with(char::is_whitespace) && !rest.trim().is_empty() {
            lines.push(OptionLine { label, text: rest.trim(), range });
        }
    }
    let has = |l: &str| lines.iter().any(|line| line.label == l);
    if has("A") && has("B") { lines } else { Vec::new() }
}

/// `text` without the lines that list options, each replaced by a line break (so the words
/// around them stay apart); `None` when it lists none.
pub(crate) fn without_options(text: &str) -> Option<String> {
    let lines = option_lines(text);
    if lines.is_empty() {
        return None;
    }
    let mut rest = String::with_capacity(text.len());
    let mut at = 0;
    for line in lines {
        rest.push_str(&text[at..line.range.start]);
        rest.push('\n');
        at = line.range.end;
    }
    rest.push_str(&text[at..]);
    Some(rest)
}

/// The answers of a value: itself when it is a string or a number, else its long enough strings.
fn answers_of(value: &Value, turn: Answers, at: String, answers: &mut Vec<Answer>) {
    match value {
        Value::String(s) => push_answer(answers, turn, at, s.clone()),
        Value::Number(n) => push_answer(answers, turn, at, n.to_string()),
        Value::Array(_) | Value::Object(_) => {
            let mut strings = Vec::new();
            strings_of(value, &mut at.clone(), &mut strings);
            for (at, s) in strings {
                if s.chars().filter(|c| c.is_alphanumeric()).count() >= 4 {
                    push_answer(answers, turn, at, s.to_owned());
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

/// The answers of `expected` to look for in `task` (see the module docs).
pub(crate) fn answers(expected: &Expectations, task: &Task) -> Vec<Answer> {
    let mut answers = found_answers(expected);
    if answers.is_empty() {
        return answers;
    }
    let offered = Offered::of(task);
    if offered.options.is_empty() {
        return answers;
    }
    // A label stands for its option's text, which is looked for outside the options.
    let mut named = Vec::new();
    answers.retain(|a| match offered.text_of_label(&a.written) {
        Some(text) => {
            named.push((a.turn, a.at.clone(), format!("{} ({text})", a.written.trim()), normalize(text)));
            false
        }
        None => true,
    });
    for (turn, at, written, normal) in named {
        if has_word(&normal) && !answers.iter().any(|a| a.normal == normal && a.turn == turn) {
            let token = Token::new(&normal);
            answers.push(Answer { turn, at, written, normal, token, option: true });
        }
    }
    for answer in &mut answers {
        answer.option |= offered.normal.contains(&answer.normal);
    }
    answers
}

fn found_answers(expected: &Expectations) -> Vec<Answer> {
    let mut answers = Vec::new();
    if let Some(output) = &expected.output {
        answers_of(output, Answers::Last, "/expected/output".into(), &mut answers);
    }
    for (i, value) in expected.per_turn.iter().flatten().enumerate() {
        answers_of(value, Answers::Message(i), format!("/expected/per_turn/{i}"), &mut answers);
    }
    for (i, value) in expected.acceptable.iter().flatten().enumerate() {
        answers_of(value, Answers::Last, format!("/expected/acceptable/{i}"), &mut answers);
    }
    for (i, outcome) in expected.outcomes.iter().flatten().enumerate() {
        push_answer(&mut answers, Answers::Anything, format!("/expected/outcomes/{i}"), outcome.text().to_owned());
    }
    // promptfoo's asserts that hold the answer's own text (not a `not-` one, whose text the
    // answer must not hold, nor a rubric, a pattern or code).
    let asserts = expected.extra.get("assert").and_then(Value::as_array);
    for (i, assert) in asserts.into_iter().flatten().enumerate() {
        let kind = assert.get("type").and_then(Value::as_str).unwrap_or_default();
        if let (true, Some(value)) = (ANSWER_ASSERTS.contains(&kind), assert.get("value")) {
            answers_of(value, Answers::Last, format!("/expected/assert/{i}/value"), &mut answers);
        }
    }
    answers
}

/// The promptfoo assert types whose value is text of the expected answer.
const ANSWER_ASSERTS: &[&str] = &[
    "equals",
    "contains",
    "icontains",
    "contains-any",
    "contains-all",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "similar",
    "levenshtein",
];

/// Appends `token` to a JSON Pointer, escaped.
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Every string in `value` (not its keys) with its pointer, `pointer` being the value's own.
fn strings_of<'v>(value: &'v Value, pointer: &mut String, out: &mut Vec<(String, &'v str)>) {
    let visit = |pointer: &mut String, token: &str, item: &'v Value, out: &mut Vec<(String, &'v str)>| {
        let len = pointer.len();
        push_token(pointer, token);
        strings_of(item, pointer, out);
        pointer.truncate(len);
    };
    match value {
        Value::String(s) => out.push((pointer.clone(), s)),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, item)| visit(pointer, &i.to_string(), item, out)),
        Value::Object(map) => map.iter().for_each(|(key, item)| visit(pointer, key, item, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The expectation texts of `expected` found in `task`, at most [`MAX_PER_CASE`] + 1 (one more
/// says there are more).
#[cfg(test)]
fn find(task: &casebook_model::Task, expected: &Expectations) -> Vec<Leak> {
    crate::fingerprint::walk(task, &answers(expected, task)).leaks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn leaks_of(case: Value) -> Vec<(String, String)> {
        let case: casebook_model::Case = serde_json::from_value(case).unwrap();
        find(&case.task, &case.expected).into_iter().map(|l| (l.answer_at, l.found_at)).collect()
    }

    #[test]
    fn finds_answers_anywhere_the_agent_looks() {
        let found = leaks_of(json!({
            "id": "a",
            "input": [{"role": "user", "content": "Where is the Louvre?"}],
            "turns": [{"role": "user", "content": "Hint: it is in PARIS."}],
            "context": [{"type": "document", "content": {"text": "x", "city": "Paris"}}],
            "tools": [{"name": "lookup", "description": "Looks up a city such as Paris"}],
            "memory_seeds": [{"source": "profile", "content": "lives in paris"}],
            "agent_args": {"default_city": "Paris"},
            "expected": {"output": "Paris"}
        }));
        let at: Vec<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
        assert_eq!(
            at,
            [
                "/turns/0/content",
                "/context/0/content/city",
                "/tools/0/description",
                "/memory_seeds/0/content",
                "/agent_args/default_city"
            ]
        );
        assert!(found.iter().all(|(a, _)| a == "/expected/output"));
    }

    #[test]
    fn recorded_tool_answers_are_looked_in_but_not_the_calls_they_answer() {
        let found = leaks_of(json!({
            "id": "a",
            "input": "Which pool ran out?",
            "tools": [
                {"name": "logs", "responses": [
                    // The conditions are not shown to the agent: not a leak.
                    {"when": {"arguments": {"pool": "checkout-db"}}, "result": {"lines": ["ERROR checkout-db exhausted"]}},
                    {"when": {"matches": {"q": "checkout-db"}}, "error": "checkout-db: rate limited"}
                ], "default": {"result": "see checkout-db"}},
                {"name": "metrics", "responses": {"file": "snapshots/m.json", "content": [
                    {"when": {"includes": {"service": "checkout-db"}}, "result": "Größe: checkout-db 東京"}
                ]}, "default": {"error": "no checkout-db here"}}
            ],
            "expected": {"output": "checkout-db"}
        }));
        let at: Vec<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
        assert_eq!(
            at,
            [
                "/tools/0/responses/0/result/lines/0",
                "/tools/0/responses/1/error",
                "/tools/0/default/result",
                "/tools/1/responses/content/0/result",
                "/tools/1/default/error"
            ]
        );
    }

    #[test]
    fn short_answers_are_whole_tokens_only() {
        let case = |input: &str, output: Value| json!({"id": "a", "input": input, "expected": {"output": output}});
        assert!(leaks_of(case("What is 2 + 2? Not 40, not 4.5.", json!(4))).is_empty());
        assert_eq!(leaks_of(case("What is 2 + 2? (answer: 4)", json!(4))).len(), 1);
        assert!(leaks_of(case("Say yesterday's date", json!("yes"))).is_empty());
        // Booleans and punctuation are never looked for.
        assert!(leaks_of(case("true or false: the sky is blue", json!(true))).is_empty());
        assert!(leaks_of(case("end with a period.", json!("."))).is_empty());
    }

    #[test]
    fn every_kind_of_expectation_is_looked_for() {
        let found = leaks_of(json!({
            "id": "a",
            "input": "Refund policy: refunds take 5 business days; escalate to tier-2 support",
            "expected": {
                "per_turn": ["refunds take 5 business days", "ok"],
                "acceptable": ["five days"],
                "outcomes": [{"outcome": "escalate to tier-2 support", "role": "gate"}],
                "output": {"status": "ok", "reason": "business days"}
            }
        }));
        let answers: Vec<&str> = found.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(answers, ["/expected/output/reason", "/expected/per_turn/0", "/expected/outcomes/0"]);
    }

    #[test]
    fn in_a_conversation_an_answer_is_looked_for_in_the_message_it_answers() {
        // letta's per-turn grading: answers come up in other messages ("3 * 4" holds the `4` of
        // "2 + 2"), which is no leak; the last message gives its own answer away.
        let found = leaks_of(json!({
            "id": "a",
            "input": "Answer with only the result: 2 + 2",
            "turns": [
                {"role": "user", "content": "Answer with only the result: 3 * 4"},
                {"role": "user", "content": "and 12 + 1? (it is 13)"}
            ],
            "expected": {"per_turn": ["4", "12", "13"]}
        }));
        assert_eq!(found, [("/expected/per_turn/2".to_owned(), "/turns/1/content".to_owned())]);
        // A memory test: told a number, asked for it later. The output is looked for in the
        // last message only, but everywhere outside the conversation.
        let memory = |seed: &str| {
            leaks_of(json!({
                "id": "m",
                "input": "My order number is 4411.",
                "turns": [{"role": "user", "content": "Which order did I mention?"}],
                "memory_seeds": [{"source": "crm", "content": seed}],
                "expected": {"output": "4411", "outcomes": ["mentions order 4411"]}
            }))
        };
        assert!(memory("a returning customer").is_empty());
        assert_eq!(memory("last order: 4411"), [("/expected/output".to_owned(), "/memory_seeds/0/content".to_owned())]);
    }

    #[test]
    fn promptfoo_asserts_that_hold_the_answer_are_looked_for() {
        let found = leaks_of(json!({
            "id": "a",
            "input": "The code is ZEBRA-7, and the fallback is plan B. Do not say lemon.",
            "expected": {"assert": [
                {"type": "equals", "value": "ZEBRA-7"},
                {"type": "icontains-any", "value": ["fallback", "x"]},
                {"type": "not-contains", "value": "lemon"},
                {"type": "llm-rubric", "value": "mentions the fallback"},
                {"type": "regex", "value": "plan B"},
                {"type": "contains", "value": "nowhere in the input"}
            ]}
        }));
        let answers: Vec<&str> = found.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(answers, ["/expected/assert/0/value", "/expected/assert/1/value/0"]);
    }

    #[test]
    fn a_case_that_leaks_everywhere_is_cut() {
        let context: Vec<Value> = (0..50).map(|_| json!({"content": "the answer is 42"})).collect();
        let found = leaks_of(json!({"id": "a", "input": "q", "context": context, "expected": {"output": "42"}}));
        assert_eq!(found.len(), MAX_PER_CASE + 1);
    }

    /// OpenAI evals' multiple-choice shape (`input`: a system message and a user message listing
    /// the options `A. …`, `ideal`: a letter), as in its MMLU-style registry samples.
    #[test]
    fn an_option_label_as_the_answer_is_no_leak() {
        let question = "Which of these is a prime number?\nA. 4\nB. 6\nC. 7\nD. 9\nAnswer:";
        let case = |ideal: &str| {
            json!({
                "id": "a",
                "input": [
                    {"role": "system", "content": "The following are multiple choice questions (with answers) about a subject."},
                    {"role": "user", "content": question}
                ],
                "expected": {"output": ideal}
            })
        };
        // "A" would otherwise be found as the word "a" of the system message.
        for ideal in ["C", "(C)", "C.", "A"] {
            assert!(leaks_of(case(ideal)).is_empty(), "{ideal}");
        }
        // The option the label names, said in the question itself, is a leak.
        let found = leaks_of(json!({
            "id": "a",
            "input": [{"role": "user", "content": "7 is prime. Which of these is prime?\nA. 4\nB. 6\nC. 7\nAnswer:"}],
            "expected": {"output": "C"}
        }));
        assert_eq!(found, [("/expected/output".to_owned(), "/input/0/content".to_owned())]);
        // Without options, a letter is looked for as ever (here the word "a").
        let found = leaks_of(json!({"id": "a", "input": "Is a cat a mammal?", "expected": {"output": "A"}}));
        assert_eq!(found, [("/expected/output".to_owned(), "/input".to_owned())]);
    }

    #[test]
    fn an_option_text_is_a_leak_only_outside_the_options() {
        // Inspect's shape: the choices are a context item.
        let inspect = |input: &str| {
            leaks_of(json!({
                "id": "a",
                "input": input,
                "context": [{"type": "custom", "source": "choices", "content": ["Paris", "Berlin"]}],
                "expected": {"output": "Paris"}
            }))
        };
        assert_eq!(inspect("Capital of France?"), []);
        assert_eq!(
            inspect("Paris is the capital of which country?"),
            [("/expected/output".to_owned(), "/input".to_owned())]
        );
        // OpenAI evals' shape: the options are lines of the prompt.
        let evals = |content: &str| {
            leaks_of(json!({
                "id": "a",
                "input": [{"role": "user", "content": content}],
                "expected": {"output": "Paris"}
            }))
        };
        assert_eq!(evals("Capital of France?\nA) Berlin\nB) Paris\nAnswer:"), []);
        assert_eq!(
            evals("Capital of France (Paris)?\n(A) Berlin\n(B) Paris"),
            [("/expected/output".to_owned(), "/input/0/content".to_owned())]
        );
        // A single line that looks like an option is no list of options.
        assert_eq!(evals("A: Paris"), [("/expected/output".to_owned(), "/input/0/content".to_owned())]);
    }
}
