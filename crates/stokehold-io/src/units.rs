//! Figures for people: byte counts with binary units and counts with their noun in the right
//! number, as the CLI and the inspection reports print them.
//!
//! ```
//! use stokehold_io::units::{bytes, count};
//! assert_eq!(bytes(548), "548 B");
//! assert_eq!(bytes(3 << 20), "3.0 MiB");
//! assert_eq!(count(1, "record"), "1 record");
//! assert_eq!(count(2, "record"), "2 records");
//! ```

/// `n` bytes as `"548 B"`, `"1.5 KiB"`, `"3.0 MiB"`, `"2.1 GiB"`, `"1.0 TiB"`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// `"1 record"`, `"0 records"`, `"2 records"` (nouns that take an `s`; pass the plural form
/// yourself for the others via [`count_with`]).
pub fn count(n: u64, noun: &str) -> String {
    count_with(n, noun, &format!("{noun}s"))
}

/// `n` with `one` when it is 1, else `many`.
pub fn count_with(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_plurals() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 << 30), "5.0 GiB");
        assert_eq!(count(0, "file"), "0 files");
        assert_eq!(count_with(1, "entry", "entries"), "1 entry");
    }
}
