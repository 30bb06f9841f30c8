//! "Did you mean": what an error says when a name the user gave (a feature in a parse spec or a
//! map) is not there. One place, so every such message lists the same way and suggests the same
//! way.
//!
//! ```
//! use stokehold_core::suggest::{closest, names_present};
//! assert_eq!(closest("lable", &["image", "label"]), Some("label"));
//! assert_eq!(closest("weight", &["image", "label"]), None);
//! assert_eq!(
//!     names_present("lable", &["image", "label"]),
//!     r#"the features present are ["image", "label"]; did you mean "label"?"#
//! );
//! ```

/// The name in `candidates` closest to `name`, if one is close enough to be a typo of it: at
/// most one edit (insertion, deletion, substitution or swap of two neighbours) per three
/// characters, at least one. The first of equally close names wins.
pub fn closest<'a, S: AsRef<str>>(name: &str, candidates: &'a [S]) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| c.as_ref())
        .filter(|c| *c != name)
        .map(|c| (edits(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `the features present are [...]` (sorted), and `did you mean "x"?` when one is [`closest`].
pub fn names_present<S: AsRef<str>>(name: &str, present: &[S]) -> String {
    let mut names: Vec<&str> = present.iter().map(|s| s.as_ref()).collect();
    names.sort_unstable();
    let mut out = format!("the features present are {names:?}");
    if let Some(c) = closest(name, &names) {
        out.push_str(&format!("; did you mean {c:?}?"));
    }
    out
}

/// Optimal string alignment distance over chars: Levenshtein plus swaps of neighbours, so
/// "lable" is one edit from "label". Names are short; a quadratic table is fine.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let sub = d[(i - 1) * w + j - 1] + usize::from(a[i - 1] != b[j - 1]);
                let mut best = sub.min(d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(d[(i - 2) * w + j - 2] + 1);
                }
                best
            };
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_found_and_strangers_are_not() {
        assert_eq!(edits("lable", "label"), 1);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(closest("imgae", &["label", "image"]), Some("image"));
        assert_eq!(closest("labels", &["label"]), Some("label"));
        assert_eq!(
            closest("x", &["y"]),
            Some("y"),
            "one edit is always allowed"
        );
        assert_eq!(closest("id", &["label", "image"]), None);
        assert_eq!(
            closest("label", &["label"]),
            None,
            "the same name is no suggestion"
        );
        let none: [&str; 0] = [];
        assert_eq!(
            names_present("x", &none),
            "the features present are []",
            "an empty record says so"
        );
    }
}
