//! File name patterns as promptfoo's `glob` reads them in the paths a configuration names:
//! `*` (any run of characters but `/`), `?` (one character), `[abc]`, `[a-z]`, `[!x]`, `**` (any
//! number of folders) and `{a,b}` alternatives. Names starting with a dot are matched only by a
//! pattern part that starts with a dot, as `glob` does by default. Only files are returned,
//! sorted by path (glob itself promises no order).

use std::path::{Path, PathBuf};

/// Whether `pattern` has a character that makes it a pattern rather than a path.
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{'])
}

/// The files `pattern` (relative to `base`, or absolute) matches, sorted. Folders that cannot be
/// read are skipped, as glob skips them. At most `limit` files are returned.
pub fn files(base: &Path, pattern: &str, limit: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for pattern in alternatives(pattern) {
        let (start, rest) = match pattern.strip_prefix('/') {
            Some(rest) => (PathBuf::from("/"), rest.to_owned()),
            None => (base.to_path_buf(), pattern),
        };
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        walk(&start, &parts, &mut found, limit);
    }
    found.sort();
    found.dedup();
    found.truncate(limit);
    found
}

fn walk(dir: &Path, parts: &[&str], found: &mut Vec<PathBuf>, limit: usize) {
    if found.len() >= limit {
        return;
    }
    let Some((part, rest)) = parts.split_first() else {
        if dir.is_file() {
            found.push(dir.to_path_buf());
        }
        return;
    };
    if *part == "**" {
        // Zero folders, then each folder below (not hidden ones, not through links).
        walk(dir, rest, found, limit);
        for (name, path) in entries(dir) {
            if !name.starts_with('.') && path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                walk(&path, parts, found, limit);
            }
        }
        return;
    }
    if !is_pattern(part) {
        walk(&dir.join(part), rest, found, limit);
        return;
    }
    for (name, path) in entries(dir) {
        if name.starts_with('.') && !part.starts_with('.') {
            continue;
        }
        if matches(part.as_bytes(), name.as_bytes()) {
            walk(&path, rest, found, limit);
        }
    }
}

/// A folder's entries with UTF-8 names, sorted; none when it cannot be read.
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut list: Vec<(String, PathBuf)> =
        read.filter_map(Result::ok).filter_map(|e| Some((e.file_name().into_string().ok()?, e.path()))).collect();
    list.sort();
    list
}

/// `{a,b}` alternatives expanded (each group in turn; groups may nest).
fn alternatives(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else { return vec![pattern.to_owned()] };
    let mut depth = 0;
    let mut close = None;
    let mut commas = Vec::new();
    for (i, c) in pattern[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            ',' if depth == 1 => commas.push(open + i),
            _ => {}
        }
    }
    let Some(close) = close.filter(|_| !commas.is_empty()) else {
        // Not a group: the brace is a character of the name.
        return vec![pattern.to_owned()];
    };
    let mut bounds = vec![open];
    bounds.extend(&commas);
    bounds.push(close);
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    bounds.windows(2).flat_map(|w| alternatives(&format!("{head}{}{tail}", &pattern[w[0] + 1..w[1]]))).collect()
}

/// Whether one path part `name` matches one pattern part.
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| matches(rest, &name[i..])),
        Some((b'?', rest)) => char_len(name).is_some_and(|n| matches(rest, &name[n..])),
        Some((b'[', rest)) => match class(rest, name) {
            Some((true, used, n)) => matches(&rest[used..], &name[n..]),
            Some((false, ..)) => false,
            // No closing bracket: `[` is itself.
            None => name.first() == Some(&b'[') && matches(rest, &name[1..]),
        },
        Some((c, rest)) => name.first() == Some(c) && matches(rest, &name[1..]),
    }
}

/// The byte length of the first character of `text`.
fn char_len(text: &[u8]) -> Option<usize> {
    let first = *text.first()?;
    Some(match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    })
    .map(|n| n.min(text.len()))
}

/// A `[...]` class (after the `[`) against the first character of `name`: whether it matches,
/// the pattern bytes the class used (to its `]`) and the name bytes matched.
fn class(pattern: &[u8], name: &[u8]) -> Option<(bool, usize, usize)> {
    let negated = matches!(pattern.first(), Some(b'!' | b'^'));
    let start = usize::from(negated);
    // A `]` first in the class is a character of it.
    let close = pattern.iter().skip(start + 1).position(|b| *b == b']')? + start + 1;
    let set = std::str::from_utf8(&pattern[start..close]).ok()?;
    let n = char_len(name)?;
    let c = std::str::from_utf8(&name[..n]).ok()?.chars().next()?;
    let chars: Vec<char> = set.chars().collect();
    let mut hit = false;
    let mut i = 0;
    while i < chars.len() {
        if i + 2 < chars.len() && chars[i + 1] == '-' {
            hit |= (chars[i]..=chars[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= chars[i] == c;
            i += 1;
        }
    }
    Some((hit != negated, close + 1, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_match_as_glob_does() {
        assert!(matches(b"vars_*.yaml", b"vars_a.yaml"));
        assert!(!matches(b"vars_*.yaml", b"vars_a.yml"));
        assert!(matches(b"t?.csv", b"t1.csv"));
        assert!(matches(b"t[0-9].csv", b"t7.csv"));
        assert!(!matches(b"t[!0-9].csv", b"t7.csv"));
        assert!(matches(b"*", b"tests2.yaml"));
        assert_eq!(alternatives("a/{b,c}.yaml"), vec!["a/b.yaml", "a/c.yaml"]);
        assert_eq!(alternatives("a/{b}.yaml"), vec!["a/{b}.yaml"]);
    }

    #[test]
    fn files_are_sorted_and_hidden_ones_left_out() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.yaml", "a.yaml", ".hidden.yaml", "sub/c.yaml"] {
            let path = dir.path().join(name);
            fs_err::create_dir_all(path.parent().unwrap()).unwrap();
            fs_err::write(path, "[]").unwrap();
        }
        let names = |pattern: &str| -> Vec<String> {
            files(dir.path(), pattern, 100)
                .iter()
                .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(names("*"), ["a.yaml", "b.yaml"]);
        assert_eq!(names("**/*.yaml"), ["a.yaml", "b.yaml", "sub/c.yaml"]);
        assert_eq!(names("sub/../*.yaml"), ["sub/../a.yaml", "sub/../b.yaml"]);
        assert_eq!(names("nothing/*"), Vec::<String>::new());
    }
}
