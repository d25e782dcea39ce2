//! The answer graders: one output against one expected answer (`exact_match`, `contains`,
//! `regex_match`, `numeric`, `json_match`, `one_of`, `similarity`). They see only the output and
//! the expectations, so [`super::per_turn`] can apply them to each turn.
//!
//! How values compare: two strings as text (trimmed, and case-folded when asked); two non-strings
//! as JSON values (numbers by value, object keys in any order); a string and a non-string as text,
//! the non-string written as compact JSON (so the output `4` matches the expected `"4"`, and the
//! output `"4.0"` does not match the expected `4`: use `numeric` for that).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};
use serde_json::Value;

use super::json::{self, json_equal};
use super::{missing, show, text_of, verdict};
use crate::record::{Failure, Grade};

#[derive(Debug)]
pub(super) enum AnswerGrader {
    ExactMatch(TextMatch),
    Contains {
        ignore_case: bool,
    },
    /// The pattern of the options, or `None` to read each case's.
    RegexMatch(Option<Regex>),
    Numeric {
        tolerance: f64,
        relative: Option<f64>,
    },
    JsonMatch {
        subset: bool,
    },
    OneOf(TextMatch),
    Similarity {
        threshold: f64,
        ignore_case: bool,
    },
}

#[derive(Debug, Clone, Copy)]
pub(super) struct TextMatch {
    pub ignore_case: bool,
    pub trim: bool,
}

/// What an answer grader looks at.
pub(super) struct Answer<'a> {
    pub grader: &'a str,
    pub case_id: &'a str,
    /// `expected.output` (or one turn's `expected.per_turn` item).
    pub expected: Option<&'a Value>,
    /// `expected.acceptable`.
    pub acceptable: &'a [Value],
    pub output: &'a Value,
}

impl Answer<'_> {
    fn expected(&self) -> Result<&Value, Failure> {
        self.expected.ok_or_else(|| missing(self.case_id, self.grader, "expected.output"))
    }

    fn config(&self, message: impl std::fmt::Display) -> Failure {
        Failure::new("config", format!("case `{}`: grader `{}`: {message}", self.case_id, self.grader))
    }
}

/// Regexes from experiment files and datasets are bounded so a pattern cannot eat the memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub(super) fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern).size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(4 * REGEX_SIZE_LIMIT).build()
}

impl AnswerGrader {
    pub(super) fn grade(&self, answer: &Answer<'_>) -> Result<Grade, Failure> {
        let output = answer.output;
        match self {
            AnswerGrader::ExactMatch(how) => {
                let expected = answer.expected()?;
                Ok(if how.matches(output, expected) {
                    verdict(true, "the output equals the expected answer")
                } else {
                    verdict(false, format!("expected {}, got {}", show(expected), show(output)))
                })
            }
            AnswerGrader::OneOf(how) => {
                let candidates: Vec<&Value> = answer.expected.into_iter().chain(answer.acceptable).collect();
                if candidates.is_empty() {
                    return Err(missing(answer.case_id, answer.grader, "expected.output` or `expected.acceptable"));
                }
                Ok(match candidates.iter().find(|candidate| how.matches(output, candidate)) {
                    Some(found) => verdict(true, format!("the output equals the accepted answer {}", show(found))),
                    None => {
                        verdict(false, format!("{} is none of the {} accepted answers", show(output), candidates.len()))
                    }
                })
            }
            AnswerGrader::Contains { ignore_case } => {
                let expected = text_of(answer.expected()?);
                if expected.is_empty() {
                    return Err(answer.config("`expected.output` is empty, which every output contains"));
                }
                let found = if *ignore_case {
                    text_of(output).to_lowercase().contains(&expected.to_lowercase())
                } else {
                    text_of(output).contains(expected.as_ref())
                };
                let quoted = super::clip(&expected, super::QUOTE);
                Ok(if found {
                    verdict(true, format!("the output contains `{quoted}`"))
                } else {
                    verdict(false, format!("the output does not contain `{quoted}`"))
                })
            }
            AnswerGrader::RegexMatch(pattern) => {
                let from_case;
                let regex = match pattern {
                    Some(regex) => regex,
                    None => {
                        let Value::String(pattern) = answer.expected()? else {
                            return Err(answer.config("`expected.output` must be a regex pattern string"));
                        };
                        from_case = compile(pattern)
                            .map_err(|e| answer.config(format!("`expected.output` is not a valid regex: {e}")))?;
                        &from_case
                    }
                };
                Ok(if regex.is_match(&text_of(output)) {
                    verdict(true, format!("the output matches `{}`", regex.as_str()))
                } else {
                    verdict(false, format!("the output does not match `{}`", regex.as_str()))
                })
            }
            AnswerGrader::Numeric { tolerance, relative } => {
                let expected = answer.expected()?;
                let Some(want) = expected_number(expected) else {
                    return Err(answer.config(format!("`expected.output` {} is not a number", show(expected))));
                };
                let Some(got) = output_number(output) else {
                    return Ok(verdict(false, format!("no number in the output {}", show(output))));
                };
                let difference = (got - want).abs();
                let allowed = relative.map_or(*tolerance, |r| tolerance.max(r * want.abs()));
                Ok(if difference <= allowed {
                    verdict(true, format!("{got} is within {allowed} of {want}"))
                } else {
                    verdict(false, format!("expected {want}, got {got} (off by {difference}, allowed {allowed})"))
                })
            }
            AnswerGrader::JsonMatch { subset } => json::grade(answer.expected()?, output, *subset),
            AnswerGrader::Similarity { threshold, ignore_case } => {
                let expected = text_of(answer.expected()?);
                let output = text_of(output);
                let (a, b) = if *ignore_case {
                    (Cow::Owned(expected.trim().to_lowercase()), Cow::Owned(output.trim().to_lowercase()))
                } else {
                    (Cow::Borrowed(expected.trim()), Cow::Borrowed(output.trim()))
                };
                let score = similarity(&a, &b);
                Ok(Grade {
                    score,
                    pass: score >= *threshold,
                    rationale: format!("similarity {score:.3} to the expected answer (threshold {threshold})"),
                })
            }
        }
    }
}

impl TextMatch {
    /// Whether `output` equals `expected` (see the module docs).
    pub(super) fn matches(self, output: &Value, expected: &Value) -> bool {
        match (output, expected) {
            (Value::String(a), Value::String(b)) => self.texts_equal(a, b),
            (a, b) if !a.is_string() && !b.is_string() => json_equal(a, b),
            (a, b) => self.texts_equal(&text_of(a), &text_of(b)),
        }
    }

    fn texts_equal(self, a: &str, b: &str) -> bool {
        let (a, b) = if self.trim { (a.trim(), b.trim()) } else { (a, b) };
        if self.ignore_case { a == b || a.to_lowercase() == b.to_lowercase() } else { a == b }
    }
}

/// The expected number: a JSON number, or a string that is one number (`"1,234.5"` included).
fn expected_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(text) => {
            let text = text.trim();
            let found = NUMBER.find(text)?;
            (found.start() == 0 && found.end() == text.len()).then(|| parse_number(found.as_str())).flatten()
        }
        _ => None,
    }
}

/// The output's number: a JSON number, or the first number in its text.
fn output_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        other => NUMBER.find(&text_of(other)).and_then(|found| parse_number(found.as_str())),
    }
}

/// A decimal number in text: optional sign, digits with optional thousands commas, optional
/// fraction and exponent (`-1,234.5e3`, `.5`, `42`).
static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)] // a constant pattern
    Regex::new(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?").expect("valid number pattern")
});

fn parse_number(text: &str) -> Option<f64> {
    text.replace(',', "").parse().ok().filter(|n: &f64| n.is_finite())
}

/// 1 − the Levenshtein distance over characters divided by the longer length; 1 for two empty
/// texts.
pub(super) fn similarity(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 1.0;
    }
    1.0 - levenshtein(&a, &b) as f64 / longest as f64
}

/// Edit distance (insert, delete, substitute one character) by Myers' bit-parallel algorithm
/// (as Hyyrö formulated it for edit distance, in blocks of 64 characters of the shorter
/// string): O(⌈len(a)/64⌉·len(b)) word operations, after dropping the common prefix and suffix.
fn levenshtein(a: &[char], b: &[char]) -> usize {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    let (pattern, text) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if pattern.is_empty() {
        return text.len();
    }
    let blocks = pattern.len().div_ceil(64);
    let occurs = Occurrences::of(pattern, blocks);
    // Vertical deltas of the current column, +1 (`plus`) or -1 (`minus`), per block.
    let mut plus = vec![u64::MAX; blocks];
    let mut minus = vec![0u64; blocks];
    let last = 1u64 << ((pattern.len() - 1) % 64);
    let mut score = pattern.len();
    for c in text {
        let eq_blocks = occurs.of_char(*c);
        // The row above the pattern grows by one a column.
        let mut carry: i8 = 1;
        for k in 0..blocks {
            let (pv, mv) = (plus[k], minus[k]);
            let negative = u64::from(carry < 0);
            let mut eq = eq_blocks[k];
            let xv = eq | mv;
            eq |= negative;
            let xh = ((eq & pv).wrapping_add(pv) ^ pv) | eq;
            let mut ph = mv | !(xh | pv);
            let mut mh = pv & xh;
            let high = if k + 1 == blocks { last } else { 1 << 63 };
            let out = i8::from(ph & high != 0) - i8::from(mh & high != 0);
            ph <<= 1;
            mh <<= 1;
            mh |= negative;
            ph |= u64::from(carry > 0);
            plus[k] = mh | !(xv | ph);
            minus[k] = ph & xv;
            carry = out;
        }
        score = (score as isize + isize::from(carry)) as usize;
    }
    score
}

/// For each character of a pattern, where it occurs in it: `blocks` words of bits a character,
/// found through a table for ASCII and a sorted list for the rest (a hash per character of the
/// text cost more than the distance itself).
struct Occurrences {
    blocks: usize,
    /// Row 0 is the character that does not occur.
    bits: Vec<u64>,
    ascii: [u32; 128],
    other: Vec<(char, u32)>,
}

impl Occurrences {
    fn of(pattern: &[char], blocks: usize) -> Self {
        let mut this = Self { blocks, bits: vec![0; blocks], ascii: [0; 128], other: Vec::new() };
        for (i, &c) in pattern.iter().enumerate() {
            let row = match this.row(c) {
                0 => {
                    let row = (this.bits.len() / blocks) as u32;
                    this.bits.resize(this.bits.len() + blocks, 0);
                    match this.ascii.get_mut(c as usize) {
                        Some(slot) => *slot = row,
                        None => {
                            let at = this.other.partition_point(|(o, _)| *o < c);
                            this.other.insert(at, (c, row));
                        }
                    }
                    row
                }
                row => row,
            };
            this.bits[row as usize * blocks + i / 64] |= 1 << (i % 64);
        }
        this
    }

    fn row(&self, c: char) -> u32 {
        match self.ascii.get(c as usize) {
            Some(row) => *row,
            None => self.other.binary_search_by(|(o, _)| o.cmp(&c)).map_or(0, |i| self.other[i].1),
        }
    }

    fn of_char(&self, c: char) -> &[u64] {
        let start = self.row(c) as usize * self.blocks;
        &self.bits[start..start + self.blocks]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const EXACT: AnswerGrader = AnswerGrader::ExactMatch(TextMatch { ignore_case: false, trim: true });

    fn grade(grader: &AnswerGrader, expected: Option<Value>, output: Value) -> Result<Grade, Failure> {
        grader.grade(&Answer {
            grader: "g",
            case_id: "c1",
            expected: expected.as_ref(),
            acceptable: &[],
            output: &output,
        })
    }

    fn passes(grader: &AnswerGrader, expected: Value, output: Value) -> bool {
        let grade = grade(grader, Some(expected), output).unwrap();
        assert_eq!(grade.score, if grade.pass { 1.0 } else { 0.0 }, "all-or-nothing graders");
        grade.pass
    }

    #[test]
    fn exact_match_compares_text_after_trimming() {
        assert!(passes(&EXACT, json!("Paris"), json!("  Paris\n")));
        assert!(!passes(&EXACT, json!("Paris"), json!("paris")));
        assert!(!passes(&EXACT, json!("Paris"), json!("Paris, France")));
        let untrimmed = AnswerGrader::ExactMatch(TextMatch { ignore_case: false, trim: false });
        assert!(!passes(&untrimmed, json!("Paris"), json!("Paris\n")));
    }

    #[test]
    fn exact_match_ignore_case_folds_unicode() {
        let folded = AnswerGrader::ExactMatch(TextMatch { ignore_case: true, trim: true });
        assert!(passes(&folded, json!("ÉCOLE Ünïcode"), json!("école ünïcode")));
        assert!(!passes(&folded, json!("école"), json!("ecole")), "accents still count");
    }

    #[test]
    fn exact_match_compares_json_and_numbers() {
        assert!(passes(&EXACT, json!("4"), json!(4)), "a number output against a string answer, as text");
        assert!(passes(&EXACT, json!(4), json!(" 4 ")));
        assert!(!passes(&EXACT, json!("4"), json!(4.5)));
        assert!(passes(&EXACT, json!({"a": 1, "b": [1, 2]}), json!({"b": [1, 2.0], "a": 1})));
        assert!(!passes(&EXACT, json!([1, 2]), json!([2, 1])));
    }

    #[test]
    fn exact_match_says_what_differed() {
        let grade = grade(&EXACT, Some(json!("12")), json!("13")).unwrap();
        assert_eq!(grade.rationale, "expected `12`, got `13`");
    }

    #[test]
    fn a_missing_expectation_is_a_config_error_not_a_zero() {
        let graders = [
            EXACT,
            AnswerGrader::Contains { ignore_case: false },
            AnswerGrader::RegexMatch(None),
            AnswerGrader::Numeric { tolerance: 0.0, relative: None },
            AnswerGrader::JsonMatch { subset: true },
            AnswerGrader::OneOf(TextMatch { ignore_case: false, trim: true }),
            AnswerGrader::Similarity { threshold: 0.8, ignore_case: false },
        ];
        for grader in &graders {
            let err = grade(grader, None, json!("anything")).unwrap_err();
            assert_eq!(err.kind, "config");
            assert!(err.message.starts_with("case `c1`: grader `g` needs `expected.output"), "{}", err.message);
        }
    }

    #[test]
    fn contains_finds_the_expected_text() {
        let contains = AnswerGrader::Contains { ignore_case: false };
        assert!(passes(&contains, json!("Paris"), json!("The capital is Paris.")));
        assert!(!passes(&contains, json!("Paris"), json!("The capital is PARIS.")));
        assert!(passes(&AnswerGrader::Contains { ignore_case: true }, json!("Straße"), json!("STRAßE 5")));
        assert!(passes(&contains, json!(42), json!("answer: 42")), "a number is looked for as text");
        assert!(passes(&contains, json!("日本"), json!("東京は日本の首都")));
        let err = grade(&contains, Some(json!("")), json!("x")).unwrap_err();
        assert!(err.message.contains("is empty"), "an empty needle would pass everything: {}", err.message);
    }

    #[test]
    fn regex_match_uses_the_option_or_the_expectation() {
        let fixed = AnswerGrader::RegexMatch(Some(compile(r"^\d{3}-\d{4}$").unwrap()));
        assert!(passes(&fixed, json!(null), json!("555-1234")));
        assert!(!passes(&fixed, json!(null), json!("call 555-1234")));
        let per_case = AnswerGrader::RegexMatch(None);
        assert!(passes(&per_case, json!("(?i)refund"), json!("I want a REFUND")));
        let err = grade(&per_case, Some(json!("(")), json!("x")).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(err.message.contains("not a valid regex"), "{}", err.message);
        let err = grade(&per_case, Some(json!(3)), json!("3")).unwrap_err();
        assert!(err.message.contains("must be a regex pattern string"), "{}", err.message);
    }

    #[test]
    fn regex_size_is_bounded() {
        assert!(compile(r"\w{1000}{1000}").is_err());
    }

    #[test]
    fn numeric_reads_the_first_number_in_the_text() {
        let exact = AnswerGrader::Numeric { tolerance: 0.0, relative: None };
        assert!(passes(&exact, json!(12), json!("The answer is 12 apples, not 13.")));
        assert!(passes(&exact, json!("1000000000"), json!("It is 1,000,000,000.")));
        assert!(passes(&exact, json!(-3.5), json!("x = -3.5")));
        assert!(passes(&exact, json!(0.3), json!(0.3)));
        assert!(!passes(&exact, json!(12), json!("13 or 12")), "only the first number counts");
        assert!(passes(&exact, json!(1500), json!("1.5e3")));
        let grade = grade(&exact, Some(json!(5)), json!("five")).unwrap();
        assert!(!grade.pass && grade.rationale.starts_with("no number in the output"), "{grade:?}");
    }

    #[test]
    fn numeric_tolerance_absolute_and_relative() {
        let loose = AnswerGrader::Numeric { tolerance: 0.5, relative: None };
        assert!(passes(&loose, json!(10), json!("10.4")));
        assert!(!passes(&loose, json!(10), json!("10.6")));
        let relative = AnswerGrader::Numeric { tolerance: 0.0, relative: Some(0.1) };
        assert!(passes(&relative, json!(200), json!("about 219")));
        assert!(!passes(&relative, json!(200), json!("about 221")));
        let err = grade(&loose, Some(json!("ten")), json!("10")).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(err.message.contains("`ten` is not a number"), "{}", err.message);
    }

    #[test]
    fn one_of_accepts_any_listed_answer() {
        let one_of = AnswerGrader::OneOf(TextMatch { ignore_case: true, trim: true });
        let acceptable = [json!("NYC"), json!("New York City")];
        let run = |output: Value| {
            one_of
                .grade(&Answer {
                    grader: "g",
                    case_id: "c1",
                    expected: Some(&json!("New York")),
                    acceptable: &acceptable,
                    output: &output,
                })
                .unwrap()
        };
        assert!(run(json!("new york")).pass);
        assert!(run(json!("nyc ")).pass);
        let grade = run(json!("Boston"));
        assert!(!grade.pass);
        assert_eq!(grade.rationale, "`Boston` is none of the 3 accepted answers");
        let only_acceptable = one_of
            .grade(&Answer {
                grader: "g",
                case_id: "c1",
                expected: None,
                acceptable: &acceptable,
                output: &json!("NYC"),
            })
            .unwrap();
        assert!(only_acceptable.pass, "`expected.acceptable` alone is enough");
    }

    #[test]
    fn a_rationale_quoting_long_values_keeps_both_within_what_reports_show() {
        let long = |word: &str| json!(format!("{word} ").repeat(40));
        let failed = grade(&EXACT, Some(long("expected")), long("answer")).unwrap();
        assert!(!failed.pass);
        // Reports show 160 characters of a rationale: both values must start inside them.
        let shown: String = failed.rationale.chars().take(160).collect();
        assert!(shown.starts_with("expected `expected expected"), "{shown}");
        assert!(shown.contains("got `answer answer"), "{shown}");
        assert!(failed.rationale.chars().count() <= 160, "{}", failed.rationale);
    }

    #[test]
    fn the_bit_parallel_distance_is_the_dynamic_programming_one() {
        fn slow(a: &[char], b: &[char]) -> usize {
            let mut row: Vec<usize> = (0..=b.len()).collect();
            for (i, x) in a.iter().enumerate() {
                let mut diagonal = row[0];
                row[0] = i + 1;
                for (j, y) in b.iter().enumerate() {
                    let above = row[j + 1];
                    row[j + 1] = if x == y { diagonal } else { 1 + diagonal.min(above).min(row[j]) };
                    diagonal = above;
                }
            }
            row[b.len()]
        }
        // Deterministic strings of every length up to 200 (several blocks) over small alphabets.
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        for _ in 0..400 {
            let alphabet = ['a', 'b', 'c', 'é', '→'];
            let size = 1 + next(5) as usize;
            let a: Vec<char> = (0..next(200)).map(|_| alphabet[next(size as u64) as usize]).collect();
            let b: Vec<char> = (0..next(200)).map(|_| alphabet[next(size as u64) as usize]).collect();
            assert_eq!(levenshtein(&a, &b), slow(&a, &b), "{a:?} {b:?}");
        }
    }

    #[test]
    fn similarity_is_one_minus_normalised_edit_distance() {
        assert_eq!(similarity("kitten", "sitting"), 1.0 - 3.0 / 7.0);
        assert_eq!(similarity("", ""), 1.0);
        assert_eq!(similarity("abc", ""), 0.0);
        assert_eq!(similarity("héllo", "hello"), 0.8, "characters, not bytes");
        assert_eq!(levenshtein(&['a', 'b', 'c'], &['a', 'x', 'c']), 1);
        assert_eq!(levenshtein(&['f', 'l', 'a', 'w'], &['l', 'a', 'w', 'n']), 2);
        let grader = AnswerGrader::Similarity { threshold: 0.8, ignore_case: false };
        let near = grade(&grader, Some(json!("the quick brown fox")), json!("the quick brown fix")).unwrap();
        assert!(near.pass && near.score > 0.9 && near.score < 1.0, "{near:?}");
        let far = grade(&grader, Some(json!("the quick brown fox")), json!("a lazy dog")).unwrap();
        assert!(!far.pass, "{far:?}");
        let folded = AnswerGrader::Similarity { threshold: 1.0, ignore_case: true };
        assert!(grade(&folded, Some(json!("ÄBC")), json!("äbc")).unwrap().pass);
    }
}
