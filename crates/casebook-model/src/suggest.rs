//! "Did you mean …?": the nearest known word to a misspelt one, for the hints of diagnostics
//! (field names, filter paths, experiment keys).

/// The known word nearest to `word`, if `word` looks like a misspelling of it: at most a third
/// of its characters edited (one at least), and not the word itself. Swapping two neighbours
/// counts as one edit, so `inptu` is one edit from `input`.
pub fn did_you_mean<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    let word_len = word.chars().count();
    known
        .iter()
        // The distance is at least the difference in length, and must stay below the known
        // word's length: this also keeps a 50 MB value from being compared at all.
        .filter(|k| word_len.abs_diff(k.chars().count()) < k.chars().count())
        .map(|k| (edit_distance(word, k), *k))
        .filter(|(d, k)| {
            let len = k.chars().count();
            *d > 0 && *d < len && *d <= (len.max(word_len) / 3).max(1)
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Edit distance over characters where swapping two neighbours is one edit (optimal string
/// alignment).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d: Vec<usize> = vec![0; (a.len() + 1) * width];
    for (i, cell) in d.iter_mut().step_by(width).enumerate() {
        *cell = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best =
                (d[(i - 1) * width + j - 1] + cost).min(d[(i - 1) * width + j] + 1).min(d[i * width + j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_and_nothing_else() {
        let known = ["input", "id", "turns", "metadata", "n_runs"];
        assert_eq!(did_you_mean("inptu", &known), Some("input"));
        assert_eq!(did_you_mean("metdata", &known), Some("metadata"));
        assert_eq!(did_you_mean("n_rusn", &known), Some("n_runs"));
        assert_eq!(did_you_mean("input", &known), None);
        assert_eq!(did_you_mean("zzz", &known), None);
        // A huge value is not compared (the table would be its length times the word's).
        assert_eq!(did_you_mean(&"u".repeat(50_000_000), &["user"]), None);
    }
}
