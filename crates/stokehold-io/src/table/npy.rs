//! The `.npy` header: parsing with validation, and writing.
//!
//! Layout (numpy's `format.py`): the magic `\x93NUMPY`, a major and minor version byte, the header
//! length (u16 little-endian for version 1, u32 for versions 2 and 3), then a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` padded with spaces and a final
//! newline so that the data starts at a multiple of 64 bytes. Version 3 only allows utf-8 in the
//! header; we accept the same ASCII subset for all three.

use stokehold_core::{DType, Error, Result};

/// The magic string at the start of every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A validated `.npy` header.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyHeader {
    /// Element type (little-endian).
    pub dtype: DType,
    /// Array shape (rank >= 1 for a table).
    pub shape: Vec<usize>,
    /// Byte offset of the data (header included).
    pub data_offset: usize,
    /// Format version (major, minor).
    pub version: (u8, u8),
}

impl NpyHeader {
    /// Bytes of array data the header promises (`None` on overflow).
    pub fn data_len(&self) -> Option<u64> {
        let mut n = self.dtype.size()? as u64;
        for d in &self.shape {
            n = n.checked_mul(*d as u64)?;
        }
        Some(n)
    }
}

/// Parses and validates the header at the start of `buf`; `path` names the file in errors.
pub fn parse_header(buf: &[u8], path: &std::path::Path) -> Result<NpyHeader> {
    let corrupt = |offset: u64, reason: String| Error::corrupt(path, offset, reason);
    if buf.len() < 10 || &buf[..6] != MAGIC {
        return Err(corrupt(
            0,
            "not a .npy file: missing the \\x93NUMPY magic".into(),
        ));
    }
    let version = (buf[6], buf[7]);
    let (len, start) = match version.0 {
        1 => (u16::from_le_bytes([buf[8], buf[9]]) as usize, 10),
        2 | 3 if buf.len() >= 12 => (
            u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize,
            12,
        ),
        2 | 3 => return Err(corrupt(8, "file ends inside the header length".into())),
        v => {
            return Err(corrupt(
                6,
                format!(
                    "unsupported .npy format version {v}.{}; know 1, 2, 3",
                    version.1
                ),
            ))
        }
    };
    if version.1 != 0 {
        return Err(corrupt(
            7,
            format!(
                "unsupported .npy format version {}.{}; know 1.0, 2.0, 3.0",
                version.0, version.1
            ),
        ));
    }
    let end = start + len;
    // The format asks for the data to start 64-aligned (16 in numpy before 1.9); a table maps
    // its data in place, so a header that breaks the alignment is refused.
    if end % 16 != 0 {
        return Err(corrupt(
            8,
            format!("header ends at byte {end}, not a multiple of 16 (the format aligns data)"),
        ));
    }
    if buf.len() < end {
        return Err(corrupt(
            start as u64,
            format!(
                "header of {len} bytes runs past the end of the file ({} bytes)",
                buf.len()
            ),
        ));
    }
    let text = std::str::from_utf8(&buf[start..end])
        .map_err(|e| corrupt(start as u64, format!("header is not utf-8: {e}")))?;
    let (dict, rest) =
        parse_dict(text).map_err(|r| corrupt(start as u64, format!("bad header {text:?}: {r}")))?;
    // After the dict: padding spaces and one newline, as numpy writes it.
    let pad = &text[rest..];
    if !pad.ends_with('\n')
        || !pad[..pad.len().saturating_sub(1)]
            .bytes()
            .all(|c| c == b' ')
    {
        return Err(corrupt(
            (start + rest) as u64,
            format!("header must end in padding spaces and a newline after the dict: {text:?}"),
        ));
    }
    let mut keys: Vec<&str> = dict.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if keys != ["descr", "fortran_order", "shape"] {
        return Err(corrupt(
            start as u64,
            format!("header keys must be exactly descr, fortran_order, shape; got {keys:?}"),
        ));
    }
    let field = |k: &str| {
        dict.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v)
            .ok_or_else(|| corrupt(start as u64, format!("header has no {k:?} key: {text:?}")))
    };
    let (Lit::Str(descr), Lit::Bool(fortran), Lit::Tuple(shape)) =
        (field("descr")?, field("fortran_order")?, field("shape")?)
    else {
        return Err(corrupt(
            start as u64,
            format!("header keys have the wrong types: {text:?}"),
        ));
    };
    let dtype = parse_descr(descr).map_err(|r| corrupt(start as u64, r))?;
    if *fortran && shape.len() > 1 {
        return Err(corrupt(
            start as u64,
            format!(
                "Fortran-ordered array (shape {shape:?}) refused: rows must be contiguous; \
                 save np.ascontiguousarray(a) instead"
            ),
        ));
    }
    if shape.is_empty() {
        return Err(corrupt(
            start as u64,
            "a table needs rank >= 1; this array is a scalar".into(),
        ));
    }
    Ok(NpyHeader {
        dtype,
        shape: shape.clone(),
        data_offset: end,
        version,
    })
}

/// Maps a numpy type string (`'<f4'`, `'|u1'`, ...) to a dtype; big-endian, object, string,
/// structured and other types are refused with the reason.
fn parse_descr(d: &str) -> std::result::Result<DType, String> {
    // At the first char's end, not byte 1: a descr may start with any UTF-8 char (fuzzing found
    // a panic here on 'đ8').
    let (order, code) = d.split_at(d.chars().next().map_or(0, char::len_utf8));
    if !matches!(order, "<" | "|" | "=") {
        if order == ">" {
            return Err(format!(
                "big-endian dtype '{d}' refused (tables are little-endian, mapped without \
                 conversion); save a.astype(a.dtype.newbyteorder('<'))"
            ));
        }
        return Err(format!("unknown dtype '{d}'"));
    }
    Ok(match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "i2" => DType::I16,
        "u4" => DType::U32,
        "i4" => DType::I32,
        "u8" => DType::U64,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "O" => {
            return Err(
                "object dtype ('|O') refused: an array of Python objects cannot be \
                        memory-mapped; save a fixed-size numeric dtype"
                    .into(),
            )
        }
        _ => {
            return Err(format!(
                "dtype '{d}' is not supported by tables (numeric and bool only)"
            ))
        }
    })
}

/// The `.npy` descr of a dtype, or `None` where numpy has none (bfloat16, bytes).
pub fn descr(dtype: DType) -> Option<&'static str> {
    dtype.numpy_typestr()
}

/// A version 1 (or 2, if needed) header padded to `min_len` bytes or more, ending on a multiple
/// of 64. Writers that learn the row count only at the end reserve room with `min_len`.
pub fn encode_header(dtype: DType, shape: &[usize], min_len: usize) -> Result<Vec<u8>> {
    let d = descr(dtype).ok_or_else(|| Error::invalid(format!("{dtype} has no .npy dtype")))?;
    let dims: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
    let shape_txt = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let dict = format!("{{'descr': '{d}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    for (major, prefix) in [(1u8, 10usize), (2, 12)] {
        let total = (prefix + dict.len() + 1).max(min_len).next_multiple_of(64);
        let hlen = total - prefix;
        if major == 1 && hlen > u16::MAX as usize {
            continue;
        }
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[major, 0]);
        match major {
            1 => out.extend_from_slice(&(hlen as u16).to_le_bytes()),
            _ => out.extend_from_slice(&(hlen as u32).to_le_bytes()),
        }
        out.extend_from_slice(dict.as_bytes());
        out.resize(total - 1, b' ');
        out.push(b'\n');
        return Ok(out);
    }
    unreachable!("a version 2 header always fits")
}

/// A value in the header dict.
#[derive(Debug)]
enum Lit {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// Parses the restricted Python dict literal numpy writes: string keys; string, bool or
/// int-tuple values. Anything else is an error (e.g. a structured dtype's list descr). Returns
/// the entries and the byte after the closing brace.
fn parse_dict(text: &str) -> std::result::Result<(Vec<(String, Lit)>, usize), String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let mut out = Vec::new();
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.ws();
        p.expect(b':')?;
        p.ws();
        let val = match p.peek() {
            Some(b'\'' | b'"') => Lit::Str(p.string()?),
            Some(b'(') => Lit::Tuple(p.tuple()?),
            Some(b'[') => {
                return Err(format!(
                    "{key:?} is a list (structured dtypes are not supported)"
                ))
            }
            _ if p.word("True") => Lit::Bool(true),
            _ if p.word("False") => Lit::Bool(false),
            _ => return Err(format!("unexpected value for {key:?} at byte {}", p.i)),
        };
        out.push((key, val));
        p.ws();
        if !p.eat(b',') {
            p.ws();
            p.expect(b'}')?;
            break;
        }
    }
    Ok((out, p.i))
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += hit as usize;
        hit
    }
    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        match self.eat(c) {
            true => Ok(()),
            false => Err(format!("expected {:?} at byte {}", c as char, self.i)),
        }
    }
    fn word(&mut self, w: &str) -> bool {
        let hit = self.s[self.i..].starts_with(w.as_bytes());
        self.i += if hit { w.len() } else { 0 };
        hit
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        let q = self
            .peek()
            .filter(|c| *c == b'\'' || *c == b'"')
            .ok_or(format!("expected a string at byte {}", self.i))?;
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|c| *c == q)
            .ok_or("unterminated string")?;
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }
    fn tuple(&mut self) -> std::result::Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                return Ok(dims);
            }
            let start = self.i;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
            let txt = std::str::from_utf8(&self.s[start..self.i]).expect("digits");
            dims.push(
                txt.parse()
                    .map_err(|_| format!("bad dimension at byte {start}"))?,
            );
            self.ws();
            if !self.eat(b',') {
                self.ws();
                self.expect(b')')?;
                // `(2)` is the integer 2 in Python, not a tuple: numpy refuses it as a shape.
                if dims.len() == 1 {
                    return Err(format!(
                        "shape ({}) is not a tuple; write ({},)",
                        dims[0], dims[0]
                    ));
                }
                return Ok(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(h: &[u8]) -> Result<NpyHeader> {
        parse_header(h, Path::new("x.npy"))
    }

    #[test]
    fn encoded_headers_parse_back_aligned() {
        for (dt, shape) in [
            (DType::F32, vec![3, 4]),
            (DType::U8, vec![7]),
            (DType::I64, vec![0, 2, 5]),
        ] {
            let h = encode_header(dt, &shape, 0).unwrap();
            assert_eq!(h.len() % 64, 0);
            let p = parse(&h).unwrap();
            assert_eq!(
                (p.dtype, p.shape, p.data_offset, p.version),
                (dt, shape, h.len(), (1, 0))
            );
        }
        assert_eq!(encode_header(DType::F32, &[1], 200).unwrap().len(), 256);
    }

    /// Found by the `npy_header` fuzz target: a descr starting with a multi-byte char panicked
    /// (a string split inside a char) instead of being refused.
    #[test]
    fn a_descr_starting_with_a_multibyte_char_is_refused_not_a_panic() {
        let dict = "{'descr': '\u{111}8', 'fortran_order': False, 'shape': (3,), }";
        let mut h = MAGIC.to_vec();
        h.extend([1, 0]);
        // Padded so the header is 128 bytes (aligned): only the descr is wrong.
        let body = format!("{dict}{}\n", " ".repeat(128 - 10 - 1 - dict.len()));
        h.extend((body.len() as u16).to_le_bytes());
        h.extend(body.as_bytes());
        let err = parse(&h).unwrap_err().to_string();
        assert!(err.contains("dtype"), "{err}");
    }

    #[test]
    fn refusals_say_why() {
        let mk = |dict: &str| {
            // Padded as numpy pads, so that only the dict is wrong.
            let total = (10 + dict.len() + 1).next_multiple_of(64);
            let mut h = MAGIC.to_vec();
            h.extend_from_slice(&[1, 0]);
            h.extend_from_slice(&((total - 10) as u16).to_le_bytes());
            h.extend_from_slice(dict.as_bytes());
            h.resize(total - 1, b' ');
            h.push(b'\n');
            parse(&h).unwrap_err().to_string()
        };
        let e = mk("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }");
        assert!(e.contains("Fortran") && e.contains("x.npy"), "{e}");
        assert!(
            mk("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }").contains("object dtype")
        );
        assert!(
            mk("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }").contains("big-endian")
        );
        assert!(mk("{'descr': '<U5', 'fortran_order': False, 'shape': (2,), }").contains("'<U5'"));
        assert!(
            mk("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }")
                .contains("structured")
        );
        assert!(mk("{'descr': '<f4', 'fortran_order': False, 'shape': (), }").contains("scalar"));
        let e = parse(b"\x93NUMPY\x04\x00\x10\x00").unwrap_err().to_string();
        assert!(e.contains("version 4"), "{e}");
        assert!(parse(b"PK\x03\x04 not npy")
            .unwrap_err()
            .to_string()
            .contains("magic"));
    }
}
