//! The one rule for options spelled as strings in the Python API (`policy="even"`,
//! `on_error="skip"`, `dtype="float32"`, `pad_mode="reflect"`...): each option type lists its
//! spellings once ([`Choice::CHOICES`]), and [`Choice::parse`] turns a spelling into the value
//! or into an [`Error::InvalidArgument`] naming the op, the argument, the value and the valid
//! spellings. Core's option types (`ShardPolicy`, `PackMode`, `OnError`) and io's (audio and
//! image options) implement it; the bindings convert through it (`stokehold-python/src/
//! options.rs`, `Wrap<T>`), and nothing else parses these strings.
//!
//! ```
//! use stokehold_core::choice::Choice;
//! use stokehold_core::ShardPolicy;
//! assert_eq!(ShardPolicy::parse("shard", "even").unwrap(), ShardPolicy::Even);
//! let err = ShardPolicy::parse("shard", "odd").unwrap_err().to_string();
//! assert!(err.contains("shard(policy='odd'): must be one of 'drop', 'pad', 'even'"));
//! ```

use crate::error::{Error, Result};

/// An option with a fixed set of string spellings.
pub trait Choice: Copy + PartialEq + Sized + 'static {
    /// The argument's name in the Python API (`"dtype"`, `"pad_mode"`...).
    const ARG: &'static str;
    /// Every value with its spelling, in the order the error lists them.
    const CHOICES: &'static [(&'static str, Self)];
    /// Whether spellings match in any case (TensorFlow's compression names: `"GZIP"` and
    /// `"gzip"`); the spellings in [`Choice::CHOICES`] are then lower case.
    const IGNORE_CASE: bool = false;

    /// The value spelled `s`, if it is one.
    fn from_name(s: &str) -> Option<Self> {
        let s = if Self::IGNORE_CASE {
            std::borrow::Cow::Owned(s.to_ascii_lowercase())
        } else {
            std::borrow::Cow::Borrowed(s)
        };
        Self::CHOICES.iter().find(|(n, _)| *n == s).map(|&(_, v)| v)
    }

    /// What a valid value is: `must be one of 'float32', 'int16'` (the end of [`Choice::parse`]'s
    /// message, and of the CLI's, whose parser names the flag itself).
    fn expected() -> String {
        let valid: Vec<String> = Self::CHOICES.iter().map(|(n, _)| quote(n)).collect();
        format!("must be one of {}", valid.join(", "))
    }

    /// The value spelled `s`, or an error naming `op`, the argument, `s` and the spellings:
    /// `load_audio(dtype='int8'): must be one of 'float32', 'int16'`.
    fn parse(op: &str, s: &str) -> Result<Self> {
        Self::from_name(s).ok_or_else(|| {
            Error::invalid(format!(
                "{op}({}={}): {}",
                Self::ARG,
                quote(s),
                Self::expected()
            ))
        })
    }

    /// This value's spelling.
    fn name(self) -> &'static str {
        Self::CHOICES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(n, _)| n)
    }
}

/// `s` as Python's `repr` writes a str (single quotes unless it holds one), so a message reads
/// as the call that was made, like the Python layer's own argument errors.
pub fn quote(s: &str) -> String {
    let s = s.replace('\\', "\\\\");
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\'', "\\'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Side {
        Left,
        Right,
    }

    impl Choice for Side {
        const ARG: &'static str = "side";
        const CHOICES: &'static [(&'static str, Self)] =
            &[("left", Side::Left), ("right", Side::Right)];
    }

    #[test]
    fn a_bad_spelling_names_the_op_the_argument_and_the_choices() {
        assert_eq!(Side::parse("x", "right").unwrap(), Side::Right);
        assert_eq!(Side::Left.name(), "left");
        let e = Side::parse("pad", "up").unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        assert_eq!(
            e.to_string().split_once("pad").unwrap().1,
            "(side='up'): must be one of 'left', 'right'"
        );
        assert_eq!(Side::expected(), "must be one of 'left', 'right'");
        assert_eq!(
            Side::from_name("Left"),
            None,
            "case counts unless IGNORE_CASE"
        );
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Loud {
        Yes,
    }

    impl Choice for Loud {
        const ARG: &'static str = "loud";
        const CHOICES: &'static [(&'static str, Self)] = &[("yes", Loud::Yes)];
        const IGNORE_CASE: bool = true;
    }

    #[test]
    fn ignore_case_matches_any_case() {
        assert_eq!(Loud::parse("x", "YES").unwrap(), Loud::Yes);
        assert!(Loud::parse("x", "no").is_err());
    }
}
