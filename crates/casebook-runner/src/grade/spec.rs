//! What an experiment file says about a grader, and the checks that turn it into a [`Grader`].
//!
//! A grader is written `{kind: exact_match, name: exact, weight: 2, ignore_case: true}`: `kind`
//! picks the grader, `name` (default: the kind) and `weight` (default 1) are common to all, and
//! every other key is an option of that kind. An option the kind does not have is an error that
//! names it, so a typo never silently changes how a dataset is graded.

use std::time::Duration;

use casebook_model::Map;
use casebook_model::snapshot::When;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::answer::{AnswerGrader, TextMatch};
use super::command::CommandGrader;
use super::judge::Judge;
use super::trajectory::{CallPattern, CountBounds, TrajectoryGrader, Until};
use super::{Check, Grader};
use crate::record::Failure;

/// One grader of an experiment, as written in its file.
#[derive(Debug, Clone, PartialEq)]
pub struct GraderSpec {
    /// The grader's name in results; `None` means its kind.
    pub name: Option<String>,
    /// Its part in the run's weighted mean; default 1.
    pub weight: f64,
    /// The kind and its options.
    pub options: GraderOptions,
}

/// The grader kinds and their options. The serde form is tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GraderOptions {
    /// The output equals `expected.output`.
    ExactMatch(TextMatchOptions),
    /// The output text contains the `expected.output` text.
    Contains(ContainsOptions),
    /// The output text matches a regular expression (`pattern`, else `expected.output`).
    RegexMatch(RegexMatchOptions),
    /// The first number in the output is the expected number, within a tolerance.
    Numeric(NumericOptions),
    /// The output, read as JSON, equals (or contains) the expected JSON.
    JsonMatch(JsonMatchOptions),
    /// The output equals `expected.output` or one of `expected.acceptable`.
    OneOf(TextMatchOptions),
    /// 1 − normalised edit distance between output and expected text.
    Similarity(SimilarityOptions),
    /// The answer names the right one(s) of the case's choices, as Inspect's `choice()` scorer
    /// reads it (`ANSWER: B`).
    Choice(ChoiceOptions),
    /// A tool was called.
    ToolCalled(ToolCalledOptions),
    /// The number of calls (of one tool, or all) is within bounds.
    ToolCallCount(ToolCallCountOptions),
    /// At most so many tool calls in all.
    MaxToolCalls(MaxToolCallsOptions),
    /// Tools were called in this order (other calls may come between).
    ToolOrder(ToolOrderOptions),
    /// A tool was called with arguments that match, optionally before the final answer or
    /// before a call of another tool.
    ToolCalledWith(Box<ToolCalledWithOptions>),
    /// At most so many calls were asked outside the case's tool snapshot.
    MaxOutsideCalls(MaxOutsideCallsOptions),
    /// Calls matching these patterns were made in this order (other calls may come between).
    CallOrder(CallOrderOptions),
    /// An answer grader applied to every turn against `expected.per_turn`.
    PerTurn(PerTurnOptions),
    /// A model grades the run from a rubric prompt.
    LlmJudge(LlmJudgeOptions),
    /// A custom program grades the run.
    Command(CommandOptions),
}

/// Options of `exact_match` and `one_of`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextMatchOptions {
    /// Compare text without regard to case (Unicode lowercase).
    pub ignore_case: bool,
    /// Ignore whitespace at both ends of the texts; default true.
    pub trim: bool,
}

impl Default for TextMatchOptions {
    fn default() -> Self {
        Self { ignore_case: false, trim: true }
    }
}

/// Options of `contains`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainsOptions {
    pub ignore_case: bool,
}

/// Options of `regex_match`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RegexMatchOptions {
    /// The pattern (Rust `regex` syntax, searched anywhere in the output: anchor with `^…$`).
    /// Absent: each case's `expected.output` is its pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

/// Options of `numeric`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NumericOptions {
    /// Largest accepted absolute difference; default 0.
    pub tolerance: f64,
    /// Largest accepted difference as a fraction of the expected number; a number within either
    /// bound passes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative: Option<f64>,
}

/// Options of `json_match`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JsonMatchOptions {
    pub mode: JsonMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonMode {
    /// The same value (numbers compared by value, object keys in any order).
    #[default]
    Exact,
    /// Every expected key and array element is present in the output with an equal value,
    /// recursively; the output may have more.
    Subset,
}

/// Options of `similarity`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimilarityOptions {
    /// Lowest passing score; default 0.8.
    pub threshold: f64,
    pub ignore_case: bool,
}

impl Default for SimilarityOptions {
    fn default() -> Self {
        Self { threshold: 0.8, ignore_case: false }
    }
}

/// Options of `choice`: none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChoiceOptions {}

/// Options of `tool_called`. The tool is `tool`, not `name`: `name` names the grader.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolCalledOptions {
    /// The tool. Absent: the tools named by `expected.tool_calls`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// Options of `tool_call_count`. With neither `min` nor `max`, all three come from
/// `expected.tool_calls`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolCallCountOptions {
    /// Count only this tool's calls; absent: all calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// Options of `max_tool_calls`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaxToolCallsOptions {
    /// Absent: from `expected.tool_calls`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// Options of `tool_order`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolOrderOptions {
    /// Absent: from `expected.tool_calls`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
}

/// A tool call to look for: the tool, and conditions on its arguments written as in a recorded
/// response's `when` (see [`casebook_model::snapshot::When`]); all that are given must hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    pub tool: String,
    /// The arguments, exactly (as JSON values: key order and number spelling do not matter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// A subset of the arguments (objects compared as subsets too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub includes: Option<Map>,
    /// Patterns (regular expressions, unanchored) that string arguments must match, by argument
    /// name or by JSON pointer (`/filter/service`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<casebook_model::snapshot::Strings>,
}

impl CallSpec {
    /// The conditions as a snapshot `when` (`None` when there are none: any call of the tool).
    pub fn when(&self) -> Option<When> {
        let CallSpec { tool: _, arguments, includes, matches } = self.clone();
        (arguments.is_some() || includes.is_some() || matches.is_some()).then_some(When {
            arguments,
            includes,
            matches,
        })
    }
}

/// Options of `tool_called_with`: the call (`tool`, and `arguments`, `includes`, `matches` as in
/// [`CallSpec`]) and where it must come.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCalledWithOptions {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub includes: Option<Map>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<casebook_model::snapshot::Strings>,
    /// `answer`: the call must come before the run's final answer (its last assistant message);
    /// a call `{tool, …}`: before the first call that matches it (a run that never makes that
    /// call passes on the first call alone; grade its absence with `tool_called`). Absent:
    /// anywhere in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Before>,
}

impl ToolCalledWithOptions {
    /// The call looked for.
    pub fn call(&self) -> CallSpec {
        CallSpec {
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            includes: self.includes.clone(),
            matches: self.matches.clone(),
        }
    }
}

/// What a call must come before: the final answer, or a call of another tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    /// `answer`.
    Answer,
    /// `{tool, arguments?, includes?, matches?}`.
    Call(CallSpec),
}

impl Serialize for Before {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Before::Answer => serializer.serialize_str("answer"),
            Before::Call(call) => call.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Before {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(deserializer)? {
            Value::String(word) if word == "answer" => Ok(Before::Answer),
            Value::Object(call) => CallSpec::deserialize(Value::Object(call))
                .map(Before::Call)
                .map_err(|e| D::Error::custom(format!("`before`: {e}"))),
            other => Err(D::Error::custom(format!(
                "`before` is `answer` or a call `{{tool: NAME, includes: …}}`, not `{other}`"
            ))),
        }
    }
}

/// Options of `max_outside_calls`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaxOutsideCallsOptions {
    /// Calls allowed that the snapshot does not answer (`unmatched`, or of a tool the case does
    /// not have); default 0.
    pub max: u64,
}

/// Options of `call_order`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CallOrderOptions {
    /// The calls, in the order they must come. Absent: from `expected.tool_calls` (a list of
    /// tool names or of `{name, arguments?, includes?, matches?}`, or an object with `order`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<CallSpec>>,
}

/// Options of `per_turn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerTurnOptions {
    /// The grader applied to each turn: one of the answer kinds (`exact_match`, `contains`,
    /// `regex_match`, `numeric`, `json_match`, `one_of`, `similarity`). Its name and weight are
    /// not used.
    pub grader: Box<GraderSpec>,
}

/// Options of `llm_judge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmJudgeOptions {
    /// A chat-completions base URL such as `http://127.0.0.1:8000/v1`; `/chat/completions` is
    /// appended unless it is already there.
    pub endpoint: String,
    pub model: String,
    /// The environment variable holding the API key. Read by the caller through
    /// [`GraderSpec::resolve_env`]: this library reads no environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The key itself, sent as a bearer token. Never read from nor written to an experiment file.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
    /// A minijinja template for the prompt; absent: the built-in rubric prompt. Variables:
    /// `input`, `output`, `expected`, `outcomes`, `rubric`, `rubric_vars` (and each of its keys
    /// that does not collide with these), `trajectory`, `turns`; filter `tojson`. An unknown
    /// variable is an error, not an empty string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Score at which a verdict without `pass` passes; default 0.5.
    #[serde(default = "half")]
    pub pass_score: f64,
    /// Longest wait for the judge; default 60.
    #[serde(default = "sixty")]
    pub timeout_secs: f64,
    /// The sampling temperature asked of the judge, 0 to 2; default 0 (the same verdict for the
    /// same run, as far as the model allows). `null` asks none: the model's own default, for
    /// models that take no other (some reasoning models refuse 0).
    #[serde(default = "zero_temperature")]
    pub temperature: Option<f64>,
}

fn zero_temperature() -> Option<f64> {
    Some(0.0)
}

/// Options of `command`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandOptions {
    /// The program (looked up on `PATH` when it has no slash).
    pub program: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Longest wait for the program; default 30.
    #[serde(default = "thirty")]
    pub timeout_secs: f64,
    /// Score at which a verdict without `pass` passes; default 0.5.
    #[serde(default = "half")]
    pub pass_score: f64,
}

fn half() -> f64 {
    0.5
}

fn thirty() -> f64 {
    30.0
}

fn sixty() -> f64 {
    60.0
}

/// An API key: kept out of debug output and of serialised experiments.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(…)")
    }
}

impl GraderOptions {
    /// The kind as written in experiment files.
    pub fn kind(&self) -> &'static str {
        match self {
            GraderOptions::ExactMatch(_) => "exact_match",
            GraderOptions::Contains(_) => "contains",
            GraderOptions::RegexMatch(_) => "regex_match",
            GraderOptions::Numeric(_) => "numeric",
            GraderOptions::JsonMatch(_) => "json_match",
            GraderOptions::OneOf(_) => "one_of",
            GraderOptions::Similarity(_) => "similarity",
            GraderOptions::Choice(_) => super::choice::KIND,
            GraderOptions::ToolCalled(_) => "tool_called",
            GraderOptions::ToolCallCount(_) => "tool_call_count",
            GraderOptions::MaxToolCalls(_) => "max_tool_calls",
            GraderOptions::ToolOrder(_) => "tool_order",
            GraderOptions::ToolCalledWith(_) => "tool_called_with",
            GraderOptions::MaxOutsideCalls(_) => "max_outside_calls",
            GraderOptions::CallOrder(_) => "call_order",
            GraderOptions::PerTurn(_) => "per_turn",
            GraderOptions::LlmJudge(_) => "llm_judge",
            GraderOptions::Command(_) => "command",
        }
    }
}

impl GraderSpec {
    /// A grader of these options, named after its kind, of weight 1.
    pub fn new(options: GraderOptions) -> Self {
        Self { name: None, weight: 1.0, options }
    }

    pub fn kind(&self) -> &'static str {
        self.options.kind()
    }

    /// The name in results: the given name, else the kind.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.kind())
    }

    /// Fills settings that come from the environment (an `llm_judge`'s key named by
    /// `api_key_env`) through `get`, which the caller backs with the real environment. A variable
    /// that `get` does not know is left unset; [`GraderSpec::build`] then reports it.
    pub fn resolve_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        if let GraderOptions::LlmJudge(judge) = &mut self.options {
            if let (Some(var), None) = (&judge.api_key_env, &judge.api_key) {
                judge.api_key = get(var).map(ApiKey);
            }
        }
    }

    /// Checks the options and prepares the grader. Every problem is a `config` failure that
    /// names the grader.
    pub fn build(&self) -> Result<Grader, Failure> {
        let name = self.name();
        let config = |message: String| Failure::new("config", format!("grader `{name}`: {message}"));
        if !(self.weight.is_finite() && self.weight >= 0.0) {
            return Err(config(format!("`weight` must be a number ≥ 0, not {}", self.weight)));
        }
        let check = match &self.options {
            GraderOptions::PerTurn(per_turn) => {
                let inner = &per_turn.grader;
                match answer_grader(&inner.options).map_err(&config)? {
                    Some(grader) => Check::PerTurn(grader),
                    None => {
                        return Err(config(format!(
                            "`per_turn` grades each turn with an answer grader (`exact_match`, `contains`, \
                             `regex_match`, `numeric`, `json_match`, `one_of`, `similarity`), not `{}`",
                            inner.kind()
                        )));
                    }
                }
            }
            GraderOptions::ToolCalled(o) => {
                if o.tool.as_deref().is_some_and(str::is_empty) {
                    return Err(config("`tool` is empty".into()));
                }
                Check::Trajectory(TrajectoryGrader::Called(o.tool.clone()))
            }
            GraderOptions::ToolCallCount(o) => {
                let bounds = match (o.min, o.max) {
                    (None, None) if o.tool.is_some() => {
                        return Err(config("`tool` needs `min` or `max` beside it".into()));
                    }
                    (None, None) => None,
                    (Some(min), Some(max)) if min > max => {
                        return Err(config(format!("`min` ({min}) is more than `max` ({max})")));
                    }
                    (min, max) => Some(CountBounds { name: o.tool.clone(), min, max }),
                };
                Check::Trajectory(TrajectoryGrader::Count(bounds))
            }
            GraderOptions::MaxToolCalls(o) => Check::Trajectory(TrajectoryGrader::Max(o.max)),
            GraderOptions::ToolOrder(o) => {
                if o.names.as_ref().is_some_and(Vec::is_empty) {
                    return Err(config("`names` is empty".into()));
                }
                Check::Trajectory(TrajectoryGrader::Order(o.names.clone()))
            }
            GraderOptions::ToolCalledWith(o) => {
                let call = Box::new(CallPattern::build(&o.call()).map_err(&config)?);
                let before = match &o.before {
                    None => None,
                    Some(Before::Answer) => Some(Until::Answer),
                    Some(Before::Call(other)) => Some(Until::Call(Box::new(
                        CallPattern::build(other).map_err(|e| config(format!("`before`: {e}")))?,
                    ))),
                };
                Check::Trajectory(TrajectoryGrader::CalledWith { call, before })
            }
            GraderOptions::MaxOutsideCalls(o) => Check::Trajectory(TrajectoryGrader::Outside(o.max)),
            GraderOptions::CallOrder(o) => {
                let steps = match &o.steps {
                    None => None,
                    Some(steps) if steps.is_empty() => return Err(config("`steps` is empty".into())),
                    Some(steps) => Some(
                        steps
                            .iter()
                            .enumerate()
                            .map(|(i, step)| CallPattern::build(step).map_err(|e| config(format!("`steps[{i}]`: {e}"))))
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                };
                Check::Trajectory(TrajectoryGrader::CallOrder(steps))
            }
            GraderOptions::Choice(_) => Check::Choice,
            GraderOptions::LlmJudge(o) => Check::Judge(Box::new(Judge::build(o).map_err(config)?)),
            GraderOptions::Command(o) => Check::Command(CommandGrader::build(o).map_err(config)?),
            answer => match answer_grader(answer).map_err(&config)? {
                Some(grader) => Check::Answer(grader),
                None => unreachable!("every other kind is matched above"),
            },
        };
        Ok(Grader { name: name.to_owned(), kind: self.kind(), weight: self.weight, check })
    }
}

/// The answer grader of these options; `None` for the kinds that are not answer graders.
fn answer_grader(options: &GraderOptions) -> Result<Option<AnswerGrader>, String> {
    let text = |o: &TextMatchOptions| TextMatch { ignore_case: o.ignore_case, trim: o.trim };
    Ok(Some(match options {
        GraderOptions::ExactMatch(o) => AnswerGrader::ExactMatch(text(o)),
        GraderOptions::OneOf(o) => AnswerGrader::OneOf(text(o)),
        GraderOptions::Contains(o) => AnswerGrader::Contains { ignore_case: o.ignore_case },
        GraderOptions::RegexMatch(o) => match &o.pattern {
            Some(pattern) => AnswerGrader::RegexMatch(Some(
                super::answer::compile(pattern).map_err(|e| format!("`pattern` is not a valid regex: {e}"))?,
            )),
            None => AnswerGrader::RegexMatch(None),
        },
        GraderOptions::Numeric(o) => {
            if !(o.tolerance.is_finite() && o.tolerance >= 0.0) {
                return Err(format!("`tolerance` must be a number ≥ 0, not {}", o.tolerance));
            }
            if let Some(relative) = o.relative {
                if !(relative.is_finite() && relative >= 0.0) {
                    return Err(format!("`relative` must be a number ≥ 0, not {relative}"));
                }
            }
            AnswerGrader::Numeric { tolerance: o.tolerance, relative: o.relative }
        }
        GraderOptions::JsonMatch(o) => AnswerGrader::JsonMatch { subset: o.mode == JsonMode::Subset },
        GraderOptions::Similarity(o) => {
            if !(0.0..=1.0).contains(&o.threshold) {
                return Err(format!("`threshold` must be between 0 and 1, not {}", o.threshold));
            }
            AnswerGrader::Similarity { threshold: o.threshold, ignore_case: o.ignore_case }
        }
        _ => return Ok(None),
    }))
}

/// A time limit in seconds as a duration: positive and finite.
pub(super) fn seconds(value: f64, option: &str) -> Result<Duration, String> {
    if value > 0.0 {
        if let Ok(duration) = Duration::try_from_secs_f64(value) {
            return Ok(duration);
        }
    }
    Err(format!("`{option}` must be a number of seconds more than 0, not {value}"))
}

/// A score threshold: between 0 and 1.
pub(super) fn score_threshold(value: f64, option: &str) -> Result<f64, String> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("`{option}` must be between 0 and 1, not {value}"))
    }
}

impl<'de> Deserialize<'de> for GraderSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = Map::deserialize(deserializer)?;
        let kind = match fields.get("kind") {
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => return Err(D::Error::custom(format!("a grader's `kind` must be a string, not {other}"))),
            None => return Err(D::Error::custom("a grader needs a `kind` (`exact_match`, `llm_judge`, …)")),
        };
        let name = match fields.remove("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name),
            Some(other) => {
                return Err(D::Error::custom(format!("grader `{kind}`: `name` must be a string, not {other}")));
            }
        };
        let weight = match fields.remove("weight") {
            None | Some(Value::Null) => 1.0,
            Some(Value::Number(weight)) => weight.as_f64().unwrap_or(f64::NAN),
            Some(other) => {
                return Err(D::Error::custom(format!("grader `{kind}`: `weight` must be a number, not {other}")));
            }
        };
        let label = name.as_deref().unwrap_or(&kind);
        let options = GraderOptions::deserialize(Value::Object(fields))
            .map_err(|e| D::Error::custom(format!("grader `{label}`: {e}")))?;
        Ok(GraderSpec { name, weight, options })
    }
}

impl Serialize for GraderSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            #[serde(flatten)]
            options: &'a GraderOptions,
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<&'a str>,
            weight: f64,
        }
        Written { options: &self.options, name: self.name.as_deref(), weight: self.weight }.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: Value) -> Result<GraderSpec, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_kind_name_weight_and_options() {
        let s = spec(json!({"kind": "exact_match", "weight": 2, "name": "exact", "ignore_case": true})).unwrap();
        assert_eq!(s.name(), "exact");
        assert_eq!(s.weight, 2.0);
        assert_eq!(s.options, GraderOptions::ExactMatch(TextMatchOptions { ignore_case: true, trim: true }));
        let s = spec(json!({"kind": "similarity"})).unwrap();
        assert_eq!((s.name(), s.weight), ("similarity", 1.0));
        assert_eq!(s.options, GraderOptions::Similarity(SimilarityOptions { threshold: 0.8, ignore_case: false }));
    }

    #[test]
    fn an_unknown_option_is_an_error_naming_it() {
        let err = spec(json!({"kind": "exact_match", "ignore_cas": true})).unwrap_err();
        assert!(err.starts_with("grader `exact_match`: unknown field `ignore_cas`"), "{err}");
        let err =
            spec(json!({"kind": "llm_judge", "endpoint": "http://x/v1", "model": "m", "api_key": "sk"})).unwrap_err();
        assert!(err.contains("unknown field `api_key`"), "keys stay out of experiment files: {err}");
        let err = spec(json!({"kind": "per_turn", "grader": {"kind": "contains", "trim": true}})).unwrap_err();
        assert!(err.contains("unknown field `trim`"), "{err}");
    }

    #[test]
    fn name_names_the_grader_and_tool_names_the_tool() {
        let s = spec(json!({"kind": "tool_called", "name": "searched", "tool": "search"})).unwrap();
        assert_eq!(s.name(), "searched");
        assert_eq!(s.options, GraderOptions::ToolCalled(ToolCalledOptions { tool: Some("search".into()) }));
    }

    #[test]
    fn an_unknown_or_missing_kind_is_an_error() {
        let err = spec(json!({"kind": "exact"})).unwrap_err();
        assert!(err.contains("unknown variant `exact`"), "{err}");
        let err = spec(json!({"weight": 1})).unwrap_err();
        assert!(err.contains("needs a `kind`"), "{err}");
    }

    #[test]
    fn round_trips_through_json() {
        let value = json!({"kind": "numeric", "tolerance": 0.5, "name": "n", "weight": 3.0});
        let s = spec(value.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), value);
    }

    #[test]
    fn build_rejects_bad_options() {
        let cases = [
            (json!({"kind": "regex_match", "pattern": "(unclosed"}), "`pattern` is not a valid regex"),
            (json!({"kind": "numeric", "tolerance": -1}), "`tolerance` must be a number ≥ 0"),
            (json!({"kind": "similarity", "threshold": 1.5}), "`threshold` must be between 0 and 1"),
            (json!({"kind": "tool_call_count", "min": 3, "max": 1}), "`min` (3) is more than `max` (1)"),
            (json!({"kind": "tool_call_count", "tool": "search"}), "`tool` needs `min` or `max`"),
            (json!({"kind": "tool_order", "names": []}), "`names` is empty"),
            (json!({"kind": "exact_match", "weight": -1}), "`weight` must be a number ≥ 0"),
            (json!({"kind": "per_turn", "grader": {"kind": "tool_called"}}), "not `tool_called`"),
            (json!({"kind": "command", "program": "true", "timeout_secs": 0}), "`timeout_secs` must be"),
            (json!({"kind": "llm_judge", "endpoint": "not a url", "model": "m"}), "`endpoint`"),
            (
                json!({"kind": "llm_judge", "endpoint": "http://127.0.0.1:1/v1", "model": "m", "template": "{{ x"}),
                "template",
            ),
        ];
        for (value, expected) in cases {
            let err = spec(value.clone()).unwrap().build().unwrap_err();
            assert_eq!(err.kind, "config", "{value}");
            assert!(err.message.contains(expected), "{value}: {}", err.message);
        }
    }

    #[test]
    fn api_key_comes_from_the_named_variable() {
        let mut s = spec(json!({"kind": "llm_judge", "endpoint": "http://127.0.0.1:1/v1", "model": "m",
                                 "api_key_env": "JUDGE_KEY"}))
        .unwrap();
        let err = s.build().unwrap_err();
        assert!(err.message.contains("`JUDGE_KEY`"), "unresolved key is reported: {}", err.message);
        s.resolve_env(|name| (name == "JUDGE_KEY").then(|| "sk-test".to_owned()));
        let GraderOptions::LlmJudge(judge) = &s.options else { unreachable!() };
        assert_eq!(judge.api_key.as_ref().map(ApiKey::expose), Some("sk-test"));
        assert!(!format!("{s:?}").contains("sk-test"), "debug output hides the key");
        assert!(!serde_json::to_string(&s).unwrap().contains("sk-test"), "serialised specs hide the key");
        let grader = s.build().unwrap();
        assert!(!format!("{grader:?}").contains("sk-test"), "so do built graders");
    }
}
