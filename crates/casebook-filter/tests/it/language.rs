//! The language as a user meets it: the help text and its examples, and the rendered errors.

use casebook_filter::{Filter, HELP};

#[test]
fn the_help_fits_a_terminal_and_its_examples_parse() {
    for line in HELP.lines() {
        assert!(line.chars().count() <= 80, "longer than 80 columns: {line}");
    }
    let examples: Vec<&str> = HELP.split("\n\n").nth(1).unwrap_or_default().lines().collect();
    assert_eq!(examples.len(), 7);
    for example in examples {
        let src = example.trim();
        assert!(Filter::parse(src).is_ok(), "{}", Filter::parse(src).unwrap_err().render(src));
    }
}

#[test]
fn the_spec_examples_parse() {
    for src in [
        r#"labels contains "math" and metadata.difficulty in ["hard", "medium"] and not (input matches "(?i)refund")"#,
        r#"label.category == "RCA""#,
        "len(turns) >= 2",
        "confidence >= 0.8",
        "exists(expected.output)",
        r#"turns[0].role == "hitl""#,
        r#"metadata."odd key".x == 1"#,
    ] {
        let filter = Filter::parse(src).unwrap_or_else(|e| panic!("{}", e.render(src)));
        assert_eq!(filter.to_string(), src);
    }
}

#[test]
fn errors_render_with_a_caret_and_a_hint() {
    let src = r#"labels contains "a" = 3"#;
    assert_eq!(
        Filter::parse(src).unwrap_err().render(src),
        "\
error: expected `and`, `or` or the end of the filter, found `=` at column 21
  labels contains \"a\" = 3
                      ^
  hint: did you mean `==`?"
    );
    let src = r#"confidence == "high""#;
    assert_eq!(
        Filter::parse(src).unwrap_err().render(src),
        "\
error: `confidence` is a number, never a string at column 15
  confidence == \"high\"
                ^^^^^^"
    );
    let src = "label.category == \"RCA\"\n  and metadata.difficulty = \"hard\"";
    assert_eq!(
        Filter::parse(src).unwrap_err().render(src),
        "\
error: expected a comparison operator after `metadata.difficulty`, found `=` at line 2, column 27
    and metadata.difficulty = \"hard\"
                            ^
  hint: did you mean `==`?"
    );
}

#[test]
fn shorthands_combine_with_parsed_filters() {
    let tags = Filter::tags(&["math", "hard"]);
    let both = tags.and(Filter::parse("confidence >= 0.8").unwrap());
    assert_eq!(both.to_string(), r#"labels contains "math" and labels contains "hard" and confidence >= 0.8"#);
    assert_eq!(Filter::everything().and(Filter::parse("exists(name)").unwrap()).to_string(), "exists(name)");
    let either = Filter::parse("exists(name) or exists(description)").unwrap();
    assert_eq!(
        either.and(Filter::tags(&["x"])).to_string(),
        r#"(exists(name) or exists(description)) and labels contains "x""#
    );
}
