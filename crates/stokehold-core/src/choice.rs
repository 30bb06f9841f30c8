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

    /// The value spelled `s`, if it is one.
    fn from_name(s: &str) -> Option<Self> {
        Self::CHOICES.iter().find(|(n, _)| *n == s).map(|&(_, v)| v)
    }

    /// The value spelled `s`, or an error naming `op`, the argument, `s` and the spellings:
    /// `load_audio(dtype='int8'): must be one of 'float32', 'int16'`.
    fn parse(op: &str, s: &str) -> Result<Self> {
        Self::from_name(s).ok_or_else(|| {
            let valid: Vec<String> = Self::CHOICES.iter().map(|(n, _)| quote(n)).collect();
            Error::invalid(format!(
                "{op}({}={}): must be one of {}",
                Self::ARG,
                quote(s),
                valid.join(", ")
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
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
    }
}
