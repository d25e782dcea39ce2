//! Numbers compared exactly in SQL.
//!
//! SQLite reads a JSON real with its own text-to-double conversion, which is a few units in the
//! last place off for many numbers below about 1e-84 and above about 1e118 (`1.5e+308` reads as
//! the double just below 1.5e308); memory reads the correctly rounded double. So SQL compares
//! SQLite's reading with a literal only when it is more than [`SQLITE_ULPS`] doubles away from
//! it. Nearer, the number is one of the few doubles within twice that distance, and SQL tells
//! which by its text: a body holds each real as the shortest text that reads back as it, which
//! is the same for every writer of that double (up to a `+` in the exponent, dropped on both
//! sides).

use crate::ast::Num;

/// How many doubles away from the right one SQLite's reading of a real may land. A sweep over
/// every binary exponent (the `sqlite_reads_reals_within_a_few_doubles` test) finds at most 3,
/// near the subnormals.
pub(crate) const SQLITE_ULPS: usize = 4;

/// What SQL needs to compare reals with a numeric literal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    /// SQLite's reading of a real outside `[low, high]` is on the same side of the literal as
    /// the real itself.
    pub low: f64,
    pub high: f64,
    /// Every double a real read inside `[low, high]` can be, in order.
    pub doubles: Vec<f64>,
}

impl Window {
    #[allow(clippy::cast_precision_loss)]
    pub fn of(n: Num) -> Window {
        // The double nearest the literal (an integer beyond 2^53 may fall between two).
        let center = match n {
            Num::Real(r) => r,
            Num::Int(i) => i as f64,
        };
        let step = |mut x: f64, count: usize, up: bool| {
            for _ in 0..count {
                x = if up { x.next_up() } else { x.next_down() };
            }
            x
        };
        let reach = 2 * SQLITE_ULPS;
        let mut doubles = Vec::with_capacity(2 * reach + 2);
        let mut x = step(center, reach, false);
        while doubles.len() <= 2 * reach + 1 && x <= step(center, reach, true) {
            if x.is_finite() {
                doubles.push(x);
            }
            if x == f64::INFINITY {
                break;
            }
            x = x.next_up();
        }
        Window { low: step(center, SQLITE_ULPS, false), high: step(center, SQLITE_ULPS, true), doubles }
    }

    /// The texts of the doubles of the window that `holds` picks, as SQL compares them: the
    /// shortest text reading back as the double, without `+` (zero in both of its spellings).
    pub fn texts(&self, holds: impl Fn(Num) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        for &d in &self.doubles {
            if !holds(Num::Real(d)) {
                continue;
            }
            if d == 0.0 {
                for zero in ["0.0", "-0.0"] {
                    if !out.iter().any(|t| t == zero) {
                        out.push(zero.to_owned());
                    }
                }
            } else {
                out.push(serde_json::to_string(&d).unwrap_or_default().replace('+', ""));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;

    #[test]
    fn the_window_holds_the_doubles_around_the_literal() {
        let w = Window::of(Num::Real(1.5e308));
        assert_eq!(w.doubles.len(), 4 * SQLITE_ULPS + 1);
        assert!(w.low < 1.5e308 && 1.5e308 < w.high);
        let equal = w.texts(|d| d.compare(Num::Real(1.5e308)) == Ordering::Equal);
        assert_eq!(equal, ["1.5e308"]);
        let below = w.texts(|d| d.compare(Num::Real(1.5e308)) == Ordering::Less);
        assert_eq!(below.len(), 2 * SQLITE_ULPS);
        assert_eq!(below.last().map(String::as_str), Some("1.4999999999999998e308"));
    }

    #[test]
    fn zero_matches_both_spellings_and_the_top_stops_at_the_largest_double() {
        let w = Window::of(Num::Real(-0.0));
        assert_eq!(w.texts(|d| d.compare(Num::Int(0)) == Ordering::Equal), ["0.0", "-0.0"]);
        assert_eq!(w.texts(|d| d.compare(Num::Int(0)) == Ordering::Greater)[0], "5e-324");
        let w = Window::of(Num::Real(f64::MAX));
        assert_eq!(w.high, f64::INFINITY);
        assert_eq!(w.doubles.last(), Some(&f64::MAX));
    }

    #[test]
    fn an_integer_between_two_doubles_equals_none() {
        let n = Num::Int(9_007_199_254_740_993);
        let w = Window::of(n);
        assert!(w.texts(|d| d.compare(n) == Ordering::Equal).is_empty());
        assert_eq!(w.texts(|d| d.compare(n) == Ordering::Greater)[0], "9007199254740994.0");
    }
}
