//! A protobuf wire-format walker for `tf.train.Example`, for the parse hot path.
//!
//! prost decodes a whole Example into maps and vectors (an allocation per feature and per
//! string); parsing a batch only needs to find the features of the spec and copy their values
//! into the batch buffers. This walker finds them without allocating and follows protobuf's
//! merge rules where they matter: a later map entry for a key replaces an earlier one, repeated
//! occurrences of a `Feature` merge (the oneof's last kind wins, lists of that kind concatenate),
//! packed and unpacked encodings of numbers are both accepted, unknown fields are skipped.

/// A malformed message: what was wrong and where (offset in the record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Offset in the record.
    pub at: usize,
    /// What was wrong.
    pub what: &'static str,
}

type W<T> = Result<T, WireError>;

/// The list kinds of a `tf.train.Feature` (the oneof's field numbers).
pub const BYTES: u8 = 1;
/// FloatList.
pub const FLOAT: u8 = 2;
/// Int64List.
pub const INT64: u8 = 3;

/// Reads a varint at `*p`, advancing it.
#[inline]
pub fn varint(b: &[u8], p: &mut usize) -> W<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let Some(&byte) = b.get(*p) else {
            return Err(WireError {
                at: *p,
                what: "truncated varint",
            });
        };
        *p += 1;
        if i == 9 && byte > 1 {
            return Err(WireError {
                at: *p - 1,
                what: "varint overflows 64 bits",
            });
        }
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(v);
        }
    }
    unreachable!("the tenth byte returns or fails")
}

/// One field: its number, wire type, and for length-delimited fields the payload range
/// (for other wire types the range of the value's bytes).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Field number.
    pub num: u64,
    /// Wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
    pub wt: u8,
    /// Start of the value / payload.
    pub start: usize,
    /// End of the value / payload.
    pub end: usize,
}

/// Iterates the fields of the message `b[start..end]`.
pub struct Fields<'a> {
    b: &'a [u8],
    p: usize,
    end: usize,
}

impl<'a> Fields<'a> {
    /// Fields of `b[start..end]`.
    pub fn new(b: &'a [u8], start: usize, end: usize) -> Self {
        Fields { b, p: start, end }
    }

    /// The next field, `None` at the end of the message.
    #[inline]
    pub fn next_field(&mut self) -> W<Option<Field>> {
        if self.p >= self.end {
            return Ok(None);
        }
        let b = &self.b[..self.end];
        let at = self.p;
        let key = varint(b, &mut self.p)?;
        let (num, wt) = (key >> 3, (key & 7) as u8);
        if num == 0 {
            return Err(WireError {
                at,
                what: "field number 0",
            });
        }
        let start = self.p;
        let size = match wt {
            0 => {
                varint(b, &mut self.p)?;
                0
            }
            1 => 8,
            2 => {
                let n = varint(b, &mut self.p)?;
                usize::try_from(n).map_err(|_| WireError {
                    at,
                    what: "length overflows",
                })?
            }
            5 => 4,
            _ => {
                return Err(WireError {
                    at,
                    what: "unsupported wire type (groups are not used)",
                })
            }
        };
        let start = if wt == 2 { self.p } else { start };
        let end = self.p.checked_add(size).filter(|e| *e <= self.end);
        let end = end.ok_or(WireError {
            at,
            what: "field runs past the end of its message",
        })?;
        self.p = end;
        Ok(Some(Field {
            num,
            wt,
            start,
            end,
        }))
    }
}

/// Where the values of one feature of one record are: the kind and up to a few list messages.
#[derive(Debug, Default, Clone)]
pub struct Slot {
    /// Kind of the last list seen (0: the feature is absent or holds no list).
    pub kind: u8,
    /// Present in the record (maybe with no values).
    pub present: bool,
    /// Ranges of the list messages of `kind` to concatenate (a trailing run; usually one).
    pub lists: Vec<(usize, usize)>,
}

impl Slot {
    fn reset(&mut self) {
        self.kind = 0;
        self.present = false;
        self.lists.clear();
    }
}

/// Finds the features named by `lookup` in one serialized Example, filling `slots`
/// (one per spec feature, reset first). `lookup(key)` gives a key's slot index.
pub fn scan_example(
    rec: &[u8],
    slots: &mut [Slot],
    lookup: &dyn Fn(&[u8]) -> Option<usize>,
) -> W<()> {
    slots.iter_mut().for_each(Slot::reset);
    let mut top = Fields::new(rec, 0, rec.len());
    while let Some(f) = top.next_field()? {
        if f.num == 1 && f.wt == 2 {
            let mut feats = Fields::new(rec, f.start, f.end);
            while let Some(e) = feats.next_field()? {
                if e.num == 1 && e.wt == 2 {
                    scan_entry(rec, e.start, e.end, slots, lookup)?;
                }
            }
        }
    }
    Ok(())
}

/// One map entry `{key = 1, value = 2}`; the last entry for a key replaces earlier ones.
fn scan_entry(
    rec: &[u8],
    start: usize,
    end: usize,
    slots: &mut [Slot],
    lookup: &dyn Fn(&[u8]) -> Option<usize>,
) -> W<()> {
    // First pass: the key (last occurrence wins; absent means "").
    let mut key: &[u8] = b"";
    let mut fs = Fields::new(rec, start, end);
    while let Some(f) = fs.next_field()? {
        if f.num == 1 && f.wt == 2 {
            key = &rec[f.start..f.end];
        }
    }
    let Some(i) = lookup(key) else { return Ok(()) };
    let slot = &mut slots[i];
    slot.reset();
    slot.present = true;
    let mut fs = Fields::new(rec, start, end);
    while let Some(f) = fs.next_field()? {
        if f.num == 2 && f.wt == 2 {
            let mut kinds = Fields::new(rec, f.start, f.end);
            while let Some(k) = kinds.next_field()? {
                if (1..=3).contains(&k.num) && k.wt == 2 {
                    let kind = k.num as u8;
                    if kind != slot.kind {
                        slot.kind = kind;
                        slot.lists.clear();
                    }
                    slot.lists.push((k.start, k.end));
                }
            }
        }
    }
    Ok(())
}

/// Appends the values of the lists of `slot` to `out`: raw bytes for a BytesList (pushing each
/// string's end offset to `offsets`), little-endian 8-byte i64 or 4-byte f32 for the numbers.
/// Returns the number of values.
pub fn append_values(
    rec: &[u8],
    slot: &Slot,
    out: &mut Vec<u8>,
    offsets: &mut Vec<u64>,
) -> W<usize> {
    let mut count = 0;
    for &(s, e) in &slot.lists {
        let mut fs = Fields::new(rec, s, e);
        while let Some(v) = fs.next_field()? {
            if v.num != 1 {
                continue;
            }
            let body = &rec[v.start..v.end];
            match (slot.kind, v.wt) {
                (BYTES, 2) => {
                    out.extend_from_slice(body);
                    offsets.push(out.len() as u64);
                    count += 1;
                }
                (FLOAT, 2) if body.len() & 3 == 0 => {
                    out.extend_from_slice(body);
                    count += body.len() / 4;
                }
                (FLOAT, 5) => {
                    out.extend_from_slice(body);
                    count += 1;
                }
                (INT64, 2) => {
                    let mut p = 0;
                    while p < body.len() {
                        out.extend_from_slice(&(varint(body, &mut p)? as i64).to_le_bytes());
                        count += 1;
                    }
                }
                (INT64, 0) => {
                    let mut p = 0;
                    out.extend_from_slice(&(varint(body, &mut p)? as i64).to_le_bytes());
                    count += 1;
                }
                _ => {
                    return Err(WireError {
                        at: v.start,
                        what: "bad wire type in a value list",
                    })
                }
            }
        }
    }
    Ok(count)
}
