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

/// A filter holds at most 2,000 tests and list values, in files as in stores; one more is an
/// error that points at it.
#[test]
fn a_filter_too_long_for_a_store_is_refused_where_it_goes_too_far() {
    let terms: Vec<String> = (0..2000).map(|i| format!("metadata.v == {i}")).collect();
    assert!(Filter::parse(&terms.join(" or ")).is_ok());
    assert!(Filter::parse(&terms.join(" and ")).is_ok());
    let src = format!("{} or exists(metadata.w)", terms.join(" or "));
    let e = Filter::parse(&src).unwrap_err();
    let at = src.rfind("exists").unwrap();
    assert_eq!((e.span.start, e.column), (at, at + 1));
    let rendered = e.render(&src);
    let lines: Vec<&str> = rendered.lines().collect();
    assert_eq!(lines[2].trim(), "^".repeat("exists(metadata.w".len()), "marks the test past the limit");
    assert_eq!(lines[3], "  hint: split it into several filters, or select the cases by a label or a `metadata` key");
    assert_eq!(e.message, "the filter is too long: more than 2000 tests and list values");
    // List values count too: the first value past the limit is marked.
    let src =
        format!("id == \"a\" and metadata.v in [{}]", (0..2000).map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
    let e = Filter::parse(&src).unwrap_err();
    assert_eq!(e.span, src.rfind("1999").unwrap()..src.rfind("1999").unwrap() + 4);
    let src = format!("metadata.v in [{}]", (0..2000).map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
    assert!(Filter::parse(&src).is_ok());
}

/// A filter is at most 128 KiB of text: a longer one is refused before it is read, at the first
/// character past the limit (here a two-byte one, whose column counts characters).
#[test]
fn a_filter_over_128_kib_is_refused_where_it_passes_the_limit() {
    let values = (0..1000).map(|i| format!("\"é-{i:06}-{}\"", "x".repeat(120))).collect::<Vec<_>>().join(", ");
    let src = format!("id in [{values}]");
    assert!(src.len() > 128 << 10);
    let e = Filter::parse(&src).unwrap_err();
    let limit = 128 << 10;
    // Byte 131,072 falls inside an `é`: the mark starts at that character.
    let at = (0..=limit).rev().find(|&i| src.is_char_boundary(i)).unwrap();
    assert_eq!(e.span.start, at);
    assert_eq!(e.column, src[..at].chars().count() + 1);
    assert_eq!(e.message, format!("the filter is too long: {} bytes, at most 131072 (128 KiB)", src.len()));
    assert_eq!(
        e.hint.as_deref(),
        Some("split it into several filters, or select the cases by a label or a `metadata` key")
    );
    // Just under the limit is read (and here fine).
    let fits = format!("{}exists(id)", " ".repeat(limit - "exists(id)".len()));
    assert!(Filter::parse(&fits).is_ok());
    // `--group-by` paths take the same limit.
    let e = casebook_filter::FieldPath::parse(&format!("metadata.{}", "k".repeat(limit))).unwrap_err();
    assert!(e.message.starts_with("the path is too long: "), "{}", e.message);
}

/// A path has at most 128 steps (no case is deeper); the step past it is marked, however long
/// the rest is: a 40 KB path of 20,000 steps is refused at once, not walked.
#[test]
fn a_path_of_more_than_128_steps_is_refused_at_the_step_past_the_limit() {
    let fits = format!("metadata{} == \"ü\"", ".a".repeat(128));
    assert!(Filter::parse(&fits).is_ok());
    let fits = format!("exists(input{})", "[0]".repeat(128));
    assert!(Filter::parse(&fits).is_ok());
    let src = format!("metadata{} == 1", ".a".repeat(20_000));
    let e = Filter::parse(&src).unwrap_err();
    assert_eq!((e.span.clone(), e.column), (8 + 2 * 128..8 + 2 * 128 + 1, 265));
    assert_eq!(e.message, "the path is too long: more than 128 steps");
    assert_eq!(e.hint.as_deref(), Some("no case holds a value deeper than 128 levels: shorten the path"));
    let src = format!("len(input{}) > 0", "[0]".repeat(10_000));
    let e = Filter::parse(&src).unwrap_err();
    assert_eq!((e.column, e.message.as_str()), (10 + 3 * 128, "the path is too long: more than 128 steps"));
    let rendered = e.render(&src);
    assert!(rendered.lines().nth(2).unwrap().ends_with(" ^"), "{rendered}");
    let e = casebook_filter::FieldPath::parse(&format!("agent_args{}", ".x".repeat(200))).unwrap_err();
    assert_eq!(e.message, "the path is too long: more than 128 steps");
}

/// `1e400` is beyond the doubles, in a filter as in a dataset (which refuses it); a number too
/// small for a double is the nearest one, 0, as a dataset reads it.
#[test]
fn numbers_beyond_the_doubles_are_errors_and_tiny_ones_round() {
    let src = "metadata.v > 1e400";
    assert_eq!(
        Filter::parse(src).unwrap_err().render(src),
        "\
error: number `1e400` is beyond the largest number, 1.7976931348623157e308 at column 14
  metadata.v > 1e400
               ^^^^^
  hint: datasets cannot hold larger numbers, so no case has one"
    );
    assert_eq!(Filter::parse("metadata.v == 1e-400").unwrap().to_string(), "metadata.v == 0.0");
    assert_eq!(Filter::parse("metadata.v == 100000000000000000000").unwrap().to_string(), "metadata.v == 1e20");
}
